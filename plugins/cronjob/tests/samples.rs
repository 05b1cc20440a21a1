//! The shipped samples are valid CronJobs once defaulted, as admission would
//! see them, and the CRD's manifest entry names the kinds the host needs.

use std::fs;
use std::path::Path;

use cronjob::CronJobPlugin;
use operator_plugin_sdk::{Plugin, plugin, serde_json};

#[test]
fn every_sample_defaults_and_validates_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples");
    let mut policies = Vec::new();
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let yaml: serde_json::Value = serde_saphyr::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        let json = serde_json::to_value(yaml).unwrap().to_string();
        let defaulted = plugin::default::<CronJobPlugin>(&json).unwrap();
        assert_eq!(plugin::validate::<CronJobPlugin>(&defaulted, None), vec![], "{}", path.display());
        let value: serde_json::Value = serde_json::from_str(&defaulted).unwrap();
        policies.push(value["spec"]["concurrencyPolicy"].as_str().unwrap().to_string());
    }
    policies.sort();
    assert_eq!(policies, ["Allow", "Forbid", "Replace"]);
}

#[test]
fn the_manifest_declares_cronjobs_over_jobs() {
    let m = CronJobPlugin::manifest();
    assert_eq!(m.parent.api_version(), "batch.tutorial.kubebuilder.io/v1");
    assert_eq!(m.parent.kind, "CronJob");
    assert_eq!(m.children.len(), 1);
    assert_eq!(m.children[0].api_version(), "batch/v1");
    assert_eq!(m.crds.len(), 1);
    assert_eq!(m.finalizer, None);
}
