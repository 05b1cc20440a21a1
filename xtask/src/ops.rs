//! The operations kit's tools: Helm, built from the Go module proxy, and
//! Prometheus's `promtool` and server, from Debian's `prometheus` package.
//!
//! - [`build_helm`]: `tests/ops/go/helm` is a wrapper module pinning
//!   helm.sh/helm (go.mod and go.sum committed); `target/ops/bin/helm` is
//!   rebuilt only when its go.mod, go.sum or the Go version changed (a stamp,
//!   as the real control plane's binaries). Without Go it is skipped, and the
//!   chart's tests skip loudly.
//! - [`prometheus`]: installs the package with apt-get when `promtool` is
//!   missing (as root; where that is impossible the rule tests and the
//!   scrape test are skipped, loudly), stops the service the package may
//!   have started (the tests start their own server on loopback), then runs
//!   `promtool check rules` and `promtool test rules` on deploy/prometheus/.

use std::process::Command;

use crate::real_cluster::{go_version, stamp_of};
use crate::{Result, root, status, succeeds, target_dir};

/// The Helm version the wrapper module requires (what `helm version` prints).
fn helm_version(dir: &std::path::Path) -> Result<String> {
    let out = Command::new("go")
        .current_dir(dir)
        .args(["list", "-m", "-f", "{{.Version}}", "helm.sh/helm/v4"])
        .output()
        .map_err(|e| format!("go list -m helm.sh/helm/v4: {e}"))?;
    if !out.status.success() {
        return Err(format!("go list -m helm.sh/helm/v4 in {}: {}", dir.display(), String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Builds `target/ops/bin/helm` if stale; `Ok(false)` when Go is absent.
pub fn build_helm() -> Result<bool> {
    let Some(go) = go_version() else {
        eprintln!("xtask: Go not found: helm is not built and the chart's tests will be skipped");
        return Ok(false);
    };
    let module = root().join("tests/ops/go/helm");
    let bin = target_dir().join("ops/bin");
    std::fs::create_dir_all(&bin).map_err(|e| format!("create {}: {e}", bin.display()))?;
    let (target, stamp_file) = (bin.join("helm"), bin.join(".helm.stamp"));
    let stamp = stamp_of(&module, &go)?;
    if target.exists() && std::fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp) {
        return Ok(true);
    }
    let version = helm_version(&module)?;
    let mut c = Command::new("go");
    c.current_dir(&module).env("CGO_ENABLED", "0");
    c.args(["build", "-trimpath", "-o"]).arg(&target);
    // As helm's Makefile sets them for a release build.
    c.arg("-ldflags")
        .arg(format!("-s -w -X helm.sh/helm/v4/internal/version.version={version} -X helm.sh/helm/v4/internal/version.gitTreeState=clean"));
    c.arg("helm.sh/helm/v4/cmd/helm");
    let started = std::time::Instant::now();
    status(c)?;
    eprintln!("xtask: built {} ({version}) in {:.0?}", target.display(), started.elapsed());
    std::fs::write(&stamp_file, stamp).map_err(|e| format!("write {}: {e}", stamp_file.display()))?;
    Ok(true)
}

/// Installs Debian's `prometheus` package when `promtool` is missing, then
/// checks and unit-tests the shipped rules; `Ok(false)` (said loudly) when
/// it cannot be installed here.
pub fn prometheus() -> Result<bool> {
    if !succeeds("promtool", &["--version"])
        && !crate::debian::install_service_package(
            "prometheus",
            "promtool and the server the tests start",
            "the Prometheus rule tests (promtool is missing)",
        )?
    {
        return Ok(false);
    }
    let dir = root().join("deploy/prometheus");
    let mut c = Command::new("promtool");
    c.current_dir(&dir).args(["check", "rules", "rules.yaml"]);
    status(c)?;
    let mut c = Command::new("promtool");
    c.current_dir(&dir).args(["test", "rules", "rules_test.yaml"]);
    status(c)?;
    Ok(true)
}
