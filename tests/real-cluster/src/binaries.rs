//! Where `cargo xtask real-cluster` (and `cargo xtask test`) put the control
//! plane's binaries (`$REAL_CLUSTER_DIR` overrides it), and what happens when
//! they are not there.
//!
//! Without Go nothing is built; each test that needs the real control plane
//! then prints that it is skipped and leaves a file named after itself in
//! `target/real-cluster/skipped/`, which `cargo xtask test` counts and prints,
//! so a skip is never a silent pass. When xtask did build them
//! (`REAL_CLUSTER_REQUIRED=1`), a missing binary fails the test instead.

use std::path::{Path, PathBuf};

/// The binaries every control plane needs.
const REQUIRED: &[&str] = &["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"];

/// The built control plane: `target/real-cluster/`.
#[derive(Clone, Debug)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// The built binaries, or `None` (skip recorded) when they are missing.
    pub fn find() -> Option<Binaries> {
        let dir = out_dir();
        let missing: Vec<&str> = REQUIRED.iter().copied().filter(|b| !dir.join("bin").join(b).exists()).collect();
        if missing.is_empty() {
            return Some(Binaries { dir });
        }
        let why = format!("the real control plane is not built ({} missing under {})", missing.join(", "), dir.join("bin").display());
        if std::env::var_os("REAL_CLUSTER_REQUIRED").is_some() {
            panic!("{why}, although cargo xtask built it");
        }
        record_skip(&why);
        None
    }

    /// `target/real-cluster/bin/<name>`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join("bin").join(name)
    }

    /// kwok's Stage objects (from its module's kustomize/stage/).
    pub fn kwok_stages(&self) -> PathBuf {
        self.dir.join("kwok-stages.yaml")
    }

    /// What was built, one `component: version` per line.
    pub fn versions(&self) -> String {
        std::fs::read_to_string(self.dir.join("versions.txt")).unwrap_or_default()
    }
}

/// The workspace's target directory (`CARGO_TARGET_DIR` or `target/`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target"))
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("tests/real-cluster is two levels down").to_path_buf()
}

/// Overrides where the control plane's binaries are found (the `real-cluster`
/// command's `--dir`), for a person running it outside the repository.
pub const DIR_VAR: &str = "REAL_CLUSTER_DIR";

fn out_dir() -> PathBuf {
    std::env::var_os(DIR_VAR).map(PathBuf::from).unwrap_or_else(|| target_dir().join("real-cluster"))
}

/// Prints that the current test is skipped and why, and records it for
/// `cargo xtask test`'s count (the test harness names each test's thread
/// after the test).
pub fn record_skip(why: &str) {
    let test = std::thread::current().name().unwrap_or("unnamed").replace("::", "-");
    eprintln!("SKIPPED {test}: {why}");
    let dir = out_dir().join("skipped");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join(&test), why);
}
