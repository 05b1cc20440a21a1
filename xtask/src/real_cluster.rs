//! The real control plane, built from upstream's Go modules.
//!
//! Three wrapper modules under `tests/real-cluster/go/` pin everything
//! (go.mod and go.sum committed): `kubernetes` (kube-apiserver,
//! kube-controller-manager, kube-scheduler and kubectl of one release),
//! `etcd` and `kwok`. `k8s.io/kubernetes` cannot be built as a plain
//! dependency: its go.mod points every staging module (k8s.io/api,
//! apimachinery, client-go, ...) at `./staging/...` with `replace`, which Go
//! ignores outside the main module, so the wrapper replaces each one with the
//! published `k8s.io/X v0.N.P` of the same release. The same holds for etcd's
//! server module and its siblings.
//!
//! [`build`] writes `target/real-cluster/bin/*`, kwok's stage file and
//! `versions.txt`. It rebuilds only when a wrapper's go.mod or go.sum, or the Go
//! version, changed (a stamp per module); Go's own module and build caches make
//! even a rebuild mostly link time.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, root, status, target_dir};

/// One Go binary of the control plane.
struct Binary {
    /// The wrapper module under `tests/real-cluster/go/`.
    module: &'static str,
    /// The package main to build.
    package: &'static str,
    /// The file under `target/real-cluster/bin/`.
    name: &'static str,
}

const BINARIES: &[Binary] = &[
    Binary { module: "etcd", package: "go.etcd.io/etcd/server/v3", name: "etcd" },
    Binary { module: "kubernetes", package: "k8s.io/kubernetes/cmd/kube-apiserver", name: "kube-apiserver" },
    Binary { module: "kubernetes", package: "k8s.io/kubernetes/cmd/kube-controller-manager", name: "kube-controller-manager" },
    Binary { module: "kubernetes", package: "k8s.io/kubernetes/cmd/kube-scheduler", name: "kube-scheduler" },
    Binary { module: "kubernetes", package: "k8s.io/kubernetes/cmd/kubectl", name: "kubectl" },
    Binary { module: "kwok", package: "sigs.k8s.io/kwok/cmd/kwok", name: "kwok" },
];

/// kwok's stages (shipped in its module under `kustomize/stage/`) that make a
/// fake Node Ready and keep it so, and take Pods through Running to Succeeded
/// (for Job Pods) within a second or two.
const KWOK_STAGES: &[&str] = &[
    "node/fast/node-initialize.yaml",
    "node/heartbeat/node-heartbeat.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
];

/// Where the binaries land.
pub fn out_dir() -> PathBuf {
    target_dir().join("real-cluster")
}

fn go_dir(module: &str) -> PathBuf {
    root().join("tests/real-cluster/go").join(module)
}

/// `go version`, or `None` when Go is not installed.
pub fn go_version() -> Option<String> {
    let out = Command::new("go").arg("version").output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Builds every binary whose stamp is stale; `Ok(false)` when Go is absent.
pub fn build() -> Result<bool> {
    let Some(go) = go_version() else {
        eprintln!("xtask: Go not found: the real control plane is not built and its tests will be skipped");
        return Ok(false);
    };
    let bin = out_dir().join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| format!("create {}: {e}", bin.display()))?;
    let kubernetes = module_version("kubernetes", "k8s.io/kubernetes")?;
    let mut versions = vec![format!("go: {go}"), format!("kubernetes: {kubernetes}")];
    for module in ["etcd", "kwok"] {
        let path = if module == "etcd" { "go.etcd.io/etcd/server/v3" } else { "sigs.k8s.io/kwok" };
        versions.push(format!("{module}: {}", module_version(module, path)?));
    }
    for binary in BINARIES {
        let stamp_file = bin.join(format!(".{}.stamp", binary.name));
        let stamp = stamp(binary.module, &go)?;
        let target = bin.join(binary.name);
        if target.exists() && std::fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp) {
            continue;
        }
        let mut c = Command::new("go");
        c.current_dir(go_dir(binary.module)).env("CGO_ENABLED", "0");
        c.args(["build", "-trimpath", "-o"]).arg(&target);
        if binary.module == "kubernetes" {
            c.arg("-ldflags").arg(version_ldflags(&kubernetes)?);
        } else {
            c.args(["-ldflags", "-s -w"]);
        }
        c.arg(binary.package);
        let started = std::time::Instant::now();
        status(c)?;
        eprintln!("xtask: built {} in {:.0?}", target.display(), started.elapsed());
        std::fs::write(&stamp_file, stamp).map_err(|e| format!("write {}: {e}", stamp_file.display()))?;
    }
    write_kwok_stages()?;
    let file = out_dir().join("versions.txt");
    std::fs::write(&file, versions.join("\n") + "\n").map_err(|e| format!("write {}: {e}", file.display()))?;
    Ok(true)
}

/// The version of `path` that the wrapper module `module` resolved.
fn module_version(module: &str, path: &str) -> Result<String> {
    go_list(module, path, "{{.Version}}")
}

fn go_list(module: &str, path: &str, format: &str) -> Result<String> {
    let out = Command::new("go")
        .current_dir(go_dir(module))
        .args(["list", "-m", "-f", format, path])
        .output()
        .map_err(|e| format!("go list -m {path}: {e}"))?;
    if !out.status.success() {
        return Err(format!("go list -m {path} in {}: {}", go_dir(module).display(), String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// What a binary was built from: its wrapper's go.mod and go.sum and the Go version.
fn stamp(module: &str, go: &str) -> Result<String> {
    stamp_of(&go_dir(module), go)
}

/// The stamp of a wrapper module in `dir`: changes with its go.mod, go.sum or the Go version.
pub fn stamp_of(dir: &Path, go: &str) -> Result<String> {
    let mut s = format!("{go}\n");
    for file in ["go.mod", "go.sum"] {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
        s.push_str(&text);
    }
    Ok(format!("{:016x}", fnv1a(s.as_bytes())))
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100000001b3))
}

/// The `-X` flags upstream's release build sets (hack/lib/version.sh), for
/// both places a version is read from; without them `/version` says
/// v0.0.0-master and kubectl warns of skew.
fn version_ldflags(version: &str) -> Result<String> {
    let numbers: Vec<&str> = version.trim_start_matches('v').split('.').collect();
    let [major, minor, ..] = numbers.as_slice() else {
        return Err(format!("k8s.io/kubernetes version {version} is not vMAJOR.MINOR.PATCH"));
    };
    let mut flags = String::from("-s -w");
    for package in ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"] {
        for (var, value) in [("gitVersion", version), ("gitMajor", major), ("gitMinor", minor), ("gitTreeState", "clean")] {
            flags.push_str(&format!(" -X {package}.{var}={value}"));
        }
    }
    Ok(flags)
}

/// kwok's standalone binary reads its Stage objects from a file.
fn write_kwok_stages() -> Result {
    let module_dir = PathBuf::from(go_list("kwok", "sigs.k8s.io/kwok", "{{.Dir}}")?);
    let mut all = Vec::new();
    for stage in KWOK_STAGES {
        let path = module_dir.join("kustomize/stage").join(stage);
        all.push(std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?);
    }
    write_if_changed(&out_dir().join("kwok-stages.yaml"), &all.join("\n---\n"))
}

fn write_if_changed(path: &Path, text: &str) -> Result {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    std::fs::write(path, text).map_err(|e| format!("write {}: {e}", path.display()))
}
