//! One feature set for every build: `cargo xtask features [--write]`.
//!
//! Cargo resolves the features of each dependency for the packages one
//! command selects: `cargo build -p host` leaves out what `cargo test
//! --workspace` turns on through dev-dependencies (proptest's `rusty-fork`
//! asks for `fnv/std`, which changes `gimli` and with it all of cranelift and
//! wasmtime) or through other members (`bench`'s `png` asks for
//! `simd-adler32/std`, under flate2). A dependency with another feature set is
//! another build of it, and of everything above it: after `cargo xtask test`,
//! `cargo xtask run` compiled wasmtime again.
//!
//! The crate `workspace-hack` (the pattern of cargo-hakari) depends on each
//! dependency whose features differ between commands, with the features the
//! workspace's test build gives it, and every native member depends on it; so
//! any command that builds one member resolves those dependencies as the
//! whole workspace does. Its manifest is written by `--write` from cargo's
//! unit graph (what each command would compile: package, features, profile,
//! dependencies); [`check`] (part of `test`'s lint) compares the unit graphs of
//! the commands below, and of `cargo build`/`cargo test --no-run` of each
//! native member, with the workspace's test build, and names every
//! dependency or member one of them would compile differently. Members get no
//! features a narrower build would leave out: the clock's paused driver and the
//! sandbox's native plugins are always compiled, and the hack asks for the
//! SDK's `testing` (the SDK is published, so it cannot depend on the hack).
//!
//! The unit graph is printed by stable cargo only with `-Z unstable-options`,
//! which `RUSTC_BOOTSTRAP=1` allows; its format is versioned (`version: 1`),
//! and a new one is refused here with a clear error.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::PathBuf;

use serde_json::Value;

use crate::{Result, WASM_ONLY, cargo, root};

/// The workspace's test build, the reference: `cargo xtask test` builds it.
fn reference_build() -> Vec<String> {
    let mut args: Vec<String> = ["test", "--release", "--workspace", "--no-run"].map(String::from).to_vec();
    for krate in WASM_ONLY {
        args.extend(["--exclude".to_string(), krate.to_string()]);
    }
    args
}

/// The builds of xtask's other commands (`build`/`run`, `real-cluster`,
/// `bench`, `sharding-scale`, `fidelity`).
const COMMANDS: &[&[&str]] = &[
    &["build", "--release", "-p", "host"],
    &["build", "--release", "-p", "real-cluster", "--bin", "real-cluster"],
    &["build", "--release", "-p", "bench"],
    &["test", "--release", "-p", "real-cluster", "--test", "real_cluster", "--no-run"],
    &["build", "--release", "-p", "fidelity", "--bin", "fidelity"],
];

/// Members whose own builds are not checked (besides the Wasm-only test
/// plugins): xtask (a debug build, run by `cargo xtask`), the benchmark's
/// native comparator (built with the plugins' codegen settings for an
/// explicit target), the hack, and the plugin SDK, which is published and
/// vendored by `host new`, so it cannot depend on an unpublished crate (its
/// own build resolves serde, syn and chrono with fewer features; every other
/// build has the SDK below a member that pins them).
const UNCHECKED: &[&str] = &["xtask", "bench-native", "workspace-hack", "operator-plugin-sdk"];

const HACK: &str = "workspace-hack";

/// One compilation cargo would run, as the unit graph describes it.
struct Unit {
    /// `registry+...#name@version`, or `path+...` for a workspace member.
    pkg_id: String,
    features: Vec<String>,
    /// A library (or proc macro) compiled, not a build script.
    library: bool,
    /// Whether the unit serves the target build (`[0]`) and the host's: proc
    /// macros, build scripts and what they depend on (`[1]`).
    sides: [bool; 2],
    /// Identity of the compiled artifact: the unit's own fields and its dependencies' identities.
    identity: u64,
    /// The unit's own fields (target, mode, profile, features), without its dependencies.
    own: String,
}

impl Unit {
    fn third_party(&self) -> bool {
        !self.pkg_id.starts_with("path+")
    }

    /// A workspace member's name: its id ends in `<dir>#<version>`, or in
    /// `#<name>@<version>` where the directory is named otherwise.
    fn member_name(&self) -> &str {
        let (path, spec) = self.pkg_id.rsplit_once('#').unwrap_or(("", &self.pkg_id));
        match spec.split_once('@') {
            Some((name, _)) => name,
            None => path.rsplit('/').next().unwrap_or(path),
        }
    }

    /// (`name`, `version`) from the package id.
    fn name_version(&self) -> (&str, &str) {
        let spec = self.pkg_id.rsplit('#').next().unwrap_or(&self.pkg_id);
        spec.split_once('@').unwrap_or((spec, ""))
    }
}

/// The units `cargo <args> --unit-graph` would compile.
fn unit_graph(args: &[String]) -> Result<Vec<Unit>> {
    let mut c = cargo();
    c.args(args).args(["--unit-graph", "-Z", "unstable-options"]).env("RUSTC_BOOTSTRAP", "1");
    let shown = crate::shown(&c);
    let out = c.output().map_err(|e| format!("cannot start {shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{shown} failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let graph: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("{shown} printed no unit graph: {e}"))?;
    if graph["version"] != 1 {
        return Err(format!("cargo's unit graph is version {}, this check reads version 1", graph["version"]));
    }
    let raw = graph["units"].as_array().ok_or("the unit graph has no units")?;
    let deps: Vec<Vec<usize>> = raw
        .iter()
        .map(|u| u["dependencies"].as_array().into_iter().flatten().filter_map(|d| d["index"].as_u64()).map(|i| i as usize).collect())
        .collect();
    let sides = sides(raw, &deps, graph["roots"].as_array().into_iter().flatten().filter_map(Value::as_u64).map(|i| i as usize));
    let mut identities = vec![None; raw.len()];
    (0..raw.len())
        .map(|i| -> Result<Unit> {
            let u = &raw[i];
            let own = serde_json::to_string(&[
                &u["pkg_id"],
                &u["target"]["name"],
                &u["target"]["kind"],
                &u["mode"],
                &u["profile"],
                &u["platform"],
                &u["features"],
            ])
            .map_err(|e| e.to_string())?;
            Ok(Unit {
                pkg_id: u["pkg_id"].as_str().unwrap_or_default().to_string(),
                features: u["features"].as_array().into_iter().flatten().filter_map(Value::as_str).map(String::from).collect(),
                sides: sides[i],
                library: u["mode"] == "build" && !u["target"]["kind"].as_array().is_some_and(|k| k.iter().any(|x| x == "custom-build")),
                identity: identity(i, raw, &deps, &mut identities),
                own,
            })
        })
        .collect()
}

/// For each unit, whether the target build reaches it and whether the host's
/// does (through a proc macro or build script).
fn sides(raw: &[Value], deps: &[Vec<usize>], roots: impl Iterator<Item = usize>) -> Vec<[bool; 2]> {
    // A proc macro, or the compilation of a build script (running one serves its package's side).
    let builds_for_host = |u: &Value| {
        let kind = |k: &str| u["target"]["kind"].as_array().is_some_and(|kinds| kinds.iter().any(|x| x == k));
        kind("proc-macro") || (kind("custom-build") && u["mode"] == "build")
    };
    let mut seen = vec![[false; 2]; raw.len()];
    let mut stack: Vec<(usize, bool)> = roots.map(|r| (r, false)).collect();
    while let Some((i, below_host)) = stack.pop() {
        let on_host = below_host || builds_for_host(&raw[i]);
        if std::mem::replace(&mut seen[i][usize::from(on_host)], true) {
            continue;
        }
        stack.extend(deps[i].iter().map(|&d| (d, on_host)));
    }
    seen
}

fn identity(i: usize, raw: &[Value], deps: &[Vec<usize>], memo: &mut [Option<u64>]) -> u64 {
    if let Some(id) = memo[i] {
        return id;
    }
    let u = &raw[i];
    let mut below: Vec<u64> = deps[i].iter().map(|&d| identity(d, raw, deps, memo)).collect();
    below.sort_unstable();
    let mut h = DefaultHasher::new();
    for field in [&u["pkg_id"], &u["target"]["name"], &u["target"]["kind"], &u["mode"], &u["profile"], &u["platform"], &u["features"]] {
        field.to_string().hash(&mut h);
    }
    below.hash(&mut h);
    let id = h.finish();
    memo[i] = Some(id);
    id
}

/// Every build whose dependencies must match the reference's: xtask's
/// commands, then `cargo build` and `cargo test --no-run` of each native member.
fn builds() -> Result<Vec<Vec<String>>> {
    let mut builds: Vec<Vec<String>> = COMMANDS.iter().map(|c| c.iter().map(|a| a.to_string()).collect()).collect();
    for member in native_members()? {
        builds.push(["build", "--release", "-p", &member].map(String::from).to_vec());
        builds.push(["test", "--release", "-p", &member, "--no-run"].map(String::from).to_vec());
    }
    Ok(builds)
}

fn native_members() -> Result<Vec<String>> {
    let out = cargo().args(["metadata", "--no-deps", "--format-version", "1"]).output().map_err(|e| format!("cargo metadata: {e}"))?;
    let metadata: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata printed no JSON: {e}"))?;
    Ok(metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["name"].as_str())
        .filter(|name| !UNCHECKED.contains(name) && !WASM_ONLY.contains(name))
        .map(String::from)
        .collect())
}

/// A dependency one build compiles differently from the reference: its own
/// fields differ (features, most often), not only something below it.
struct Divergence {
    build: String,
    pkg_id: String,
    features: Vec<String>,
    reference: Vec<Vec<String>>,
}

fn divergences(reference: &[Unit], builds: &[Vec<String>]) -> Result<Vec<Divergence>> {
    let known: BTreeSet<u64> = reference.iter().map(|u| u.identity).collect();
    let own: BTreeSet<&str> = reference.iter().map(|u| u.own.as_str()).collect();
    let mut found = Vec::new();
    for args in builds {
        for unit in unit_graph(args)? {
            // A member is checked too (its features can differ the same way), except those the
            // check leaves out by name.
            let unchecked_member = !unit.third_party() && UNCHECKED.contains(&unit.member_name());
            if unchecked_member || known.contains(&unit.identity) || own.contains(unit.own.as_str()) {
                continue;
            }
            found.push(Divergence {
                build: format!("cargo {}", args.join(" ")),
                reference: reference.iter().filter(|r| r.pkg_id == unit.pkg_id).map(|r| r.features.clone()).collect(),
                pkg_id: unit.pkg_id,
                features: unit.features,
            });
        }
    }
    Ok(found)
}

/// The plugins' Wasm build must not see the hack: its pins (tokio's `full`
/// among them) do not build for wasm32. A member a plugin depends on takes
/// it as a `cfg(not(target_arch = "wasm32"))` dependency.
fn hack_stays_out_of_wasm() -> Result {
    let mut args: Vec<String> = ["build", "--release", "--target", "wasm32-wasip2"].map(String::from).to_vec();
    for plugin in crate::SHIPPED.iter().chain(crate::TEST_ONLY) {
        args.extend(["-p".to_string(), plugin.to_string()]);
    }
    // A path package's id ends in `<dir>#<version>`, or `#<name>@<version>` where the two differ.
    let is_hack = |u: &&Unit| u.pkg_id.contains(&format!("/{HACK}#")) || u.pkg_id.contains(&format!("#{HACK}@"));
    match unit_graph(&args)?.iter().find(is_hack) {
        Some(_) => Err(format!(
            "the plugins' Wasm build (`cargo {}`) depends on {HACK}: make it a cfg(not(target_arch = \"wasm32\")) dependency",
            args.join(" ")
        )),
        None => Ok(()),
    }
}

/// `cargo xtask features`: fails naming each dependency a build would compile
/// differently from `cargo xtask test`.
pub fn check() -> Result {
    let started = std::time::Instant::now();
    hack_stays_out_of_wasm()?;
    let reference = unit_graph(&reference_build())?;
    let found = divergences(&reference, &builds()?)?;
    for d in &found {
        eprintln!("xtask: `{}` builds {} with features {:?}; the workspace's test build with {:?}", d.build, d.pkg_id, d.features, d.reference);
    }
    if !found.is_empty() {
        return Err(format!(
            "{} units would be compiled again by a narrower build: for a dependency, run `cargo xtask features --write` to regenerate {HACK}/Cargo.toml; for a member, turn its feature on for every build (as {HACK} does the SDK's `testing`) or drop the feature",
            found.len()
        ));
    }
    eprintln!("xtask: every build resolves the workspace's features ({:.0?})", started.elapsed());
    Ok(())
}

/// `cargo xtask features --write`: pins each diverging dependency in the
/// hack's manifest, until no build diverges (pinning one can change what
/// another below it gets).
pub fn write() -> Result {
    let builds = builds()?;
    let mut pinned: BTreeSet<String> = current_pins()?;
    for round in 1..=5 {
        let reference = unit_graph(&reference_build())?;
        write_manifest(&reference, &pinned)?;
        let reference = unit_graph(&reference_build())?;
        let found = divergences(&reference, &builds)?;
        if found.is_empty() {
            eprintln!("xtask: {HACK}/Cargo.toml pins {} dependencies; every build resolves the workspace's features", pinned.len());
            return Ok(());
        }
        let before = pinned.len();
        pinned.extend(found.into_iter().map(|d| d.pkg_id));
        eprintln!("xtask: round {round}: {} more dependencies to pin", pinned.len() - before);
    }
    Err("the hack's pins did not settle in 5 rounds".into())
}

fn manifest_path() -> PathBuf {
    root().join(HACK).join("Cargo.toml")
}

/// The package ids the manifest pins now (its `# pin:` comments).
fn current_pins() -> Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(manifest_path()).unwrap_or_default();
    Ok(text.lines().filter_map(|l| l.strip_prefix("# pin: ")).map(String::from).collect())
}

/// The manifest: each pinned package with the union of the features the
/// reference gives it, as a normal dependency where the reference builds it
/// for the target, and a build-dependency where it builds it for the host.
fn write_manifest(reference: &[Unit], pinned: &BTreeSet<String>) -> Result {
    let mut sides: [BTreeMap<(&str, &str), BTreeSet<&str>>; 2] = Default::default();
    for unit in reference.iter().filter(|u| u.third_party() && u.library && pinned.contains(&u.pkg_id)) {
        for (side, reached) in sides.iter_mut().zip(unit.sides) {
            if reached {
                side.entry(unit.name_version()).or_default().extend(unit.features.iter().map(String::as_str));
            }
        }
    }
    let mut text = String::from(HEADER);
    for pkg in pinned {
        text.push_str(&format!("# pin: {pkg}\n"));
    }
    for (section, deps) in ["dependencies", "build-dependencies"].iter().zip(&sides) {
        text.push_str(&format!("\n[{section}]\n"));
        if *section == "dependencies" {
            text.push_str(SDK_PIN);
        }
        let mut versions: HashMap<&str, usize> = HashMap::new();
        for (name, _) in deps.keys() {
            *versions.entry(name).or_default() += 1;
        }
        for ((name, version), features) in deps {
            let features: Vec<String> = features.iter().map(|f| format!("{f:?}")).collect();
            let key = if versions[name] > 1 { format!("{name}-{}", version.replace('.', "-")) } else { name.to_string() };
            let package = if key == *name { String::new() } else { format!("package = {name:?}, ") };
            text.push_str(&format!(
                "{key} = {{ {package}version = \"{version}\", default-features = false, features = [{}] }}\n",
                features.join(", ")
            ));
        }
    }
    std::fs::write(manifest_path(), text).map_err(|e| format!("write {}: {e}", manifest_path().display()))
}

/// The plugin SDK is a member the test build compiles with a feature a narrower
/// build leaves out (`testing`, through the plugins' and the runtime's
/// dev-dependencies); published, it cannot depend on the hack, so the hack
/// asks for that feature instead.
const SDK_PIN: &str = "\
# The plugin SDK's fixture harness, which members' tests turn on: with it here
# every native build compiles the SDK (and what depends on it) alike.
operator-plugin-sdk = { workspace = true, features = [\"testing\"] }
";

const HEADER: &str = "\
# Generated by `cargo xtask features --write`; checked by `cargo xtask features`
# (part of `cargo xtask test`). Do not edit by hand.
#
# Every native member depends on this crate, so each dependency listed here
# gets, in any build of any member, the features the workspace's test build
# gives it: `cargo xtask run` after `cargo xtask test` (or `cargo test -p X`
# after either) compiles none of them again. See xtask/src/features.rs.

[package]
name = \"workspace-hack\"
description = \"One feature set for every build of the workspace's dependencies (generated).\"
edition.workspace = true
rust-version.workspace = true
license.workspace = true
version.workspace = true
publish.workspace = true

";
