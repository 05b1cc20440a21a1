//! Publishing the image: pushed from its layout by oras, signed by cosign,
//! its SBOM attached as a signed cosign attestation, and both checked with
//! `cosign verify` before the digest is printed. The tools are the ones
//! `cargo xtask test` builds for the registry tests (`target/oci/bin/`).
//!
//! Without `--registry` the image goes to a loopback registry (Debian's
//! docker-registry, as the registry tests start it) whose storage stays in
//! `target/image/registry/`: `docker-registry serve target/image/registry.yml`
//! serves it again, and the image-as-Pod test pulls from a copy of it.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Result, status};

/// The CLIs (built by `oci::build_tools`).
pub struct Tools {
    pub oras: PathBuf,
    pub cosign: PathBuf,
}

/// A registry reference's `host:port`, and whether it is spoken to over
/// plain HTTP (loopback only).
pub struct Registry {
    pub addr: String,
    child: Option<Child>,
}

impl Registry {
    pub fn plain_http(&self) -> bool {
        ["127.0.0.1:", "localhost:", "[::1]:"].iter().any(|p| self.addr.starts_with(p))
    }

    /// A user's registry (`--registry HOST[:PORT]`).
    pub fn remote(addr: &str) -> Registry {
        Registry { addr: addr.to_string(), child: None }
    }

    /// docker-registry on a free loopback port, its storage in `dir/registry/`.
    pub fn loopback(dir: &Path) -> Result<Registry> {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| format!("find a free port: {e}"))?.port();
        let addr = format!("127.0.0.1:{port}");
        let config = dir.join("registry.yml");
        let storage = dir.join("registry");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {addr}\n",
                storage.display()
            ),
        )
        .map_err(|e| format!("write {}: {e}", config.display()))?;
        let log = std::fs::File::create(dir.join("registry.log")).map_err(|e| format!("create the registry's log: {e}"))?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start docker-registry (Debian's package; `cargo xtask test` installs it): {e}"))?;
        let registry = Registry { addr, child: Some(child) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !answers(&registry.addr) {
            if Instant::now() > deadline {
                return Err(format!("the loopback registry did not answer on {} (see {})", registry.addr, dir.join("registry.log").display()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(registry)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Whether `GET /v2/` gets an HTTP answer (200, or 401 from a registry with auth).
fn answers(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = TcpStream::connect(addr) else { return false };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(format!("GET /v2/ HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.")
}

fn tool(program: &Path, home: &Path) -> Command {
    let mut c = Command::new(program);
    // cosign and oras keep caches and credentials under $HOME; the image's
    // own directory keeps a build from touching the user's.
    c.env("HOME", home).env("COSIGN_PASSWORD", std::env::var("COSIGN_PASSWORD").unwrap_or_default());
    c
}

/// Pushes the layout `layout` (tag `tag`) to `registry/repository:tag`; the
/// digest oras reports must be `digest`, the one the layout was written with.
pub fn push(tools: &Tools, home: &Path, registry: &Registry, layout: &Path, repository: &str, tag: &str, digest: &str) -> Result {
    let mut c = tool(&tools.oras, home);
    c.args(["cp", "--from-oci-layout"]).arg(format!("{}:{tag}", layout.display())).arg(format!("{}/{repository}:{tag}", registry.addr));
    if registry.plain_http() {
        c.arg("--to-plain-http");
    }
    eprintln!("xtask: running {c:?}");
    let out = c.output().map_err(|e| format!("cannot start oras: {e}"))?;
    let printed = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("oras cp failed:\n{printed}"));
    }
    if !printed.contains(digest) {
        return Err(format!("oras pushed a manifest other than the layout's {digest}:\n{printed}"));
    }
    Ok(())
}

/// A key pair at `dir/cosign.key` and `.pub` (empty password), made once:
/// what signs an image when no `--cosign-key` is given.
pub fn test_key(tools: &Tools, dir: &Path) -> Result<PathBuf> {
    let key = dir.join("cosign.key");
    if !key.exists() {
        let mut c = tool(&tools.cosign, dir);
        c.current_dir(dir).args(["generate-key-pair", "--output-key-prefix", "cosign"]).env("COSIGN_PASSWORD", "");
        status(c)?;
    }
    Ok(key)
}

/// The flags every cosign call against `registry` takes: offline signing
/// (a signing config with no transparency log or timestamp authority: a
/// loopback registry has no Sigstore beside it) and plain HTTP for loopback.
fn cosign_flags(c: &mut Command, registry: &Registry, signing_config: &Path) {
    c.arg("--signing-config").arg(signing_config);
    if registry.plain_http() {
        c.args(["--allow-http-registry", "--allow-insecure-registry"]);
    }
}

fn signing_config(tools: &Tools, home: &Path) -> Result<PathBuf> {
    let config = home.join("signing-config.json");
    if !config.exists() {
        let mut c = tool(&tools.cosign, home);
        c.args(["signing-config", "create", "--out"]).arg(&config);
        status(c)?;
    }
    Ok(config)
}

/// Signs `reference` (REGISTRY/REPO@DIGEST) with `key` and attaches `sbom`
/// (CycloneDX JSON) as a signed attestation of type `cyclonedx`.
pub fn sign_and_attest(tools: &Tools, home: &Path, registry: &Registry, reference: &str, key: &Path, sbom: &Path) -> Result {
    let config = signing_config(tools, home)?;
    let mut c = tool(&tools.cosign, home);
    c.args(["sign", "-y", "--key"]).arg(key);
    cosign_flags(&mut c, registry, &config);
    c.arg(reference);
    status(c)?;
    let mut c = tool(&tools.cosign, home);
    c.args(["attest", "-y", "--type", "cyclonedx", "--key"]).arg(key).arg("--predicate").arg(sbom);
    cosign_flags(&mut c, registry, &config);
    c.arg(reference);
    status(c)
}

/// `cosign verify` and `cosign verify-attestation --type cyclonedx` of
/// `reference` with the public key `public` (no transparency log, as signed).
pub fn verify(tools: &Tools, home: &Path, registry: &Registry, reference: &str, public: &Path) -> Result {
    for args in [&["verify"][..], &["verify-attestation", "--type", "cyclonedx"][..]] {
        let mut c = tool(&tools.cosign, home);
        c.args(args).arg("--key").arg(public).arg("--insecure-ignore-tlog=true");
        if registry.plain_http() {
            c.args(["--allow-http-registry", "--allow-insecure-registry"]);
        }
        c.arg(reference).stdout(Stdio::null());
        status(c)?;
    }
    Ok(())
}
