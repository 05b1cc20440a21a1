//! The plugin SDK's sources, embedded in the host binary so that `host new`
//! can write them into a new plugin crate (the vendored SDK): a person with
//! only the host binary, Rust and cargo-component builds a plugin with
//! nothing else to fetch but the SDK's own crates.io dependencies.
//!
//! The SDK's manifest inherits from this workspace (`workspace = true`), which
//! means nothing outside it; the copy gets the values written out, the way
//! `cargo package` normalizes a manifest, so it builds on its own.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir.parent().expect("host/ sits in the workspace root").to_path_buf();
    let sdk = root.join("plugins/sdk");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));

    let workspace = read(&root.join("Cargo.toml"));
    let manifest = normalize(&read(&sdk.join("Cargo.toml")), &workspace).unwrap_or_else(|e| panic!("plugins/sdk/Cargo.toml: {e}"));
    std::fs::write(out.join("sdk-Cargo.toml"), manifest).expect("write the normalized SDK manifest");

    let mut files = vec![("Cargo.toml".to_string(), out.join("sdk-Cargo.toml")), ("README.md".to_string(), sdk.join("README.md"))];
    for dir in ["src", "wit"] {
        collect(&sdk, &sdk.join(dir), &mut files);
    }
    files.sort();
    let mut table =
        String::from("/// (path in the SDK crate, contents): the SDK as `host new` vendors it.\npub const SDK_FILES: &[(&str, &str)] = &[\n");
    for (rel, abs) in &files {
        writeln!(table, "    ({rel:?}, include_str!({:?})),", abs.display().to_string()).unwrap();
    }
    table.push_str("];\n");
    std::fs::write(out.join("sdk_files.rs"), table).expect("write the SDK file table");

    println!("cargo::rerun-if-changed={}", root.join("Cargo.toml").display());
    println!("cargo::rerun-if-changed={}", sdk.join("Cargo.toml").display());
    println!("cargo::rerun-if-changed={}", sdk.join("README.md").display());
    println!("cargo::rerun-if-changed={}", sdk.join("src").display());
    println!("cargo::rerun-if-changed={}", sdk.join("wit").display());
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Every `.rs` and `.wit` file under `dir` (what the SDK's `include` packages).
fn collect(base: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())).map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            println!("cargo::rerun-if-changed={}", path.display());
            collect(base, &path, files);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "wit") {
            let rel = path.strip_prefix(base).unwrap().to_str().expect("UTF-8 paths").replace('\\', "/");
            files.push((rel, path));
        }
    }
}

/// The lines of one `[section]` of a manifest (single-line `key = value` entries).
fn section<'a>(manifest: &'a str, name: &str) -> Vec<(&'a str, &'a str)> {
    let header = format!("[{name}]");
    manifest
        .lines()
        .skip_while(|l| l.trim() != header)
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.trim(), v.trim())))
        .collect()
}

/// The SDK's manifest with every `workspace = true` replaced by the
/// workspace's value and the `[lints]` table (the workspace's lints) left out.
/// Fails on any inheritance it does not know how to write out, so a new form
/// breaks the host's build instead of a user's.
fn normalize(sdk: &str, workspace: &str) -> Result<String, String> {
    let package = section(workspace, "workspace.package");
    let deps = section(workspace, "workspace.dependencies");
    let mut out = String::from(
        "# The operator-plugin-sdk as `host new` vendors it: written out from the\n# sources the host was built with. Edit nothing here; a newer host writes a newer copy.\n",
    );
    let mut in_lints = false;
    for line in sdk.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_lints = trimmed == "[lints]";
        }
        if in_lints {
            continue;
        }
        if let Some(key) = trimmed.strip_suffix(".workspace = true") {
            let value = package.iter().find(|(k, _)| *k == key).ok_or_else(|| format!("`{key}` is not in [workspace.package]"))?.1;
            writeln!(out, "{key} = {value}").unwrap();
        } else if let Some((name, rest)) = trimmed.split_once('=')
            && rest.contains("workspace = true")
        {
            let name = name.trim();
            let value = deps.iter().find(|(k, _)| *k == name).ok_or_else(|| format!("`{name}` is not in [workspace.dependencies]"))?.1;
            let extra: Vec<&str> = rest
                .trim()
                .trim_start_matches('{')
                .trim_end_matches('}')
                .split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty() && *p != "workspace = true")
                .collect();
            let mut fields: Vec<String> = match value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
                Some(table) => vec![table.trim().to_string()],
                None => vec![format!("version = {value}")],
            };
            fields.extend(extra.iter().map(|s| s.to_string()));
            writeln!(out, "{name} = {{ {} }}", fields.join(", ")).unwrap();
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if out.contains("workspace") && out.lines().any(|l| !l.trim_start().starts_with('#') && l.contains("workspace")) {
        return Err(format!("an inherited value is left after normalizing:\n{out}"));
    }
    Ok(out)
}
