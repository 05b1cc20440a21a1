//! The image's SBOM: CycloneDX JSON from Cargo.lock, written by
//! cargo-cyclonedx (the CycloneDX project's own cargo plugin; installed
//! pinned when missing) for the production host's dependency graph: its
//! features and target, so it lists what the image's binary links and no
//! more (no embedded API server, no simulated cluster).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, cargo, root, status};

const VERSION: &str = "0.5.9";

/// Crates a reader of the SBOM looks for first: it is refused without them.
const MUST_LIST: &[&str] = &["wasmtime", "kube", "k8s-openapi", "rustls", "tokio"];

fn installed() -> bool {
    Command::new("cargo")
        .args(["cyclonedx", "--version"])
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains(VERSION))
}

/// Writes `out` (CycloneDX 1.5 JSON) for `host` built with `features` for `target`.
pub fn generate(features: &Features<'_>, out: &Path) -> Result {
    if !installed() {
        eprintln!("xtask: installing cargo-cyclonedx {VERSION} (a few minutes, once)");
        let mut c = cargo();
        c.args(["install", "cargo-cyclonedx", "--locked", "--version", VERSION]);
        status(c)?;
    }
    let mut c = cargo();
    c.args(["cyclonedx", "--manifest-path", "host/Cargo.toml", "--format", "json", "--spec-version", "1.5", "--target", features.target]);
    c.args(["--override-filename", "host.cdx"]);
    if features.no_default {
        c.arg("--no-default-features");
    }
    let generated = status(c);
    // cargo-cyclonedx has no package selection: it writes `host.cdx.json`
    // (the overridden name) beside every member's Cargo.toml. Only the
    // host's is kept, and none is left in the source tree.
    let text = std::fs::read_to_string(root().join("host/host.cdx.json"));
    for dir in member_dirs()? {
        let _ = std::fs::remove_file(dir.join("host.cdx.json"));
    }
    generated?;
    let text = text.map_err(|e| format!("cargo cyclonedx wrote no host/host.cdx.json: {e}"))?;
    check(&text)?;
    std::fs::write(out, &text).map_err(|e| format!("write {}: {e}", out.display()))
}

/// The directory of every workspace member (`cargo metadata --no-deps`).
fn member_dirs() -> Result<Vec<PathBuf>> {
    let mut c = cargo();
    c.args(["metadata", "--no-deps", "--format-version", "1"]);
    let out = c.output().map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata printed no JSON: {e}"))?;
    let packages = metadata["packages"].as_array().ok_or("cargo metadata lists no packages")?;
    Ok(packages.iter().filter_map(|p| Some(Path::new(p["manifest_path"].as_str()?).parent()?.to_path_buf())).collect())
}

/// The feature selection the SBOM describes (the production build's).
pub struct Features<'a> {
    pub target: &'a str,
    pub no_default: bool,
}

/// The SBOM names each of [`MUST_LIST`] with a version.
fn check(text: &str) -> Result {
    let bom: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("the SBOM is not JSON: {e}"))?;
    let components = bom["components"].as_array().ok_or("the SBOM has no components")?;
    for name in MUST_LIST {
        let found = components.iter().find(|c| c["name"] == *name && c["version"].as_str().is_some_and(|v| !v.is_empty()));
        if found.is_none() {
            return Err(format!("the SBOM does not list {name} with its version"));
        }
    }
    if let Some(leak) = components.iter().find(|c| c["name"] == "apiserver" || c["name"] == "simulated-cluster") {
        return Err(format!("the production SBOM lists {} (the embedded cluster is not in the image)", leak["name"]));
    }
    Ok(())
}

/// The version the SBOM gives `name`, for the summary line.
pub fn version_of(sbom: &Path, name: &str) -> Option<String> {
    let bom: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(sbom).ok()?).ok()?;
    bom["components"].as_array()?.iter().find(|c| c["name"] == name)?["version"].as_str().map(str::to_owned)
}
