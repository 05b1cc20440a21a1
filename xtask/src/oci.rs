//! The registry tests' tools (crate `tests/oci`): a real registry and the
//! two clients users push and sign plugins with.
//!
//! - [`registry`]: Debian's `docker-registry` package (the CNCF distribution
//!   server), installed with apt-get when missing, as `ops::prometheus`
//!   installs promtool; the service the package may start is stopped (each
//!   test starts its own registry on a free loopback port).
//! - [`build_tools`]: `oras` and `cosign`, each from a wrapper module under
//!   `tests/oci/go/` pinning it (go.mod and go.sum committed), built into
//!   `target/oci/bin/` only when the module or the Go version changed (a
//!   stamp, as helm). Without Go nothing is built and the tests skip loudly.

use std::process::Command;

use crate::real_cluster::{go_version, stamp_of};
use crate::{Result, root, status, succeeds, target_dir};

/// (wrapper module under tests/oci/go, package built, binary name).
const TOOLS: &[(&str, &str, &str)] = &[("oras", "oras.land/oras/cmd/oras", "oras"), ("cosign", "github.com/sigstore/cosign/v3/cmd/cosign", "cosign")];

/// Builds the stale tools; `Ok(false)` when Go is absent.
pub fn build_tools() -> Result<bool> {
    let Some(go) = go_version() else {
        eprintln!("xtask: Go not found: oras and cosign are not built and the registry tests will be skipped");
        return Ok(false);
    };
    let bin = target_dir().join("oci/bin");
    std::fs::create_dir_all(&bin).map_err(|e| format!("create {}: {e}", bin.display()))?;
    for (module, package, name) in TOOLS {
        let dir = root().join("tests/oci/go").join(module);
        let (target, stamp_file) = (bin.join(name), bin.join(format!(".{name}.stamp")));
        let stamp = stamp_of(&dir, &go)?;
        if target.exists() && std::fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp) {
            continue;
        }
        let mut c = Command::new("go");
        c.current_dir(&dir).env("CGO_ENABLED", "0");
        c.args(["build", "-trimpath", "-ldflags", "-s -w", "-o"]).arg(&target).arg(package);
        let started = std::time::Instant::now();
        status(c)?;
        eprintln!("xtask: built {} in {:.0?}", target.display(), started.elapsed());
        std::fs::write(&stamp_file, stamp).map_err(|e| format!("write {}: {e}", stamp_file.display()))?;
    }
    Ok(true)
}

/// Installs Debian's `docker-registry` when missing; `Ok(false)` (said
/// loudly) when it cannot be installed here.
pub fn registry() -> Result<bool> {
    if succeeds("docker-registry", &["--version"]) {
        return Ok(true);
    }
    let root_user = Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root_user || !succeeds("apt-get", &["--version"]) {
        eprintln!(
            "xtask: SKIPPING the registry tests: docker-registry is missing and cannot be installed here (needs apt-get as root); install Debian's `docker-registry` package"
        );
        return Ok(false);
    }
    eprintln!("xtask: installing Debian's docker-registry package (the distribution server the registry tests start)");
    let install = || {
        let mut c = Command::new("apt-get");
        c.env("DEBIAN_FRONTEND", "noninteractive").args(["install", "-y", "--no-install-recommends", "docker-registry"]);
        status(c)
    };
    if install().is_err() {
        // A fresh machine may have no package lists yet.
        let mut c = Command::new("apt-get");
        c.args(["update"]);
        status(c)?;
        install()?;
    }
    // On a machine with systemd the package starts its service on :5000;
    // the tests start their own, and nothing else should listen there.
    if succeeds("systemctl", &["is-active", "--quiet", "docker-registry"]) {
        let mut c = Command::new("systemctl");
        c.args(["disable", "--now", "docker-registry"]);
        status(c)?;
    }
    Ok(true)
}
