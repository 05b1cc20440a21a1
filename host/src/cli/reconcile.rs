//! `host reconcile`: one offline reconcile, printing the actions. The
//! inputs are checked as the host would have them: the parent goes through
//! the plugin's admission (`default`, `validate`) first, and every child must
//! be controlled by the parent (the host passes no others), and every
//! related object of a kind the manifest declares as related (contract 0.2).

use std::path::{Path, PathBuf};

use operator_plugin_sdk::Time;
use serde_json::{Value, json};

use super::{Failure, OutputFormat, SandboxArgs, input, validate};
use operator_runtime::sandbox::CallError;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plugin component: a .wasm file or `oci://REGISTRY/REPO:TAG`
    /// (`...@sha256:DIGEST`), as `host run --plugin` takes it.
    #[arg(long)]
    plugin: PathBuf,
    #[command(flatten)]
    registry: super::oci_args::RegistryArgs,
    /// The parent object (YAML or JSON).
    #[arg(long)]
    parent: PathBuf,
    /// The children: multi-document YAML, a JSON array or a List. An empty
    /// or missing file means no children.
    #[arg(long)]
    children: Option<PathBuf>,
    /// The related objects (contract 0.2): multi-document YAML, a JSON array
    /// or a List, each of a kind the plugin declares as related. Passed as
    /// given: which of them attach to the parent is the running host's
    /// business.
    #[arg(long)]
    related: Option<PathBuf>,
    /// The clock reading to reconcile at (RFC 3339). Default: now.
    #[arg(long, value_parser = parse_time)]
    now: Option<Time>,
    #[arg(long, short, default_value = "json")]
    output: OutputFormat,
    /// Reconcile the parent as given, without `default` and `validate`
    /// first: a parent stored before admission existed, or a fixture of
    /// what the plugin does with an invalid spec.
    #[arg(long)]
    no_admission: bool,
}

fn parse_time(text: &str) -> Result<Time, String> {
    Time::parse_rfc3339(text).map_err(|e| format!("{e} (expected RFC 3339, e.g. 2026-01-01T00:00:00Z)"))
}

pub fn run(sandbox: &SandboxArgs, args: &Args) -> Result<(), Failure> {
    let parent = input::read_object(&args.parent).map_err(Failure::bad_input)?;
    let children = match &args.children {
        Some(path) => read_children(path)?,
        None => Vec::new(),
    };
    let now = args.now.unwrap_or_else(|| Time::from(chrono::Utc::now()));
    let sandbox = sandbox.sandbox().map_err(|e| Failure::bad_input(format!("{e:#}")))?;
    let plugin = args.registry.load_one(&args.plugin, &sandbox)?;
    let parent = if args.no_admission { parent } else { validate::admit(&plugin, &parent, None)? };
    check_controlled(&parent, &children)?;
    let related = match &args.related {
        Some(path) => input::read_objects(path).map_err(Failure::bad_input)?,
        None => Vec::new(),
    };
    check_related(plugin.manifest(), &related)?;
    let children: Vec<String> = children.iter().map(Value::to_string).collect();
    let related: Vec<String> = related.iter().map(Value::to_string).collect();
    match plugin.reconcile_related_blocking(&parent.to_string(), &children, &related, now.unix_millis()) {
        Ok(actions) => {
            print(&serde_json::to_value(&actions).expect("actions serialize"), args.output);
            Ok(())
        }
        Err(CallError::Plugin { error, .. }) => {
            print(&json!({"error": error}), args.output);
            Err(Failure { code: 3, message: String::new() })
        }
        Err(e) => Err(Failure::plugin(e)),
    }
}

/// Refuses children that have no controller reference to the parent (by
/// UID when the parent has one, else by kind and name), naming each.
fn check_controlled(parent: &Value, children: &[Value]) -> Result<(), Failure> {
    let uid = parent["metadata"]["uid"].as_str();
    let controls = |child: &Value| {
        child["metadata"]["ownerReferences"].as_array().is_some_and(|refs| {
            refs.iter().any(|r| {
                r["controller"] == true
                    && match uid {
                        Some(uid) => r["uid"] == uid,
                        None => r["kind"] == parent["kind"] && r["name"] == parent["metadata"]["name"],
                    }
            })
        })
    };
    let strangers: Vec<String> = children
        .iter()
        .filter(|c| !controls(c))
        .map(|c| format!("{} {}", c["kind"].as_str().unwrap_or(""), c["metadata"]["name"].as_str().unwrap_or("")))
        .collect();
    if strangers.is_empty() {
        return Ok(());
    }
    Err(Failure::bad_input(format!(
        "not controlled by {} {:?} (no ownerReference with controller: true{}), so the host would never pass them: {}",
        parent["kind"].as_str().unwrap_or(""),
        parent["metadata"]["name"].as_str().unwrap_or(""),
        uid.map(|u| format!(" and uid {u}")).unwrap_or_default(),
        strangers.join(", ")
    )))
}

/// Refuses related objects of a kind the plugin does not declare as
/// related, naming each, and more than the host's default cap.
fn check_related(manifest: &operator_plugin_sdk::Manifest, related: &[Value]) -> Result<(), Failure> {
    let declared = |o: &Value| {
        manifest
            .related
            .iter()
            .any(|r| o["apiVersion"].as_str() == Some(r.kind.api_version().as_str()) && o["kind"].as_str() == Some(r.kind.kind.as_str()))
    };
    let strangers: Vec<String> = related
        .iter()
        .filter(|o| !declared(o))
        .map(|o| {
            format!(
                "{} {} {}",
                o["apiVersion"].as_str().unwrap_or(""),
                o["kind"].as_str().unwrap_or(""),
                o["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect();
    if !strangers.is_empty() {
        let kinds: Vec<String> = manifest.related.iter().map(|r| r.kind.to_string()).collect();
        return Err(Failure::bad_input(format!(
            "not of a related kind of plugin {} (it declares: {}), so the host would never pass them: {}",
            manifest.name,
            if kinds.is_empty() { "none".to_string() } else { kinds.join("; ") },
            strangers.join(", ")
        )));
    }
    let cap = operator_runtime::controller::DEFAULT_MAX_RELATED;
    if related.len() > cap {
        return Err(Failure::bad_input(format!(
            "{} related objects; the host passes at most {cap} per reconcile and would refuse this call",
            related.len()
        )));
    }
    Ok(())
}

fn read_children(path: &Path) -> Result<Vec<Value>, Failure> {
    if !path.exists() {
        eprintln!("note: children file {} does not exist; reconciling with no children", path.display());
        return Ok(Vec::new());
    }
    input::read_objects(path).map_err(Failure::bad_input)
}

fn print(value: &Value, format: OutputFormat) {
    match format {
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(value).expect("serializable")),
        OutputFormat::Yaml => print!("{}", serde_saphyr::to_string(value).expect("serializable")),
    }
}
