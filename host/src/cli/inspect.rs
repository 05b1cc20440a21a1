//! `host inspect PLUGIN`: a file or an `oci://` reference.

use std::path::PathBuf;

use serde_json::json;

use super::oci_args::RegistryArgs;
use super::{Failure, OutputFormat, SandboxArgs};
use operator_runtime::sandbox::{Tiering, contract};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The plugin component: a .wasm file or `oci://REGISTRY/REPO:TAG`
    /// (`...@sha256:DIGEST`), as `host run --plugin` takes it.
    plugin: PathBuf,
    #[command(flatten)]
    registry: RegistryArgs,
    /// Output format: human-readable text by default.
    #[arg(long, short)]
    output: Option<OutputFormat>,
}

pub fn run(sandbox: &SandboxArgs, args: &Args) -> Result<(), Failure> {
    // Inspecting calls only the manifest export: a plugin the precompiled
    // cache does not hold yet is compiled by Winch (several times faster than
    // Cranelift, whose code the one call does not need) and not cached, so
    // `run` still caches Cranelift's build; `--no-plugin-baseline` compiles
    // with Cranelift (and caches it) instead.
    let sandbox = sandbox.sandbox_tiered(Tiering::BaselineOnly).map_err(|e| Failure::bad_input(format!("{e:#}")))?;
    let plugin = args.registry.load_one(&args.plugin, &sandbox)?;
    let m = plugin.manifest();
    let info = plugin.info();
    let crd_names: Vec<&str> = m.crds.iter().filter_map(|c| c["metadata"]["name"].as_str()).collect();
    let doc = json!({
        "file": args.plugin,
        "manifest": m,
        "info": info,
        "hostContractVersion": contract::host_version().to_string(),
    });
    match args.output {
        Some(OutputFormat::Json) => println!("{}", serde_json::to_string_pretty(&doc).expect("serializable")),
        Some(OutputFormat::Yaml) => print!("{}", serde_saphyr::to_string(&doc).expect("serializable")),
        None => {
            let children: Vec<String> = m.children.iter().map(ToString::to_string).collect();
            let related: Vec<String> = m.related.iter().map(describe_related).collect();
            println!("Plugin:     {} {}", m.name, m.version);
            println!("File:       {} ({})", args.plugin.display(), human_size(info.size_bytes));
            println!("Digest:     sha256:{}", info.digest);
            println!(
                "Contract:   operator:plugin@{} (this host: {}, accepts {})",
                info.contract_version,
                contract::host_version(),
                contract::supported_ranges()
            );
            println!("Parent:     {}", m.parent);
            println!("Children:   {}", or_none(&children.join("; ")));
            println!("Related:    {}", or_none(&related.join("; ")));
            println!("CRDs:       {}", or_none(&crd_names.join(", ")));
            println!("Finalizer:  {}", m.finalizer.as_deref().unwrap_or("<none>"));
            println!("Exports:");
            info.exports.iter().for_each(|e| println!("  {e}"));
            println!("Imports:");
            info.imports.iter().for_each(|i| println!("  {i}"));
        }
    }
    Ok(())
}

/// `v1, Kind=Pod by the selector at spec.selector`, one related kind.
fn describe_related(r: &operator_plugin_sdk::RelatedKind) -> String {
    use operator_plugin_sdk::Attachment;
    let how = match &r.attach {
        Attachment::SelectorFrom(path) => format!("by the selector at {path}"),
        Attachment::NamesFrom(paths) => format!("named at {}", paths.join(", ")),
        Attachment::FixedSelector(s) => format!("matching {s}"),
    };
    let scope = if r.cluster_scoped { ", cluster-wide" } else { "" };
    format!("{} {how}{scope}", r.kind)
}

fn or_none(s: &str) -> &str {
    if s.is_empty() { "<none>" } else { s }
}

fn human_size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / f64::from(1 << 10)),
        b => format!("{b} B"),
    }
}
