//! The shipped samples are valid MyDeployments once defaulted, as admission
//! would see them, each is a valid update of the one before (the tutorial's use
//! cases are applied in this order), and the manifest names what the host
//! needs.

use std::fs;
use std::path::Path;

use mydeployment::MyDeploymentPlugin;
use operator_plugin_sdk::serde_json::{self, Value};
use operator_plugin_sdk::{Plugin, plugin};

/// The MyDeployment samples in the order of the tutorial's use cases.
pub const SEQUENCE: [&str; 6] = [
    "my-deployment-instance.yaml",
    "my-deployment-instance-update-image-1.9.1.yaml",
    "my-deployment-instance-update-scaleup-1.9.1.yaml",
    "my-deployment-instance-update-scaledown-1.9.1.yaml",
    "my-deployment-instance-update-image-and-scaleup-1.14.yaml",
    "my-deployment-instance-rollback.yaml",
];

fn sample(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples").join(name);
    let yaml: serde_json::Value = serde_saphyr::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    serde_json::to_value(yaml).unwrap()
}

#[test]
fn every_sample_defaults_and_validates_cleanly_as_a_sequence_of_updates() {
    let mut previous: Option<String> = None;
    for name in SEQUENCE {
        let defaulted = plugin::default::<MyDeploymentPlugin>(&sample(name).to_string()).unwrap();
        assert_eq!(plugin::validate::<MyDeploymentPlugin>(&defaulted, None), vec![], "{name}");
        assert_eq!(plugin::validate::<MyDeploymentPlugin>(&defaulted, previous.as_deref()), vec![], "{name} as an update");
        previous = Some(defaulted);
    }
}

#[test]
fn every_file_in_samples_is_accounted_for() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples");
    let mut names: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    let mut want: Vec<String> = SEQUENCE.iter().map(|s| s.to_string()).collect();
    want.push("my-deployment-service.yaml".into());
    want.sort();
    assert_eq!(names, want);
    assert_eq!(sample("my-deployment-service.yaml")["spec"]["selector"]["app"], "my-nginx-app");
}

#[test]
fn the_manifest_declares_mydeployments_over_pods_and_controller_revisions() {
    let m = MyDeploymentPlugin::manifest();
    assert_eq!(m.name, "mydeployment");
    assert_eq!(m.parent.api_version(), "apps.example.com/v1");
    assert_eq!(m.parent.kind, "MyDeployment");
    let children: Vec<String> = m.children.iter().map(|c| format!("{}/{}", c.api_version(), c.kind)).collect();
    assert_eq!(children, ["v1/Pod", "apps/v1/ControllerRevision"]);
    assert_eq!(m.crds.len(), 1);
    assert_eq!(m.crds[0]["spec"]["names"]["shortNames"][0], "md");
    assert_eq!(m.finalizer, None);
}
