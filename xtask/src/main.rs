//! The build entry point: `cargo xtask <command>`.
//!
//! - `setup`: installs what the build needs (the wasm32-wasip2 target) when
//!   missing.
//! - `build`: builds every plugin to Wasm with plain cargo, then the host.
//!   Shipped plugins are copied to `target/plugins/<name>.wasm`, with a gzipped
//!   copy `<name>.wasm.gz` beside each (what fits a ConfigMap's 1 MiB; see
//!   docs/operations.md); then the JavaScript and Python example plugins (see
//!   `languages`; `run` skips them, it needs only the shipped plugins).
//! - `plugins`: only the Wasm plugins, as `build` makes them (what a narrow
//!   `cargo test -p ...` of the runtime, host or tests loads).
//! - `test`: `setup`, the plugins as `build` makes them, then cargo-component
//!   0.21 (installed when missing; only the test proving the author toolchain
//!   needs it) builds one plugin, then the benchmark's native comparator (the
//!   bench's `--quick` tests load it), then Prometheus's `promtool` (Debian's
//!   package, installed when missing) checks and unit-tests the shipped
//!   alerting rules, then the real control plane and Helm where Go is
//!   installed (`ops`), then Debian's docker-registry and the oras and
//!   cosign CLIs for the registry tests (`oci`), then every test of the
//!   workspace. The host
//!   binary is built by the test build itself; every other command's build
//!   (`cargo build -p host` and the like) reuses its dependencies, since the
//!   `workspace-hack` crate gives them one feature set (see `features`).
//! - `image [--registry HOST[:PORT]] [--cosign-key FILE] [--rootfs DIR] ...`:
//!   the production host (static, without the embedded cluster) and the
//!   shipped plugins as an OCI image, pushed (to a loopback registry by
//!   default), signed with cosign and its CycloneDX SBOM attested; prints
//!   the digest (see `image`). `test` runs it before the tests when the
//!   registry tools are there: the image-as-Pod test pulls that image.
//! - `features [--write]`: checks that every command's build (and `cargo
//!   build`/`cargo test` of each member) compiles each dependency as the
//!   workspace's test build does; `--write` regenerates `workspace-hack`
//!   (see `features`). Part of `test`'s lint.
//! - `run`: `build`, then the host on the embedded cluster with the shipped
//!   plugins (extra arguments go to `host run`).
//! - `bench`: the production host as `image` builds it (`target/image/host`,
//!   the head-to-head's host), `build`, the benchmark's native comparator (`bench/native`,
//!   built with the plugins' codegen settings), then the benchmarks (`bench
//!   all`), which write docs/benchmarks.md and docs/benchmarks/*.png;
//!   `--quick` for a smoke run. Where Go is installed it first builds the
//!   real control plane and the controller-runtime CronJob controller
//!   (`bench/go/`) for `bench head-to-head`, which
//!   `cargo xtask bench head-to-head [ARGS]` runs alone.
//! - `real-cluster`: builds the real control plane from upstream's Go modules
//!   (`real_cluster`, also part of `test` where Go is installed), starts it on
//!   loopback and prints `export KUBECONFIG=...` until interrupted;
//!   `real-cluster build` only builds it; `real-cluster --help` prints the
//!   command's help (target/release/real-cluster, which runs without xtask).
//! - `fidelity`: builds the real control plane, runs the fidelity corpus on
//!   it through a recorder, replays it on the embedded API server, prints the
//!   figures and the differences by cause and writes
//!   `target/fidelity/report.json` (crate `tests/fidelity`); it also rewrites
//!   apiserver/README.md's generated "Not faithful (yet)" list.
//! - `api-surface`: builds the real control plane, starts it and writes its
//!   API surface (`/version`, aggregated discovery and every built-in
//!   `APIResourceList`, the OpenAPI v3 documents, `/openapi/v2` as JSON and
//!   protobuf, every resource's Table columns) to `apiserver/surface/`, which the embedded API server serves.
//!   The fidelity tests fail when the committed files drift from the real
//!   server. (Not the protobuf descriptors: v1.36's binaries no longer embed
//!   them, see apiserver/proto/README.md.)
//! - `sharding-scale [--cronjobs N] [--phase-secs S] [--embedded]`: `build`,
//!   the real control plane, then the sharding scenario at scale (default
//!   3,000 CronJobs, each phase held 60 s; ignored in `test`, which runs the
//!   same scenario at 90): prints the spread, takeover times, Jobs lost and
//!   duplicated, and RSS per replica (docs/operations.md reports them).
//!   `--embedded` runs it against the embedded cluster served by `host
//!   cluster` in its own process instead (driven by the real kubectl).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod debian;
mod features;
mod golang;
mod image;
mod languages;
mod layering;
mod oci;
mod ops;
mod real_cluster;

/// Plugins shipped to users, built to `target/plugins/<name>.wasm`.
const SHIPPED: &[&str] = &["cronjob", "mydeployment"];
/// Plugins only the tests use.
const TEST_ONLY: &[&str] =
    &["hello", "memcached", "website", "hostile", "contract-v1", "versioned", "finalizing", "related", "requeuing", "requeuing-v0-3"];
/// Test-only second builds with a feature, copied to `target/plugins/<name>.wasm`
/// (crate, feature, name): the hot-swap tests swap between two versions.
/// `sprocket` and `gizmo` are distinct controllers (kinds Sprocket, Gizmo) for
/// `bench memory`'s ten controllers.
const VARIANTS: &[(&str, &str, &str)] = &[
    ("versioned", "v2", "versioned-v2"),
    ("versioned", "broken", "versioned-broken"),
    ("versioned", "sprocket", "sprocket"),
    ("versioned", "gizmo", "gizmo"),
];
/// Built with cargo-component as well (by `test` only), so tests cover wasip1 + adapter.
const COMPONENT_BUILT: &[&str] = &["hello"];
const CARGO_COMPONENT_VERSION: &str = "0.21.1";

type Result<T = ()> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("setup") => setup(),
        Some("build") => {
            setup().and_then(|()| build()).and_then(|()| languages::build()).and_then(|()| golang::build(&target_dir().join("release/host")))
        }
        // The host binary comes from the test build itself (see `test_build`).
        Some("test") => setup()
            .and_then(|()| lint())
            .and_then(|()| build_plugins())
            .and_then(|()| languages::build())
            .and_then(|()| component_build())
            .and_then(|()| native_comparator())
            .and_then(|()| ops::prometheus())
            .and_then(|prometheus| real_cluster::build().map(|go| (prometheus, go)))
            .and_then(|(prometheus, go)| ops::build_helm().map(|_| (prometheus, go)))
            .and_then(|(prometheus, go)| Ok((prometheus, go, oci::registry()? && oci::build_tools()?)))
            .and_then(|(prometheus, go, registry)| {
                // The image-as-Pod test pulls what `image` pushed to its loopback registry.
                if registry {
                    image::run(&image::Options::default())?;
                }
                test(&args[1..], go, prometheus, registry)
            }),
        Some("plugins") => setup().and_then(|()| build_plugins()).and_then(|()| golang::build_with_built_host()),
        Some("image") => image::Options::parse(&args[1..]).and_then(|options| setup().and_then(|()| image::run(&options))),
        Some("layering") => layering::check(),
        Some("features") if args.get(1).is_some_and(|a| a == "--write") => features::write(),
        Some("features") => features::check(),
        Some("run") => setup().and_then(|()| build()).and_then(|()| run(&args[1..])),
        // The production host first (`target/image/host`, what the head-to-head
        // runs), then the default build, which relinks `target/release/host`
        // with the embedded cluster the other benchmarks start.
        Some("bench") => setup().and_then(|()| image::build_host()).and_then(|_| build()).and_then(|()| bench(&args[1..])),
        Some("real-cluster") if args.get(1).is_some_and(|a| a == "build") => {
            real_cluster::build().and_then(|built| if built { Ok(()) } else { Err("the real control plane needs Go (1.26 or newer) on PATH".into()) })
        }
        Some("fidelity") => real_cluster::build().and_then(|built| {
            if built { fidelity() } else { Err("the fidelity report needs the real control plane, which needs Go (1.26 or newer) on PATH".into()) }
        }),
        Some("real-cluster") if args[1..].iter().any(|a| a == "--help" || a == "-h") => real_cluster_bin().and_then(|bin| {
            let mut c = Command::new(bin);
            c.arg("--help");
            status(c)
        }),
        Some("api-surface") => real_cluster::build().and_then(|built| {
            if built {
                api_surface()
            } else {
                Err("capturing the API surface needs the real control plane, which needs Go (1.26 or newer) on PATH".into())
            }
        }),
        Some("real-cluster") => setup().and_then(|()| build()).and_then(|()| real_cluster_up(&args[1..])),
        Some("sharding-scale") => sharding_scale_args(&args[1..]).and_then(|size| {
            setup().and_then(|()| build()).and_then(|()| real_cluster::build()).and_then(|go| {
                if go {
                    sharding_scale(size)
                } else {
                    Err("the sharding scale run needs the real control plane, which needs Go (1.26 or newer) on PATH".into())
                }
            })
        }),
        _ => {
            eprintln!(
                "usage: cargo xtask <setup|build|plugins|test|image|run|bench|real-cluster|fidelity|api-surface|sharding-scale|layering|features> [args...]"
            );
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask/ is in the workspace").to_path_buf()
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target"))
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root());
    // `cargo xtask` is `cargo run -p xtask`, which gives this process the
    // package variables of xtask itself. Passed on, they reach build scripts
    // that track them (ring's reruns on CARGO_MANIFEST_DIR), so every build
    // made through xtask and every plain `cargo` build compiled ring, rustls,
    // kube and all above them again, each after the other.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if ["CARGO_MANIFEST_", "CARGO_PKG_"].iter().any(|p| name.starts_with(p))
            || ["CARGO_CRATE_NAME", "CARGO_BIN_NAME", "CARGO_PRIMARY_PACKAGE"].contains(&&*name)
        {
            c.env_remove(&*name);
        }
    }
    c
}

/// `cargo build --release --target wasm32-wasip2` with the plugins' codegen
/// settings ([`plugin_codegen`]). Set through the environment so the host's
/// own release build stays fast.
fn wasm_build() -> Command {
    let mut c = cargo();
    c.args(["build", "--release", "--target", "wasm32-wasip2"]);
    // Every call starts from a fresh instance; a 4 MiB initial memory gives
    // the guest's allocator room for a typical reconcile without
    // `memory.grow` (each one an mprotect in the host). The cap is unchanged.
    plugin_codegen(&mut c, "WASM32_WASIP2", &format!("-C link-arg=--initial-memory={PLUGIN_INITIAL_MEMORY}"));
    c
}

/// Fat LTO, one codegen unit and LLVM's inliner at a threshold of
/// [`PLUGIN_INLINE_THRESHOLD`]: plugins are small, built rarely and run on
/// every reconcile, so the slower build pays off (docs/benchmarks.md,
/// Optimizations). Cranelift then compiles fewer Wasm calls, each of which
/// costs a stack-limit and an epoch-deadline check and spills registers
/// around it. `triple` is the target in the form of cargo's
/// `CARGO_TARGET_<TRIPLE>_RUSTFLAGS`, which (with `--target`) leaves build
/// scripts and proc macros alone.
fn plugin_codegen(c: &mut Command, triple: &str, extra_rustflags: &str) {
    c.env("CARGO_PROFILE_RELEASE_LTO", "true").env("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1");
    let flags = format!("-C llvm-args=-inline-threshold={PLUGIN_INLINE_THRESHOLD} {extra_rustflags}");
    c.env(format!("CARGO_TARGET_{triple}_RUSTFLAGS"), flags.trim());
}

/// LLVM's inline threshold for plugins (its default is 225). Measured with
/// `bench compare` against the default: 400 made calls 5-8% faster, 1,000
/// 12-16%, 2,500 no faster than 1,000 with twice the growth in size
/// (cronjob.wasm +10% at 1,000).
const PLUGIN_INLINE_THRESHOLD: u32 = 1000;

/// Bytes of linear memory a plugin instance starts with (a multiple of 64 KiB).
const PLUGIN_INITIAL_MEMORY: u32 = 4 << 20;

fn status(mut cmd: Command) -> Result {
    let shown = shown(&cmd);
    eprintln!("xtask: running {shown}");
    let status = cmd.status().map_err(|e| format!("cannot start {shown}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{shown} failed with {status}")) }
}

/// A command as a reader would type it: the variables it sets, the program
/// and its arguments. `Debug` also lists every variable [`cargo`] removes, a
/// dozen `env -u` before each cargo command.
fn shown(cmd: &Command) -> String {
    let set = cmd.get_envs().filter_map(|(name, value)| Some(format!("{}={value:?}", name.to_string_lossy(), value = value?)));
    let words = std::iter::once(cmd.get_program()).chain(cmd.get_args()).map(|w| format!("{w:?}"));
    set.chain(words).collect::<Vec<_>>().join(" ")
}

fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program).args(args).output().is_ok_and(|o| o.status.success())
}

fn setup() -> Result {
    let installed = Command::new("rustup").args(["target", "list", "--installed"]).output();
    match installed {
        Ok(out) if String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == "wasm32-wasip2") => {}
        Ok(_) => status({
            let mut c = Command::new("rustup");
            c.args(["target", "add", "wasm32-wasip2"]);
            c
        })?,
        Err(_) => {
            eprintln!("xtask: rustup not found; assuming the wasm32-wasip2 target is installed")
        }
    }
    Ok(())
}

/// cargo-component (installed when missing, about 10 minutes once) builds
/// `COMPONENT_BUILT`, so the tests cover wasip1 + adapter as authors build.
fn component_build() -> Result {
    let component_ok = Command::new("cargo")
        .args(["component", "--version"])
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).contains(CARGO_COMPONENT_VERSION));
    if !component_ok {
        eprintln!("xtask: installing cargo-component {CARGO_COMPONENT_VERSION} (about 10 minutes, once)");
        let mut c = cargo();
        c.args(["install", "cargo-component", "--locked", "--version", CARGO_COMPONENT_VERSION]);
        status(c)?;
    }
    let mut c = cargo();
    c.args(["component", "build", "--release"]);
    for p in COMPONENT_BUILT {
        c.args(["-p", p]);
    }
    status(c)
}

fn build() -> Result {
    build_plugins()?;
    let mut c = cargo();
    c.args(["build", "--release", "-p", "host"]);
    status(c)
}

/// Every plugin to Wasm (shipped ones copied and gzipped under `target/plugins/`).
fn build_plugins() -> Result {
    let out = target_dir().join("plugins");
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    // Variants first: the plain build below then leaves the default build in place.
    for (krate, feature, name) in VARIANTS {
        let mut c = wasm_build();
        c.args(["-p", krate, "--features", feature]);
        status(c)?;
        copy_plugin(krate, &out.join(format!("{name}.wasm")))?;
    }
    let mut c = wasm_build();
    for p in SHIPPED.iter().chain(TEST_ONLY) {
        c.args(["-p", p]);
    }
    status(c)?;
    copy_shipped(&out)
}

/// The shipped plugins only, as [`build_plugins`] makes them (what the image holds).
fn build_shipped_plugins() -> Result {
    let out = target_dir().join("plugins");
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let mut c = wasm_build();
    for p in SHIPPED {
        c.args(["-p", p]);
    }
    status(c)?;
    copy_shipped(&out)
}

fn copy_shipped(out: &Path) -> Result {
    for p in SHIPPED {
        let plain = out.join(format!("{p}.wasm"));
        copy_plugin(p, &plain)?;
        gzip_plugin(&plain)?;
    }
    Ok(())
}

/// Writes `<file>.gz` beside `file`, at gzip's best compression: the host
/// inflates gzipped ConfigMap keys, and a real API server refuses a ConfigMap
/// over 1 MiB.
fn gzip_plugin(file: &Path) -> Result {
    use std::io::Write;
    let bytes = std::fs::read(file).map_err(|e| format!("read {}: {e}", file.display()))?;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&bytes).map_err(|e| format!("gzip {}: {e}", file.display()))?;
    let packed = gz.finish().map_err(|e| format!("gzip {}: {e}", file.display()))?;
    let mut to = file.as_os_str().to_owned();
    to.push(".gz");
    let to = PathBuf::from(to);
    std::fs::write(&to, &packed).map_err(|e| format!("write {}: {e}", to.display()))?;
    eprintln!("xtask: plugin {} ({} KiB; {} KiB plain)", to.display(), packed.len() >> 10, bytes.len() >> 10);
    Ok(())
}

fn copy_plugin(krate: &str, to: &Path) -> Result {
    let from = target_dir().join("wasm32-wasip2/release").join(format!("{}.wasm", krate.replace('-', "_")));
    std::fs::copy(&from, to).map_err(|e| format!("copy {} to {}: {e}", from.display(), to.display()))?;
    eprintln!("xtask: plugin {}", to.display());
    Ok(())
}

/// `cargo test` over the workspace (release: wasmtime compiles plugins far
/// faster than in a debug build). Test-only plugins are Wasm-only.
fn workspace_test() -> Command {
    let mut c = cargo();
    c.args(["test", "--release", "--no-fail-fast", "--workspace"]);
    for krate in WASM_ONLY {
        c.args(["--exclude", krate]);
    }
    c
}

/// The crates that build for Wasm only (test plugins written against raw
/// bindings): left out of the native test and lint runs.
const WASM_ONLY: &[&str] = &["hostile", "contract-v1", "versioned", "related", "requeuing", "requeuing-v0-3"];

/// Before any test: the workspace is formatted as the repository's
/// rustfmt.toml says (`cargo fmt --check`), clippy finds nothing in any
/// target (`-D warnings`, with the `[workspace.lints]` table), and rustdoc
/// finds nothing in the docs ([`workspace_doc`]). Release, so its
/// dependencies are checked with the profile the tests build with.
fn lint() -> Result {
    let started = std::time::Instant::now();
    let mut c = cargo();
    c.args(["fmt", "--all", "--check"]);
    status(c).map_err(|e| format!("{e} (run `cargo fmt --all`)"))?;
    let mut c = cargo();
    c.args(["clippy", "--workspace", "--all-targets", "--release"]);
    for krate in WASM_ONLY {
        c.args(["--exclude", krate]);
    }
    c.args(["--", "-D", "warnings"]);
    status(c)?;
    status(workspace_doc())?;
    layering::check()?;
    features::check()?;
    eprintln!("xtask: fmt, clippy, the docs, the layering and the features check took {:.0?}", started.elapsed());
    Ok(())
}

/// `cargo doc` of the workspace's own crates with rustdoc's warnings denied (a broken
/// intra-doc link, a malformed doc comment). Release, as clippy just ran: rustdoc reads the
/// dependencies' metadata, and clippy's release check already built it, so only the
/// workspace's crates are documented again.
fn workspace_doc() -> Command {
    let mut c = cargo();
    c.args(["doc", "--release", "--workspace", "--no-deps"]);
    for krate in WASM_ONLY {
        c.args(["--exclude", krate]);
    }
    c.env("RUSTDOCFLAGS", "-D warnings");
    c
}

fn test(extra: &[String], real_cluster_built: bool, prometheus_installed: bool, registry_tools: bool) -> Result {
    // First every test binary and the host binary (`target/release/host`, which
    // the e2e tests run) in one build with one feature set, whatever `extra`
    // selects; then the tests, which find everything compiled.
    let mut c = workspace_test();
    c.arg("--no-run");
    status(c)?;
    // The real-cluster fixture records each test it skips here (Go absent), so
    // the skips are counted below and never pass unseen.
    let skipped = real_cluster::out_dir().join("skipped");
    let _ = std::fs::remove_dir_all(&skipped);
    let mut c = workspace_test();
    if prometheus_installed {
        // `ops::prometheus` found or installed it: the scrape test must not skip.
        c.env("PROMETHEUS_REQUIRED", "1");
    }
    if real_cluster_built {
        // Built, so a missing binary is a failure, not a skip.
        c.env("REAL_CLUSTER_REQUIRED", "1");
    }
    if registry_tools {
        // docker-registry, oras and cosign are there: the registry tests must not skip.
        c.env("OCI_TOOLS_REQUIRED", "1");
    }
    c.args(extra);
    let result = status(c);
    let names: Vec<String> = std::fs::read_dir(&skipped)
        .map(|dir| dir.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    if !names.is_empty() {
        eprintln!("xtask: SKIPPED {} real-cluster tests (no real control plane: Go not found): {}", names.len(), names.join(", "));
    }
    if !registry_tools {
        eprintln!("xtask: SKIPPED the registry tests (tests/oci): docker-registry, oras or cosign is missing (needs apt-get as root and Go)");
    }
    if !prometheus_installed {
        eprintln!("xtask: SKIPPED the Prometheus rule tests and the scrape test: promtool could not be installed (needs apt-get as root)");
    }
    result
}

/// Starts the real control plane (built first) and prints `export KUBECONFIG=...`
/// for a person who wants to try the host on it; runs until interrupted.
fn real_cluster_up(extra: &[String]) -> Result {
    if !real_cluster::build()? {
        return Err("the real control plane needs Go (1.26 or newer) on PATH".into());
    }
    let mut c = Command::new(real_cluster_bin()?);
    c.args(extra);
    status(c)
}

/// Builds the `real-cluster` command (plain cargo, no Go) and returns its path.
fn real_cluster_bin() -> Result<PathBuf> {
    let mut c = cargo();
    c.args(["build", "--release", "-p", "real-cluster", "--bin", "real-cluster"]);
    status(c)?;
    Ok(target_dir().join("release/real-cluster"))
}

/// `sharding-scale`'s run: how many CronJobs, seconds each phase is held,
/// and whether on the embedded cluster (`host cluster`) instead of the real one.
struct ScaleRun {
    cronjobs: u64,
    phase: u64,
    embedded: bool,
}

fn sharding_scale_args(args: &[String]) -> Result<ScaleRun> {
    let mut run = ScaleRun { cronjobs: 3000, phase: 60, embedded: false };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let target = match flag.as_str() {
            "--cronjobs" => &mut run.cronjobs,
            "--phase-secs" => &mut run.phase,
            "--embedded" => {
                run.embedded = true;
                continue;
            }
            other => {
                return Err(format!(
                    "sharding-scale: unknown argument {other:?} (usage: sharding-scale [--cronjobs N] [--phase-secs S] [--embedded])"
                ));
            }
        };
        let value = args.next().ok_or_else(|| format!("sharding-scale: {flag} needs a value"))?;
        *target = value.parse().ok().filter(|n| *n > 0).ok_or_else(|| format!("sharding-scale: {flag} {value:?} is not a positive whole number"))?;
    }
    Ok(run)
}

/// The sharding scenario at scale: the real-cluster suite's ignored
/// `sharding_scale` test, sized by environment.
fn sharding_scale(run: ScaleRun) -> Result {
    let mut c = cargo();
    c.args(["test", "--release", "-p", "real-cluster", "--test", "real_cluster", "sharding::sharding_scale", "--", "--ignored", "--nocapture"]);
    c.env("SHARDING_CRONJOBS", run.cronjobs.to_string()).env("SHARDING_PHASE_SECS", run.phase.to_string()).env("REAL_CLUSTER_REQUIRED", "1");
    if run.embedded {
        c.env("SHARDING_EMBEDDED", "1");
    }
    status(c)
}

/// The fidelity report (`tests/fidelity`'s `fidelity` binary).
fn fidelity() -> Result {
    let mut c = cargo();
    c.args(["run", "--release", "-p", "fidelity", "--bin", "fidelity"]);
    status(c)
}

/// The real control plane's API surface into `apiserver/surface/`.
fn api_surface() -> Result {
    let mut c = cargo();
    c.args(["run", "--release", "-p", "fidelity", "--bin", "api-surface"]);
    status(c)
}

fn run(extra: &[String]) -> Result {
    let host = target_dir().join("release/host");
    let mut c = Command::new(&host);
    c.args(["run", "--embedded"]);
    for p in SHIPPED {
        c.arg("--plugin").arg(target_dir().join("plugins").join(format!("{p}.wasm")));
    }
    c.args(extra);
    if !succeeds(host.to_str().unwrap_or("host"), &["--version"]) {
        return Err(format!("{} was not built", host.display()));
    }
    status(c)
}

fn bench(extra: &[String]) -> Result {
    // The head to head runs the production host as the image does, with
    // the shipped plugins precompiled beside it.
    image::precompile(&image::dir().join("host"), &image::shipped_plugins())?;
    native_comparator()?;
    let mut c = cargo();
    c.args(["build", "--release", "-p", "bench"]);
    status(c)?;
    // The head-to-head benchmark's other contestants: the real control
    // plane (kube-controller-manager among it) and the controller-runtime
    // controller; without Go both are absent and `bench` says so.
    if real_cluster::build()? {
        bench_go_controller()?;
    }
    let mut c = Command::new(target_dir().join("release/bench"));
    c.current_dir(root()).env("CARGO_TARGET_DIR", target_dir());
    // `cargo xtask bench head-to-head ARGS` runs that benchmark alone;
    // otherwise `--quick` and the like go before `all`.
    match extra.iter().position(|a| a == "head-to-head") {
        Some(_) => c.args(extra),
        None => c.args(extra).arg("all"),
    };
    status(c)
}

/// The kubebuilder tutorial's CronJob controller on controller-runtime
/// (`bench/go/cronjob-controller-runtime`, pinned by its go.mod and go.sum),
/// built to `target/bench/go/`; Go's build cache makes a rebuild a link.
fn bench_go_controller() -> Result {
    let out = target_dir().join("bench/go/cronjob-controller-runtime");
    let mut c = Command::new("go");
    c.current_dir(root().join("bench/go/cronjob-controller-runtime")).env("CGO_ENABLED", "0");
    c.args(["build", "-trimpath", "-o"]).arg(&out).arg(".");
    status(c)
}

/// The benchmark's native comparator (`bench/native`, a shared library) built
/// for this machine with the plugins' codegen settings, so "Wasm vs native"
/// compares the same build of the same code; copied to `target/bench-native/`,
/// where `bench` loads it.
fn native_comparator() -> Result {
    let triple = host_triple()?;
    let mut c = cargo();
    c.args(["build", "--release", "-p", "bench-native", "--target", &triple]);
    plugin_codegen(&mut c, &triple.to_uppercase().replace('-', "_"), "");
    status(c)?;
    let name = format!("{}bench_native{}", std::env::consts::DLL_PREFIX, std::env::consts::DLL_SUFFIX);
    let from = target_dir().join(&triple).join("release").join(&name);
    let dir = target_dir().join("bench-native");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    std::fs::copy(&from, dir.join(&name)).map_err(|e| format!("copy {}: {e}", from.display()))?;
    Ok(())
}

/// The triple rustc builds for by default (`host:` in `rustc -vV`).
fn host_triple() -> Result<String> {
    let out = Command::new("rustc").arg("-vV").output().map_err(|e| format!("cannot run rustc -vV: {e}"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(str::to_owned)
        .ok_or_else(|| "rustc -vV printed no host triple".to_string())
}
