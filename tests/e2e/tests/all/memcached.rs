//! The operator-sdk Memcached tutorial end to end (issue 20): the memcached
//! example plugin (contract 0.2) on the embedded cluster's Deployment and
//! ReplicaSet controllers, through kubectl only. `status.nodes` comes from
//! Pods the plugin does not own (the ReplicaSet does): related objects.

use e2e::{Host, Value, built, eventually, read};

const NAME: &str = "memcached-sample";
const SELECTOR: &str = "app.kubernetes.io/instance=memcached-sample";

fn ready(p: &Value) -> bool {
    p["status"]["conditions"].as_array().is_some_and(|cs| cs.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
}

/// The names of the Memcached's Pods once exactly `n` are Ready and none is terminating, sorted.
fn ready_pods(host: &Host, n: usize) -> Vec<String> {
    eventually(&format!("{n} Ready memcached Pods"), || {
        let pods = host.items(&["get", "pods", "-l", SELECTOR]);
        let live: Vec<&Value> = pods.iter().filter(|p| p["metadata"]["deletionTimestamp"].is_null()).collect();
        if pods.len() != n || live.len() != n || !live.iter().all(|p| ready(p)) {
            return None;
        }
        let mut names: Vec<String> = live.iter().map(|p| p["metadata"]["name"].as_str().unwrap_or_default().to_string()).collect();
        names.sort();
        Some(names)
    })
}

/// Waits until `status.nodes` is exactly `names`; the Memcached then.
fn nodes_become(host: &Host, names: &[String]) -> Value {
    eventually(&format!("status.nodes to be {names:?}"), || {
        let m = host.json(&["get", "memcached", NAME]);
        (m["status"]["nodes"].as_array()?.iter().filter_map(Value::as_str).collect::<Vec<_>>() == names).then_some(m)
    })
}

fn condition<'a>(m: &'a Value, type_: &str) -> &'a Value {
    m["status"]["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == type_)).unwrap_or(&Value::Null)
}

#[test]
fn memcached_of_three_scales_to_four_reports_its_nodes_and_cascades_on_delete() {
    let plugin = built("wasm32-wasip2/release/memcached.wasm");
    let host = Host::start_with(&["--plugin".into(), plugin.display().to_string()]);
    host.wait_for_crds(&["memcacheds.cache.example.com"]);

    // The tutorial's sample: size 3 -> a Deployment of 3 -> 3 Ready Pods -> status.nodes.
    host.apply(&read("plugins/examples/memcached/samples/cache_v1alpha1_memcached.yaml"));
    let deployment = eventually("the Deployment", || {
        let o = host.kubectl(&["get", "deployment", NAME, "-o", "json"]);
        o.status.success().then(|| serde_json::from_slice::<Value>(&o.stdout).unwrap())
    });
    assert_eq!(deployment["spec"]["replicas"], 3);
    assert_eq!(deployment["metadata"]["ownerReferences"][0]["kind"], "Memcached");
    assert_eq!(deployment["spec"]["template"]["spec"]["containers"][0]["image"], "memcached:1.6.26-alpine3.19");
    let three = ready_pods(&host, 3);
    let m = nodes_become(&host, &three);
    assert_eq!(condition(&m, "Available")["status"], "True", "{m}");
    assert_eq!(m["metadata"]["finalizers"][0], "cache.example.com/finalizer");

    // The CRD refuses what the tutorial's validation refuses.
    let too_big = host.kubectl(&["patch", "memcached", NAME, "--type=merge", "-p", r#"{"spec":{"size":6}}"#]);
    assert!(!too_big.status.success());
    let stderr = String::from_utf8_lossy(&too_big.stderr);
    assert!(stderr.contains("spec.size") && stderr.contains("less than or equal to 5"), "{stderr}");

    // Scale the Memcached to 4 -> the Deployment follows -> 4 nodes.
    host.ok(&["patch", "memcached", NAME, "--type=merge", "-p", r#"{"spec":{"size":4}}"#]);
    eventually("the Deployment to be scaled to 4", || (host.json(&["get", "deployment", NAME])["spec"]["replicas"] == 4).then_some(()));
    let four = ready_pods(&host, 4);
    assert!(three.iter().all(|n| four.contains(n)), "scaling up keeps the first three: {three:?} {four:?}");
    let m = nodes_become(&host, &four);
    assert!(condition(&m, "Available")["message"].as_str().unwrap_or_default().contains("with 4 replicas"), "{m}");

    // Delete -> the finalizer runs, then the Deployment, its ReplicaSet and Pods go.
    host.ok(&["delete", "memcached", NAME, "--timeout=60s"]);
    let gone = host.kubectl(&["get", "memcached", NAME]);
    assert!(!gone.status.success() && String::from_utf8_lossy(&gone.stderr).contains("NotFound"));
    eventually("the Deployment to be garbage-collected", || (!host.kubectl(&["get", "deployment", NAME]).status.success()).then_some(()));
    eventually("the ReplicaSets to be garbage-collected", || host.items(&["get", "replicasets", "-l", SELECTOR]).is_empty().then_some(()));
    eventually("the Pods to be garbage-collected", || host.items(&["get", "pods", "-l", SELECTOR]).is_empty().then_some(()));
}
