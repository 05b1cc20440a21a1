//! The chart on its own: `helm lint` finds nothing, and what `helm
//! template` renders is what `kubectl kustomize deploy/` builds, object by
//! object, except where the two are meant to differ.

use std::collections::BTreeSet;

use ops::{Helm, chart_dir, helm_binary, normalized, objects};
use real_cluster::binaries::Binaries;

const RELEASE: &str = "operator-host";
const NAMESPACE: &str = "operator-host-system";

/// Each combination of the optional parts a user may turn on.
const VALUE_SETS: &[&[&str]] = &[
    &[],
    &["--set", "webhook.enabled=true"],
    &["--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true"],
    &["--set", "leaderElection.enabled=false", "--set", "replicas=1", "--set", "plugins.configMaps={a/one,b/two}"],
];

#[test]
fn helm_lint_finds_nothing_with_any_of_the_optional_parts() {
    let Some(program) = helm_binary() else { return };
    let home = tempfile::tempdir().unwrap();
    let helm = Helm::new(program, home.path());
    let chart = chart_dir().display().to_string();
    for values in VALUE_SETS {
        let mut args = vec!["lint", "--strict", &chart];
        args.extend_from_slice(values);
        let out = helm.ok(&args);
        assert!(out.contains("1 chart(s) linted, 0 chart(s) failed"), "{values:?}:\n{out}");
        let findings: Vec<&str> = out.lines().filter(|l| l.contains("[WARNING]") || l.contains("[ERROR]")).collect();
        assert!(findings.is_empty(), "helm lint {values:?}:\n{out}");
    }
}

/// deploy/ in a temporary directory, with stand-ins for the plugin files its
/// ConfigMap generator reads (the ConfigMap is not part of the comparison).
fn kustomized(kubectl: &std::path::Path, into: &std::path::Path) -> String {
    let deploy = into.join("deploy");
    copy_dir(&real_cluster::repo_file("deploy"), &deploy);
    for plugin in ["cronjob.wasm.gz", "mydeployment.wasm.gz"] {
        std::fs::write(deploy.join("plugins").join(plugin), b"stand-in").unwrap();
    }
    let out = std::process::Command::new(kubectl).arg("kustomize").arg(&deploy).output().unwrap();
    assert!(out.status.success(), "kubectl kustomize: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn helm_template_renders_what_kustomize_builds_from_deploy() {
    let Some(program) = helm_binary() else { return };
    let Some(binaries) = Binaries::find() else { return };
    let dir = tempfile::tempdir().unwrap();
    let helm = Helm::new(program, dir.path());
    let chart = chart_dir().display().to_string();
    // deploy/ runs image operator-host:latest.
    let rendered = helm.ok(&["template", RELEASE, &chart, "--namespace", NAMESPACE, "--include-crds", "--set", "image.tag=latest"]);
    let (chart_objects, kustomize_objects) = (objects(&rendered), objects(&kustomized(&binaries.path("kubectl"), dir.path())));

    // Only deploy/ has these: Helm makes the namespace (--create-namespace),
    // and the plugins' ConfigMap is made beside the release (two gzipped
    // plugins pass the 1 MiB a release Secret holds).
    let only_kustomize: BTreeSet<&str> = kustomize_objects.keys().filter(|k| !chart_objects.contains_key(*k)).map(String::as_str).collect();
    let only_chart: BTreeSet<&str> = chart_objects.keys().filter(|k| !kustomize_objects.contains_key(*k)).map(String::as_str).collect();
    assert_eq!(only_kustomize, BTreeSet::from([&*format!("ConfigMap/{NAMESPACE}/operator-host-plugins"), &*format!("Namespace//{NAMESPACE}")]));
    assert_eq!(only_chart, BTreeSet::new());
    assert!(chart_objects.len() >= 9, "{:#?}", chart_objects.keys());
    for (key, object) in &chart_objects {
        let (ours, theirs) = (normalized(object.clone()), normalized(kustomize_objects[key].clone()));
        assert!(ours == theirs, "{key} differs:\nhelm template:\n{ours:#}\nkubectl kustomize:\n{theirs:#}");
    }
}

#[test]
fn the_optional_parts_render_only_when_asked_and_with_the_release_names() {
    let Some(program) = helm_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let helm = Helm::new(program, dir.path());
    let chart = chart_dir().display().to_string();
    let template = |values: &[&str]| {
        let mut args = vec!["template", "ops", &chart, "--namespace", "team"];
        args.extend_from_slice(values);
        objects(&helm.ok(&args))
    };
    let plain = template(&[]);
    assert!(!plain.keys().any(|k| k.starts_with("ServiceMonitor/") || k.starts_with("PrometheusRule/")), "{:#?}", plain.keys());
    let deployment = &plain["Deployment/team/ops"];
    let args: Vec<&str> =
        deployment["spec"]["template"]["spec"]["containers"][0]["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert!(args.windows(2).any(|w| w == ["--plugin-configmap", "team/ops-plugins"]), "{args:?}");
    assert!(args.windows(2).any(|w| w == ["--leader-election-id", "ops"]), "{args:?}");
    assert!(!args.iter().any(|a| a.starts_with("--webhook")), "{args:?}");
    let role = &plain["ClusterRole//ops-manager-role"];
    assert!(!role["rules"].as_array().unwrap().iter().any(|r| r["apiGroups"][0] == "admissionregistration.k8s.io"), "{role:#}");

    let hooked = template(&["--set", "webhook.enabled=true", "--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true"]);
    let args: Vec<&str> = hooked["Deployment/team/ops"]["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for pair in
        [["--webhook-cert-secret", "team/ops-webhook-cert"], ["--webhook-service", "team/ops-webhook:443"], ["--webhook-configuration-name", "ops"]]
    {
        assert!(args.windows(2).any(|w| w == pair), "{pair:?} missing from {args:?}");
    }
    assert!(args.contains(&"--webhook-configure"), "{args:?}");
    let role = &hooked["ClusterRole//ops-manager-role"];
    let patch = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["verbs"] == serde_json::json!(["patch"]) && r["apiGroups"][0] == "admissionregistration.k8s.io");
    assert_eq!(patch.unwrap()["resourceNames"], serde_json::json!(["ops"]));
    assert_eq!(hooked["Role/team/ops-webhook-cert-role"]["rules"][1]["resourceNames"], serde_json::json!(["ops-webhook-cert"]));
    assert!(hooked.contains_key("Service/team/ops-webhook"));
    // The PrometheusRule carries the shipped rule file's groups unchanged.
    let shipped: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(real_cluster::repo_file("deploy/prometheus/rules.yaml")).unwrap()).unwrap();
    assert_eq!(hooked["PrometheusRule/team/ops"]["spec"]["groups"], shipped["groups"]);
    assert_eq!(hooked["ServiceMonitor/team/ops"]["spec"]["endpoints"][0]["port"], "metrics");
}
