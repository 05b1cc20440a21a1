//! Debian packages the tests need (a registry, Prometheus), installed with
//! apt-get when missing, so a clean machine gets them from the project's own
//! scripts.

use std::process::Command;

use crate::{Result, status, succeeds};

/// Installs `package` with apt-get as root and stops the service the package
/// starts (tests start their own servers, and nothing else should hold their
/// ports). `Ok(false)`, said loudly with `skipping` (what goes untested),
/// where apt-get as root is not available; `purpose` says why it is installed.
pub fn install_service_package(package: &str, purpose: &str, skipping: &str) -> Result<bool> {
    let root_user = Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root_user || !succeeds("apt-get", &["--version"]) {
        eprintln!("xtask: SKIPPING {skipping}: {package} cannot be installed here (needs apt-get as root); install Debian's `{package}` package");
        return Ok(false);
    }
    eprintln!("xtask: installing Debian's {package} package ({purpose})");
    let install = || {
        let mut c = Command::new("apt-get");
        c.env("DEBIAN_FRONTEND", "noninteractive").args(["install", "-y", "--no-install-recommends", package]);
        status(c)
    };
    if install().is_err() {
        // A fresh machine may have no package lists yet.
        let mut c = Command::new("apt-get");
        c.args(["update"]);
        status(c)?;
        install()?;
    }
    if succeeds("systemctl", &["is-active", "--quiet", package]) {
        let mut c = Command::new("systemctl");
        c.args(["disable", "--now", package]);
        status(c)?;
    }
    Ok(true)
}
