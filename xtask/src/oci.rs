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
    crate::debian::install_service_package(
        "docker-registry",
        "the distribution server the registry tests start",
        "the registry tests (docker-registry is missing)",
    )
}
