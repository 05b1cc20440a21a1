//! `host validate --plugin P FILE`: a parent through admission as the API
//! server runs it, offline: the plugin's `default` (the mutating webhook),
//! then the CRD's schema (the plugin's own CRD), then the plugin's
//! `validate` (the validating webhook). The first that refuses answers, as
//! on a cluster: a value both the schema and `validate` refuse is refused
//! in the schema's words. `host reconcile` runs the same check before
//! reconciling. A host built without the embedded cluster (the image) has
//! no schema validator and skips that step.

use std::path::PathBuf;

use operator_runtime::sandbox::LoadedPlugin;
use serde_json::Value;

use super::{Failure, SandboxArgs, input};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plugin component: a .wasm file or `oci://REGISTRY/REPO:TAG`
    /// (`...@sha256:DIGEST`), as `host run --plugin` takes it.
    #[arg(long)]
    plugin: PathBuf,
    #[command(flatten)]
    registry: super::oci_args::RegistryArgs,
    /// The object (YAML or JSON), of the plugin's parent kind.
    file: PathBuf,
    /// The stored object, to validate FILE as an update of it.
    #[arg(long)]
    old: Option<PathBuf>,
}

pub fn run(sandbox: &SandboxArgs, args: &Args) -> Result<(), Failure> {
    let object = input::read_object(&args.file).map_err(Failure::bad_input)?;
    let old = args.old.as_deref().map(input::read_object).transpose().map_err(Failure::bad_input)?;
    let sandbox = sandbox.sandbox().map_err(|e| Failure::bad_input(format!("{e:#}")))?;
    let plugin = args.registry.load_one(&args.plugin, &sandbox)?;
    let admitted = admit(&plugin, &object, old.as_ref())?;
    println!("{} {:?} is valid{}", kind_of(&admitted), name_of(&admitted), if admitted == object { "" } else { " (after defaulting)" });
    Ok(())
}

/// What admission does with a parent: check that it is of the plugin's
/// parent kind, run `default`, then `validate` on the defaulted object.
/// Returns the defaulted object; a refusal is bad input (exit 2), worded as
/// the API server's `Invalid` status: `Kind "name" is invalid: field: ...`.
pub fn admit(plugin: &LoadedPlugin, object: &Value, old: Option<&Value>) -> Result<Value, Failure> {
    let parent = &plugin.manifest().parent;
    let (api_version, kind) = (object["apiVersion"].as_str().unwrap_or(""), kind_of(object));
    if api_version != parent.api_version() || kind != parent.kind {
        return Err(Failure::bad_input(format!("{kind} {:?} ({api_version}) is not of the plugin's parent kind {parent}", name_of(object))));
    }
    let defaulted = plugin.default_blocking(&object.to_string()).map_err(|e| Failure::plugin(format!("defaulting failed: {e}")))?;
    check_schema(plugin, &defaulted)?;
    let old = old.map(Value::to_string);
    let errors = plugin.validate_blocking(&defaulted.to_string(), old.as_deref()).map_err(|e| Failure::plugin(format!("validation failed: {e}")))?;
    if errors.is_empty() {
        return Ok(defaulted);
    }
    let list = errors.iter().map(ToString::to_string).collect::<Vec<_>>();
    let listed = if list.len() == 1 { list[0].clone() } else { format!("[{}]", list.join(", ")) };
    Err(Failure::bad_input(format!("{kind} {:?} is invalid: {listed}", name_of(object))))
}

/// The parent against the schema of its version in the plugin's CRD, refused
/// as the API server refuses it: `Kind.group "name" is invalid: causes`.
#[cfg(feature = "embedded")]
fn check_schema(plugin: &LoadedPlugin, object: &Value) -> Result<(), Failure> {
    let parent = &plugin.manifest().parent;
    let crd =
        plugin.manifest().crds.iter().find(|c| c["spec"]["group"] == parent.group.as_str() && c["spec"]["names"]["kind"] == parent.kind.as_str());
    let version = crd.and_then(|c| c["spec"]["versions"].as_array()?.iter().find(|v| v["name"] == parent.version.as_str()));
    let Some(schema) = version.and_then(|v| v.pointer("/schema/openAPIV3Schema")) else {
        return Ok(());
    };
    let causes = apiserver::validate_against_schema(schema, object);
    if causes.is_empty() {
        return Ok(());
    }
    let error = apiserver::ApiError::invalid(&parent.group, &parent.kind, name_of(object), causes);
    Err(Failure::bad_input(error.to_status()["message"].as_str().unwrap_or_default().to_string()))
}

#[cfg(not(feature = "embedded"))]
fn check_schema(_: &LoadedPlugin, _: &Value) -> Result<(), Failure> {
    Ok(())
}

fn kind_of(object: &Value) -> &str {
    object["kind"].as_str().unwrap_or("")
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or("")
}
