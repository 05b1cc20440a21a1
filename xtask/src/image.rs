//! `cargo xtask image`: the host's container image, built with no docker
//! and no base image.
//!
//! 1. The production host: `host` without default features (no embedded
//!    API server, simulated cluster or `simulate`/`cluster` commands),
//!    symbols stripped, built beside the workspace's default build (the
//!    dependencies' features are the same: [`build_host`]) and copied to
//!    `target/image/host`; glibc, with the shared libraries it loads copied into the image (see
//!    [`build_host`] for why not musl).
//! 2. The shipped plugins, as `cargo xtask build` makes them, and their
//!    artifacts as that host compiles them ([`precompile`]).
//! 3. The rootfs ([`rootfs`]) as one layer of an OCI image layout
//!    ([`layout`]) in `target/image/oci/`.
//! 4. With `--rootfs DIR`: the same files written under DIR instead, and
//!    nothing pushed (the Dockerfile's build stage; its final stage copies
//!    DIR into `scratch`).
//! 5. Otherwise: the SBOM ([`sbom`]), then the push, the signature and the
//!    SBOM attestation ([`publish`]) to `--registry HOST[:PORT]` or a
//!    loopback registry, both verified with `cosign verify`. Prints the
//!    digest and writes `target/image/published.json` (what the
//!    image-as-Pod test pulls and verifies).
//!
//! Flags: `--registry HOST[:PORT]`, `--repository NAME` (default
//! `operator-host`), `--tag TAG` (default the chart's appVersion),
//! `--cosign-key FILE` (a cosign private key, its password in
//! `COSIGN_PASSWORD`; default: a test key pair made once in
//! `target/image/cosign.key`), `--rootfs DIR`.

mod layout;
mod publish;
mod rootfs;
mod sbom;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, SHIPPED, cargo, status, target_dir};

/// What `cargo xtask image` was asked for.
#[derive(Default)]
pub struct Options {
    registry: Option<String>,
    repository: Option<String>,
    tag: Option<String>,
    cosign_key: Option<PathBuf>,
    rootfs: Option<PathBuf>,
}

impl Options {
    pub fn parse(args: &[String]) -> Result<Options> {
        let mut o = Options::default();
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let mut value = || args.next().cloned().ok_or_else(|| format!("image: {flag} needs a value"));
            match flag.as_str() {
                "--registry" => o.registry = Some(value()?),
                "--repository" => o.repository = Some(value()?),
                "--tag" => o.tag = Some(value()?),
                "--cosign-key" => o.cosign_key = Some(PathBuf::from(value()?)),
                "--rootfs" => o.rootfs = Some(PathBuf::from(value()?)),
                other => {
                    return Err(format!(
                        "image: unknown argument {other:?} (usage: image [--registry HOST[:PORT]] [--repository NAME] [--tag TAG] [--cosign-key FILE] [--rootfs DIR])"
                    ));
                }
            }
        }
        Ok(o)
    }
}

/// `target/image/`: the production build's target directory and the image's files.
pub fn dir() -> PathBuf {
    target_dir().join("image")
}

/// Builds the image and, unless `--rootfs`, publishes it.
pub fn run(options: &Options) -> Result {
    let host = build_host()?;
    crate::build_shipped_plugins()?;
    let plugins = shipped_plugins();
    let precompiled = precompile(&host, &plugins)?;
    let entries = rootfs::entries(&host, &shared_libraries(&host)?, &plugins, &precompiled)?;
    if let Some(to) = &options.rootfs {
        rootfs::write_dir(&entries, to)?;
        eprintln!("xtask: the image's files are in {}", to.display());
        return Ok(());
    }
    let tag = match &options.tag {
        Some(t) => t.clone(),
        None => chart_app_version()?,
    };
    let repository = options.repository.clone().unwrap_or_else(|| "operator-host".to_string());
    let dir = dir();
    let written = layout::write(&entries, &dir.join("oci"), &tag)?;
    let sbom = dir.join("sbom.cdx.json");
    sbom::generate(&sbom::Features { target: &crate::host_triple()?, no_default: true }, &sbom)?;

    if !crate::oci::registry()? || !crate::oci::build_tools()? {
        return Err(
            "publishing the image needs docker-registry (Debian's package, for the loopback registry), oras and cosign (built with Go)".into()
        );
    }
    let bin = target_dir().join("oci/bin");
    let tools = publish::Tools { oras: bin.join("oras"), cosign: bin.join("cosign") };
    let home = dir.join("home");
    std::fs::create_dir_all(&home).map_err(|e| format!("create {}: {e}", home.display()))?;
    let registry = match &options.registry {
        Some(addr) => publish::Registry::remote(addr),
        None => {
            // A registry from an earlier run: its storage is replaced, not added to.
            let _ = std::fs::remove_dir_all(dir.join("registry"));
            publish::Registry::loopback(&dir)?
        }
    };
    let key = match &options.cosign_key {
        Some(k) => k.clone(),
        None => publish::test_key(&tools, &dir)?,
    };
    let public = public_key(&tools, &home, &key, &dir.join("cosign-verify.pub"))?;
    publish::push(&tools, &home, &registry, &dir.join("oci"), &repository, &tag, &written.digest)?;
    let reference = format!("{}/{repository}@{}", registry.addr, written.digest);
    publish::sign_and_attest(&tools, &home, &registry, &reference, &key, &sbom)?;
    publish::verify(&tools, &home, &registry, &reference, &public)?;

    let published = serde_json::json!({
        "registry": registry.addr,
        "repository": repository,
        "tag": tag,
        "digest": written.digest,
        "publicKey": public,
        "registryStorage": options.registry.is_none().then(|| dir.join("registry")),
        "sbom": sbom,
    });
    let file = dir.join("published.json");
    std::fs::write(&file, serde_json::to_string_pretty(&published).map_err(|e| e.to_string())?)
        .map_err(|e| format!("write {}: {e}", file.display()))?;
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    eprintln!(
        "xtask: image {reference}: layer {:.1} MiB gzipped ({:.1} MiB unpacked; host {:.1} MiB), signed, SBOM attested (wasmtime {}, kube {}), verified with {}",
        mib(written.layer_bytes),
        mib(written.uncompressed_bytes),
        mib(std::fs::metadata(&host).map(|m| m.len()).unwrap_or(0)),
        sbom::version_of(&sbom, "wasmtime").unwrap_or_default(),
        sbom::version_of(&sbom, "kube").unwrap_or_default(),
        public.display()
    );
    if options.registry.is_none() {
        eprintln!("xtask: the loopback registry stopped; `docker-registry serve {}` serves it again", dir.join("registry.yml").display());
    }
    println!("digest {}", written.digest);
    Ok(())
}

/// The production host, copied to `target/image/host` (symbols stripped).
///
/// Built in the workspace's own target directory: `workspace-hack` gives every
/// dependency the same features in this build as in the tests', so only the
/// workspace crates whose features differ compile again (and only the first
/// time: both builds' artifacts stay side by side). `target/release/host` is
/// the production binary until the next default build relinks it.
///
/// For the machine's own target, glibc: `x86_64-unknown-linux-musl` installs
/// with rustup, but ring's C code then needs a musl C compiler
/// (`x86_64-linux-musl-gcc`); the shared libraries the binary needs
/// ([`shared_libraries`]) go into the image instead.
pub(crate) fn build_host() -> Result<PathBuf> {
    let mut c = cargo();
    // `cargo rustc` hands `-C strip` to the binary only: every dependency
    // compiles as in any other release build.
    c.args(["rustc", "--release", "--locked", "-p", "host", "--bin", "host", "--no-default-features"]);
    c.args(["--", "-C", "strip=symbols"]);
    status(c)?;
    let built = target_dir().join("release/host");
    let host = dir().join("host");
    std::fs::create_dir_all(dir()).map_err(|e| format!("create {}: {e}", dir().display()))?;
    // Copied, not linked: the next default build replaces `target/release/host`.
    let _ = std::fs::remove_file(&host);
    std::fs::copy(&built, &host).map_err(|e| format!("copy {} to {}: {e}", built.display(), host.display()))?;
    Ok(host)
}

/// The shipped plugins as `cargo xtask build` makes them.
pub(crate) fn shipped_plugins() -> Vec<PathBuf> {
    SHIPPED.iter().map(|p| target_dir().join("plugins").join(format!("{p}.wasm"))).collect()
}

/// The artifacts of `plugins` as `host` compiles them with Cranelift
/// (`host --plugin-cache-dir DIR --no-plugin-baseline inspect P`), in
/// `target/image/precompiled`. The image ships them read-only and names the
/// directory in `HOST_PLUGIN_PRECOMPILED_DIR`, so a Pod loads the shipped
/// plugins without compiling them: no start-up compile, and none of the
/// compiler's working memory left in the heap. Artifacts are named by the
/// engine's compatibility hash (the host's wasmtime and the CPU features
/// it compiles for): on another CPU the host passes them over and compiles.
pub(crate) fn precompile(host: &Path, plugins: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let dir = dir().join("precompiled");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    for plugin in plugins {
        let mut c = Command::new(host);
        c.arg("--plugin-cache-dir").arg(&dir).arg("--no-plugin-baseline").arg("inspect").arg(plugin).stdout(std::process::Stdio::null());
        status(c)?;
    }
    let mut artifacts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("read {}: {e}", dir.display()))?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect();
    artifacts.sort();
    if artifacts.len() != plugins.len() {
        return Err(format!("{} plugins compiled into {} artifacts in {}", plugins.len(), artifacts.len(), dir.display()));
    }
    Ok(artifacts)
}

/// The shared libraries `binary` loads and its program interpreter, as
/// `ldd` resolves them on this machine (glibc, libgcc_s, libm, ...).
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let out = Command::new("ldd").arg(binary).output().map_err(|e| format!("cannot run ldd: {e}"))?;
    if !out.status.success() {
        return Err(format!("ldd {}: {}", binary.display(), String::from_utf8_lossy(&out.stderr)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let libraries: Vec<PathBuf> = text
        .lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, resolved)) => resolved.split_whitespace().next()?,
                None => line.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect();
    if libraries.iter().all(|l| !l.to_string_lossy().contains("ld-linux")) {
        return Err(format!("ldd names no program interpreter for {}:\n{text}", binary.display()));
    }
    Ok(libraries)
}

/// The public half of `key` at `out` (`cosign public-key`).
fn public_key(tools: &publish::Tools, home: &Path, key: &Path, out: &Path) -> Result<PathBuf> {
    let mut c = Command::new(&tools.cosign);
    c.env("HOME", home).env("COSIGN_PASSWORD", std::env::var("COSIGN_PASSWORD").unwrap_or_default());
    c.args(["public-key", "--key"]).arg(key).arg("--outfile").arg(out);
    status(c)?;
    Ok(out.to_path_buf())
}

/// The chart's `appVersion`, the image's default tag (the chart's default too).
fn chart_app_version() -> Result<String> {
    let chart = crate::root().join("deploy/chart/operator-host/Chart.yaml");
    let text = std::fs::read_to_string(&chart).map_err(|e| format!("read {}: {e}", chart.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("appVersion:"))
        .map(|v| v.trim().trim_matches('"').to_string())
        .ok_or_else(|| format!("{} has no appVersion", chart.display()))
}
