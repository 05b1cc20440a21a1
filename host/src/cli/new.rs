//! `host new NAME`: writes a complete plugin crate (typed spec and status,
//! reconcile/validate/default, fixtures, a sample, a README) into a new
//! directory, ready for `cargo test` and `cargo component build`.
//!
//! The SDK travels with the host: by default the new crate gets a copy of
//! the SDK sources this host was built with (embedded in the binary by the
//! host's build script) under `vendor/operator-plugin-sdk`, and depends on it
//! by path. A path dependency needs no registry and no network for the SDK
//! itself, is the same SDK the host speaks the contract of, and `cargo
//! update` leaves it alone (it only moves the SDK's own crates.io
//! dependencies). `--sdk crates-io` writes the plain version requirement
//! for when the SDK is published.

use std::path::{Path, PathBuf};

use super::Failure;

mod go;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plugin's name: a DNS-1123 label that is also a crate name (e.g. `memcached`).
    name: String,
    /// The API group of the parent kind. Default: `<name>.example.com`.
    #[arg(long)]
    group: Option<String>,
    /// The API version of the parent kind.
    #[arg(long, default_value = "v1alpha1")]
    version: String,
    /// The parent kind. Default: the name in UpperCamelCase.
    #[arg(long)]
    kind: Option<String>,
    /// Where to create the crate. Default: `./<name>`.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Where the crate gets the SDK from: `vendored` writes this host's copy
    /// into `vendor/operator-plugin-sdk` (nothing else to fetch); `crates-io`
    /// depends on the published version.
    #[arg(long, value_enum, default_value_t = SdkSource::Vendored)]
    sdk: SdkSource,
    /// The plugin's language: a Rust crate, or a Go module (built with
    /// `go build` for wasip1 and `host componentize`).
    #[arg(long, value_enum, default_value_t = Language::Rust)]
    lang: Language,
}

/// The language `host new` writes a plugin in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    Rust,
    Go,
}

/// Where a new crate's `operator-plugin-sdk` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SdkSource {
    /// A copy of the SDK this host was built with, as a path dependency.
    Vendored,
    /// The version on crates.io (once the SDK is published).
    CratesIo,
}

impl SdkSource {
    /// The dependency's value in the new crate's Cargo.toml, with `features`.
    fn dependency(self, features: &str) -> String {
        let features = if features.is_empty() { String::new() } else { format!(", features = [{features}]") };
        match self {
            // The version stays next to the path: cargo uses the path here and
            // the version wherever the crate is published.
            SdkSource::Vendored => format!("{{ path = \"{VENDOR_DIR}\", version = \"{SDK_VERSION}\"{features} }}"),
            SdkSource::CratesIo => format!("{{ version = \"{SDK_VERSION}\"{features} }}"),
        }
    }

    /// The Cargo.toml comment above the dependency: where the SDK comes from.
    fn note(self) -> &'static str {
        match self {
            SdkSource::Vendored => {
                "# The SDK the host that created this crate was built with, vendored in\n\
                 # vendor/operator-plugin-sdk (commit it): nothing to fetch for it, and\n\
                 # `cargo update` leaves it alone. A newer host's `host new` writes a newer\n\
                 # copy; once the SDK is on crates.io, drop `path` to use the registry."
            }
            SdkSource::CratesIo => "# The SDK from crates.io.",
        }
    }
}

/// Where a vendored SDK goes, relative to the new crate.
const VENDOR_DIR: &str = "vendor/operator-plugin-sdk";

// SDK_FILES: the SDK's manifest (normalized), README, src/ and wit/.
include!(concat!(env!("OUT_DIR"), "/sdk_files.rs"));

/// The SDK version the scaffold depends on: the one this host is built with.
const SDK_VERSION: &str = operator_plugin_sdk::VERSION;

/// (path in the new crate, template).
const FILES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("new/Cargo.toml.tmpl")),
    (".gitignore", include_str!("new/gitignore.tmpl")),
    (".cargo/config.toml", include_str!("new/cargo-config.toml.tmpl")),
    ("README.md", include_str!("new/README.md.tmpl")),
    ("src/lib.rs", include_str!("new/lib.rs.tmpl")),
    ("src/types.rs", TYPES),
    // Refuses a build whose crd.json is stamped from other types.
    ("build.rs", include_str!("new/build.rs.tmpl")),
    // What the derive generates from types.rs, for the plugin to embed,
    // stamped with types.rs's text; the crate's own test
    // (crd_json_is_the_generated_crd) fails if this template and
    // types.rs.tmpl ever disagree.
    ("crd.json", include_str!("new/crd.json.tmpl")),
    ("tests/fixtures.rs", include_str!("new/fixtures.rs.tmpl")),
    ("tests/fixtures/a-new-{{kind_lower}}-creates-its-configmap/parent.yaml", include_str!("new/parent.yaml.tmpl")),
    ("tests/fixtures/a-new-{{kind_lower}}-creates-its-configmap/now.txt", include_str!("new/now.txt.tmpl")),
    ("tests/fixtures/a-new-{{kind_lower}}-creates-its-configmap/expected.json", include_str!("new/created.json.tmpl")),
    ("tests/fixtures/an-up-to-date-configmap-is-left-alone/parent.yaml", include_str!("new/parent.yaml.tmpl")),
    ("tests/fixtures/an-up-to-date-configmap-is-left-alone/children.yaml", include_str!("new/children.yaml.tmpl")),
    ("tests/fixtures/an-up-to-date-configmap-is-left-alone/now.txt", include_str!("new/now.txt.tmpl")),
    ("tests/fixtures/an-up-to-date-configmap-is-left-alone/expected.json", include_str!("new/up-to-date.json.tmpl")),
    ("samples/{{kind_lower}}.yaml", include_str!("new/sample.yaml.tmpl")),
];

/// The parent's spec and status: every type of the CRD's schema.
const TYPES: &str = include_str!("new/types.rs.tmpl");

/// What the templates are filled with.
struct Names {
    name: String,
    group: String,
    version: String,
    kind: String,
    sdk: SdkSource,
}

impl Names {
    fn from_args(args: &Args) -> Result<Self, String> {
        check_name(&args.name)?;
        let group = args.group.clone().unwrap_or_else(|| format!("{}.example.com", args.name));
        check_group(&group)?;
        check_version(&args.version)?;
        let kind = args.kind.clone().unwrap_or_else(|| upper_camel(&args.name));
        check_kind(&kind)?;
        Ok(Names { name: args.name.clone(), group, version: args.version.clone(), kind, sdk: args.sdk })
    }

    /// The resource's plural, as kube-derive would guess it (written out in
    /// the template's `#[kube(plural)]`, so the two cannot disagree).
    fn plural(&self) -> String {
        use operator_plugin_sdk::kube_core::{GroupVersionKind, discovery::ApiResource};
        ApiResource::from_gvk(&GroupVersionKind::gvk(&self.group, &self.version, &self.kind)).plural
    }

    fn fill(&self, template: &str) -> String {
        self.fill_names(template)
            .replace("{{sdk_dependency}}", &self.sdk.dependency(""))
            .replace("{{sdk_dev_dependency}}", &self.sdk.dependency("\"testing\""))
            .replace("{{sdk_note}}", self.sdk.note())
            .replace("{{types_stamp}}", &operator_plugin_sdk::crd::types_stamp(&self.fill_names(TYPES)))
    }

    fn fill_names(&self, template: &str) -> String {
        template
            .replace("{{crate}}", &self.name)
            .replace("{{lib}}", &self.name.replace('-', "_"))
            .replace("{{name}}", &self.name)
            .replace("{{group}}", &self.group)
            .replace("{{version}}", &self.version)
            .replace("{{plural}}", &self.plural())
            .replace("{{kind_lower}}", &self.kind.to_ascii_lowercase())
            .replace("{{kind}}", &self.kind)
            .replace("{{sdk_version}}", SDK_VERSION)
    }
}

pub fn run(args: &Args) -> Result<(), Failure> {
    let names = Names::from_args(args).map_err(Failure::bad_input)?;
    let dir = args.dir.clone().unwrap_or_else(|| PathBuf::from(&args.name));
    check_dir(&dir).map_err(Failure::bad_input)?;
    if args.lang == Language::Go {
        return new_go_module(&names, &dir);
    }
    for (path, template) in FILES {
        let path = dir.join(names.fill(path));
        write(&path, &names.fill(template)).map_err(Failure::bad_input)?;
    }
    if args.sdk == SdkSource::Vendored {
        for (path, text) in SDK_FILES {
            write(&dir.join(VENDOR_DIR).join(path), text).map_err(Failure::bad_input)?;
        }
    }
    println!("Created plugin crate {} in {} ({}/{}, Kind={}).", names.name, dir.display(), names.group, names.version, names.kind);
    match args.sdk {
        SdkSource::Vendored => println!("The SDK {SDK_VERSION} this host speaks is in {}/{VENDOR_DIR} (a path dependency).", dir.display()),
        SdkSource::CratesIo => println!("The SDK comes from crates.io: operator-plugin-sdk = \"{SDK_VERSION}\"."),
    }
    println!("Next: cd {} && cargo test && cargo component build --release  (see README.md)", dir.display());
    println!("The SDK's API reference, offline: cargo doc --open -p operator-plugin-sdk");
    Ok(())
}

fn new_go_module(names: &Names, dir: &Path) -> Result<(), Failure> {
    for (path, template) in go::FILES {
        write(&dir.join(names.fill_names(path)), &names.fill_names(template)).map_err(Failure::bad_input)?;
    }
    for (path, text) in go::SDK_FILES {
        write(&dir.join(go::SDK_DIR).join(path), text).map_err(Failure::bad_input)?;
    }
    println!("Created Go plugin module {} in {} ({}/{}, Kind={}).", names.name, dir.display(), names.group, names.version, names.kind);
    go::next_steps(dir, &names.name);
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A new crate goes into a missing or empty directory only: nothing of the
/// user's is overwritten.
fn check_dir(dir: &Path) -> Result<(), String> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            Some(_) => Err(format!("{} already exists and is not empty; choose another name or --dir", dir.display())),
            None => Ok(()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("{} exists and cannot be read as a directory: {e}", dir.display())),
    }
}

/// Rust keywords and the crates every Rust program already has: cargo
/// refuses them as package names.
const RESERVED: &[&str] = &[
    "as",
    "async",
    "await",
    "break",
    "const",
    "continue",
    "crate",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "fn",
    "for",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "type",
    "unsafe",
    "use",
    "where",
    "while",
    "abstract",
    "become",
    "box",
    "do",
    "final",
    "macro",
    "override",
    "priv",
    "try",
    "typeof",
    "unsized",
    "virtual",
    "yield",
    "gen",
    "std",
    "core",
    "alloc",
    "proc-macro",
    "test",
];

/// The name becomes the crate's name and the plugin's manifest name (a
/// DNS-1123 label), so it must be both.
fn check_name(name: &str) -> Result<(), String> {
    let label = !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.ends_with('-');
    if !label || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(format!(
            "invalid plugin name {name:?}: it names the crate and the plugin, so it must be a DNS-1123 label that starts with a letter: lowercase letters, digits and '-', at most 63 characters (e.g. `memcached`)"
        ));
    }
    if RESERVED.contains(&name) {
        return Err(format!("invalid plugin name {name:?}: it is a Rust keyword or a standard crate's name, which cargo refuses as a package name"));
    }
    Ok(())
}

/// A DNS-1123 subdomain with at least one dot, as the API server requires of a CRD's group.
fn check_group(group: &str) -> Result<(), String> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if group.len() <= 253 && group.contains('.') && group.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(format!("invalid --group {group:?}: must be a DNS subdomain with at least one dot (e.g. `cache.example.com`)"))
    }
}

/// `v1`, `v1alpha1`, `v2beta3`: the form the API server sorts versions by.
fn check_version(version: &str) -> Result<(), String> {
    let ok = version.strip_prefix('v').is_some_and(|rest| {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (major, tail) = rest.split_at(digits);
        let pre = tail.strip_prefix("alpha").or_else(|| tail.strip_prefix("beta"));
        !major.is_empty()
            && !major.starts_with('0')
            && (tail.is_empty() || pre.is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && !n.starts_with('0')))
    });
    if ok { Ok(()) } else { Err(format!("invalid --version {version:?}: expected e.g. v1, v1alpha1, v2beta1")) }
}

/// UpperCamelCase, as Kubernetes kinds are; it is also a Rust type name.
fn check_kind(kind: &str) -> Result<(), String> {
    if kind.len() <= 63 && kind.starts_with(|c: char| c.is_ascii_uppercase()) && kind.chars().all(|c| c.is_ascii_alphanumeric()) {
        Ok(())
    } else {
        Err(format!("invalid --kind {kind:?}: expected UpperCamelCase letters and digits (e.g. `Memcached`)"))
    }
}

fn upper_camel(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_crate_names_and_dns_labels() {
        for ok in ["demo", "my-operator", "a1"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Demo", "1demo", "my_op", "demo-", "a.b", "test", "self", &"a".repeat(64)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn groups_versions_and_kinds_are_checked_as_the_api_server_would() {
        assert!(check_group("cache.example.com").is_ok());
        assert!(check_group("example").is_err());
        assert!(check_group("Cache.example.com").is_err());
        for ok in ["v1", "v1alpha1", "v2beta3", "v10"] {
            assert!(check_version(ok).is_ok(), "{ok}");
        }
        for bad in ["1", "v0", "v1gamma1", "v1alpha", "v01", "V1"] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
        assert!(check_kind("Memcached").is_ok());
        assert!(check_kind("memcached").is_err());
        assert_eq!(upper_camel("my-web-app"), "MyWebApp");
    }

    #[test]
    fn every_placeholder_is_filled() {
        let names =
            Names { name: "my-op".into(), group: "g.example.com".into(), version: "v1".into(), kind: "MyOp".into(), sdk: SdkSource::Vendored };
        for (path, template) in FILES {
            let text = names.fill(template) + &names.fill(path);
            assert!(!text.contains("{{"), "{path}: a placeholder is left");
        }
        assert!(names.fill(FILES[0].1).contains(r#"name = "my-op""#));
        let crd: serde_json::Value = serde_json::from_str(&names.fill(include_str!("new/crd.json.tmpl"))).expect("the CRD template is JSON");
        assert_eq!(crd["metadata"]["name"], "myops.g.example.com");
        let stamp = operator_plugin_sdk::crd::types_stamp(&names.fill(TYPES));
        assert_eq!(crd["metadata"]["annotations"][operator_plugin_sdk::crd::TYPES_STAMP_ANNOTATION], stamp.as_str(), "stamped from types.rs");
        // The build script names the annotation inside a Rust string literal, its quotes escaped.
        let key = format!(r#"\"{}\": \""#, operator_plugin_sdk::crd::TYPES_STAMP_ANNOTATION);
        assert!(include_str!("new/build.rs.tmpl").contains(&key), "build.rs.tmpl looks for {key}");
        let policy = Names { kind: "Policy".into(), ..names };
        assert_eq!(policy.plural(), "policies");
    }
}
