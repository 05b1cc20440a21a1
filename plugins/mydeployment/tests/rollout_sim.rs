//! Step-by-step rollouts against a tiny simulated cluster.
//!
//! Each step calls the plugin with the cluster as it is, then applies the
//! actions the way the host and API server would: created Pods get a
//! generated name and uid and become Running and Ready one step later,
//! deletes remove the object at once, ControllerRevisions are stored and
//! patched, the status is written. After every step the rollout's promises
//! are checked: never more Pods than replicas + maxSurge when Pods are
//! created, never fewer available Pods than replicas - maxUnavailable because
//! of a delete, and the rollout ends in a bounded number of steps.

use mydeployment::MyDeploymentPlugin;
use operator_plugin_sdk::serde_json::{Value, json};
use operator_plugin_sdk::{Action, Object, Plugin, Time};

const START: i64 = 1_772_366_400_000; // 2026-03-01T12:00:00Z
const STEP_MS: i64 = 10_000;
const MAX_STEPS: usize = 60;

fn template(image: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": "my-nginx-app"}},
        "spec": {"containers": [{"name": "nginx", "image": image, "ports": [{"containerPort": 80}]}]}
    })
}

fn rolling(surge: Value, unavailable: Value) -> Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
}

/// The cluster: one MyDeployment, its Pods and revisions, and a clock.
struct Cluster {
    parent: Value,
    pods: Vec<Value>,
    revisions: Vec<Value>,
    /// Related objects the host would pass (the ConfigMaps the template names).
    related: Vec<Value>,
    now: i64,
    next_id: u64,
    /// Pods not yet Ready, with the steps left until they are (1 unless
    /// `seed` varies it).
    starting: Vec<(String, u64)>,
    /// Seed of a tiny LCG that, when set, makes new Pods take 1 to 3 steps
    /// to become Ready, so rollouts interleave differently.
    seed: Option<u64>,
    steps: usize,
    log: Vec<String>,
}

/// Counts of one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Counts {
    total: i32,
    available: i32,
}

impl Cluster {
    fn new(spec: Value) -> Self {
        let parent = json!({
            "apiVersion": "apps.example.com/v1", "kind": "MyDeployment",
            "metadata": {"name": "my-nginx-app", "namespace": "default", "uid": "md-uid", "generation": 1, "resourceVersion": "1", "creationTimestamp": "2026-03-01T12:00:00Z"},
            "spec": spec
        });
        Cluster {
            parent,
            pods: vec![],
            revisions: vec![],
            related: vec![],
            now: START,
            next_id: 0,
            starting: vec![],
            seed: None,
            steps: 0,
            log: vec![],
        }
    }

    fn spec(&self) -> &Value {
        &self.parent["spec"]
    }

    /// Changes the spec as `kubectl apply` would: merge and bump the generation.
    fn edit(&mut self, patch: Value) {
        merge(&mut self.parent["spec"], &patch);
        let g = self.parent["metadata"]["generation"].as_i64().unwrap();
        self.parent["metadata"]["generation"] = json!(g + 1);
        self.log.push(format!("edit {patch}"));
    }

    fn now_rfc3339(&self) -> String {
        Time::from_unix_millis(self.now).to_rfc3339()
    }

    fn min_ready_seconds(&self) -> i64 {
        self.spec()["minReadySeconds"].as_i64().unwrap_or(0)
    }

    fn counts(&self) -> Counts {
        let min_ready = self.min_ready_seconds() * 1000;
        let available = self
            .pods
            .iter()
            .filter(|p| {
                p["status"]["conditions"][0]["status"] == "True"
                    && Time::parse_rfc3339(p["status"]["conditions"][0]["lastTransitionTime"].as_str().unwrap()).unwrap().unix_millis() + min_ready
                        <= self.now - if min_ready > 0 { 1 } else { 0 }
            })
            .count();
        Counts { total: self.pods.len() as i32, available: available as i32 }
    }

    fn images(&self) -> Vec<String> {
        let mut images: Vec<String> = self.pods.iter().map(|p| p["spec"]["containers"][0]["image"].as_str().unwrap().to_string()).collect();
        images.sort();
        images
    }

    fn children(&self) -> Vec<Object> {
        self.pods.iter().chain(&self.revisions).cloned().map(Object::new).collect()
    }

    /// One reconcile and its consequences. Returns the actions.
    fn step(&mut self) -> Vec<Action> {
        self.steps += 1;
        self.now += STEP_MS;
        // Pods whose start-up is over are scheduled, running and ready now.
        let now = self.now_rfc3339();
        for (_, left) in self.starting.iter_mut() {
            *left -= 1;
        }
        let ready: Vec<String> = self.starting.iter().filter(|(_, left)| *left == 0).map(|(n, _)| n.clone()).collect();
        self.starting.retain(|(_, left)| *left > 0);
        for pod in self.pods.iter_mut().filter(|p| ready.iter().any(|n| p["metadata"]["name"] == n.as_str())) {
            pod["spec"]["nodeName"] = json!("node-1");
            pod["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]});
        }

        let related: Vec<Object> = self.related.iter().cloned().map(Object::new).collect();
        let actions = MyDeploymentPlugin::reconcile_with_related(
            &Object::new(self.parent.clone()),
            &self.children(),
            &related,
            Time::from_unix_millis(self.now),
        )
        .unwrap_or_else(|e| panic!("reconcile failed at step {}: {e}", self.steps));
        for action in &actions {
            self.apply(action);
        }
        actions
    }

    fn apply(&mut self, action: &Action) {
        match action {
            Action::Create(obj) if obj["kind"] == "Pod" => {
                self.next_id += 1;
                let name = format!("{}{:05}", obj["metadata"]["generateName"].as_str().unwrap(), self.next_id);
                let mut pod = obj.clone();
                pod["metadata"]["name"] = json!(name);
                pod["metadata"]["namespace"] = json!("default");
                pod["metadata"]["uid"] = json!(format!("pod-uid-{:05}", self.next_id));
                pod["metadata"]["creationTimestamp"] = json!(self.now_rfc3339());
                pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps.example.com/v1", "kind": "MyDeployment", "name": "my-nginx-app", "uid": "md-uid", "controller": true}]);
                pod["status"] =
                    json!({"phase": "Pending", "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": self.now_rfc3339()}]});
                let delay = match self.seed.as_mut() {
                    Some(seed) => {
                        *seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                        1 + (*seed >> 33) % 3
                    }
                    None => 1,
                };
                self.starting.push((name.clone(), delay));
                self.log.push(format!("step {}: create {name}", self.steps));
                self.pods.push(pod);
            }
            Action::Create(obj) if obj["kind"] == "ControllerRevision" => {
                let name = obj["metadata"]["name"].as_str().unwrap();
                assert!(!self.revisions.iter().any(|r| r["metadata"]["name"] == name), "revision {name} created twice");
                let mut rev = obj.clone();
                rev["metadata"]["namespace"] = json!("default");
                rev["metadata"]["uid"] = json!(format!("rev-uid-{name}"));
                self.log.push(format!("step {}: create revision {name} ({})", self.steps, rev["revision"]));
                self.revisions.push(rev);
            }
            Action::Patch { target, patch } => {
                assert_eq!(target.kind, "ControllerRevision", "only revisions are patched");
                let rev = self.revisions.iter_mut().find(|r| r["metadata"]["name"] == target.name.as_str()).expect("patch of a missing revision");
                merge(rev, patch);
                self.log.push(format!("step {}: patch {} {patch}", self.steps, target.name));
            }
            Action::Delete { target, .. } => {
                let list = if target.kind == "Pod" { &mut self.pods } else { &mut self.revisions };
                let before = list.len();
                list.retain(|o| o["metadata"]["name"] != target.name.as_str());
                self.starting.retain(|(n, _)| *n != target.name);
                assert_eq!(list.len() + 1, before, "delete of a missing {}", target);
                self.log.push(format!("step {}: delete {}", self.steps, target.name));
            }
            Action::SetStatus(status) => self.parent["status"] = status.clone(),
            Action::Create(other) => panic!("unexpected create {other}"),
            Action::Apply(object) => panic!("unexpected apply {object}: MyDeployment creates its Pods and revisions"),
            Action::Event { .. } | Action::RequeueAfterMs(_) | Action::RequeueLowAfterMs(_) | Action::Replace(_) | Action::Finalized {} => {}
        }
    }

    /// Steps until a step changes nothing, checking the rollout's promises.
    fn run(&mut self, max_surge: i32, max_unavailable: i32) -> usize {
        let replicas = self.spec()["replicas"].as_i64().unwrap() as i32;
        let recreate = self.spec()["strategy"]["type"] == "Recreate";
        let target_image = self.spec()["template"]["spec"]["containers"][0]["image"].as_str().map(String::from);
        for i in 0..MAX_STEPS {
            let before = self.counts();
            let actions = self.step();
            let after = self.counts();
            let created = actions.iter().any(|a| matches!(a, Action::Create(o) if o["kind"] == "Pod"));
            let deleted = actions.iter().any(|a| matches!(a, Action::Delete { target, .. } if target.kind == "Pod"));
            if created {
                assert!(after.total <= replicas + max_surge, "step {i}: {} pods > {replicas} + {max_surge}\n{}", after.total, self.log.join("\n"));
            }
            if deleted {
                // Counts after the delete, before the next readiness change.
                let floor = (replicas - max_unavailable).min(before.available);
                assert!(after.available >= floor, "step {i}: {} available < {floor}\n{}", after.available, self.log.join("\n"));
            }
            if recreate && created {
                let old = self.pods.iter().filter(|p| p["spec"]["containers"][0]["image"].as_str() != target_image.as_deref()).count();
                assert_eq!(old, 0, "step {i}: Recreate created Pods while old ones exist");
            }
            if !created && !deleted && self.starting.is_empty() && actions.iter().all(|a| !matches!(a, Action::Patch { .. } | Action::Create(_))) {
                let status = &self.parent["status"];
                if status["updatedReplicas"] == replicas && status["availableReplicas"] == replicas && status["replicas"] == replicas {
                    return i + 1;
                }
            }
        }
        panic!("rollout did not finish in {MAX_STEPS} steps\n{}", self.log.join("\n"));
    }

    fn condition(&self, type_: &str) -> Value {
        self.parent["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == type_).cloned().unwrap_or(Value::Null)
    }
}

fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(t), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

/// A cluster with `replicas` ready Pods of nginx:1.7.9 under `strategy`.
fn settled(replicas: i64, strategy: Value) -> Cluster {
    let mut c = Cluster::new(json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": "my-nginx-app"}},
        "template": template("nginx:1.7.9"),
        "strategy": strategy,
    }));
    c.run(i32::MAX / 2, 0);
    assert_eq!(c.images(), vec!["nginx:1.7.9".to_string(); replicas as usize]);
    c.log.clear();
    c
}

fn assert_rolled_out(c: &Cluster, replicas: usize, image: &str) {
    assert_eq!(c.images(), vec![image.to_string(); replicas], "{}", c.log.join("\n"));
    let progressing = c.condition("Progressing");
    assert_eq!(progressing["reason"], "NewReplicaSetAvailable", "{progressing}");
    assert_eq!(c.condition("Available")["status"], "True");
    assert_eq!(c.parent["status"]["currentRevision"], c.parent["status"]["updateRevision"]);
}

#[test]
fn creating_a_mydeployment_brings_up_its_pods_and_first_revision() {
    let c = settled(3, rolling(json!("25%"), json!("25%")));
    assert_eq!(c.revisions.len(), 1);
    assert_eq!(c.revisions[0]["revision"], 1);
    assert_eq!(c.parent["status"]["revision"], 1);
    assert_eq!(c.parent["status"]["selector"], "app=my-nginx-app");
    let hash = c.revisions[0]["metadata"]["labels"]["pod-template-hash"].as_str().unwrap();
    assert!(c.pods.iter().all(|p| p["metadata"]["labels"]["pod-template-hash"] == hash && p["metadata"]["labels"]["app"] == "my-nginx-app"));
}

#[test]
fn rolling_update_25_percent_surge_and_unavailable() {
    let mut c = settled(3, rolling(json!("25%"), json!("25%")));
    c.edit(json!({"template": template("nginx:1.9.1")}));
    // 3 replicas: surge ceil(0.75) = 1, unavailable floor(0.75) = 0.
    let steps = c.run(1, 0);
    assert_rolled_out(&c, 3, "nginx:1.9.1");
    assert!(steps <= 12, "{steps} steps");
    assert_eq!(c.revisions.len(), 2);
}

#[test]
fn rolling_update_one_surge_zero_unavailable() {
    let mut c = settled(3, rolling(json!(1), json!(0)));
    c.edit(json!({"template": template("nginx:1.9.1")}));
    c.run(1, 0);
    assert_rolled_out(&c, 3, "nginx:1.9.1");
}

#[test]
fn rolling_update_zero_surge_one_unavailable() {
    let mut c = settled(3, rolling(json!(0), json!(1)));
    c.edit(json!({"template": template("nginx:1.9.1")}));
    c.run(0, 1);
    assert_rolled_out(&c, 3, "nginx:1.9.1");
}

#[test]
fn rolling_update_with_large_surge_and_unavailable_over_ten_replicas() {
    let mut c = settled(10, rolling(json!("50%"), json!("30%")));
    c.edit(json!({"template": template("nginx:1.9.1")}));
    c.run(5, 3);
    assert_rolled_out(&c, 10, "nginx:1.9.1");
}

#[test]
fn recreate_removes_every_old_pod_before_creating_new_ones() {
    let mut c = settled(3, json!({"type": "Recreate"}));
    c.edit(json!({"template": template("nginx:1.9.1")}));
    // Recreate has no surge; availability may drop to zero by design.
    c.run(0, 3);
    assert_rolled_out(&c, 3, "nginx:1.9.1");
}

#[test]
fn scale_and_image_change_together_roll_out_to_the_new_count() {
    // The tutorial's case 8: replicas 3 -> 5 and nginx 1.14 in one edit.
    let mut c = settled(3, rolling(json!("25%"), json!("25%")));
    c.edit(json!({"replicas": 5, "template": template("nginx:1.14")}));
    // 5 replicas: surge ceil(1.25) = 2, unavailable floor(1.25) = 1.
    c.run(2, 1);
    if std::env::var("SIM_LOG").is_ok() {
        eprintln!("{}", c.log.join("\n"));
    }
    assert_rolled_out(&c, 5, "nginx:1.14");
}

#[test]
fn scale_down_and_image_change_together_roll_out_to_the_new_count() {
    let mut c = settled(5, rolling(json!("25%"), json!("25%")));
    c.edit(json!({"replicas": 2, "template": template("nginx:1.14")}));
    // 2 replicas: surge 1, unavailable 0.
    c.run(1, 0);
    assert_rolled_out(&c, 2, "nginx:1.14");
}

#[test]
fn scaling_up_and_down_keeps_the_template() {
    let mut c = settled(3, rolling(json!("25%"), json!("25%")));
    c.edit(json!({"replicas": 5}));
    c.run(2, 1);
    assert_rolled_out(&c, 5, "nginx:1.7.9");
    c.edit(json!({"replicas": 2}));
    c.run(1, 0);
    assert_rolled_out(&c, 2, "nginx:1.7.9");
    assert_eq!(c.revisions.len(), 1, "scaling is no new revision");
}

#[test]
fn a_deleted_pod_is_replaced() {
    let mut c = settled(3, rolling(json!("25%"), json!("25%")));
    let victim = c.pods[1]["metadata"]["name"].clone();
    c.pods.retain(|p| p["metadata"]["name"] != victim);
    c.run(1, 0);
    assert_rolled_out(&c, 3, "nginx:1.7.9");
    assert!(!c.pods.iter().any(|p| p["metadata"]["name"] == victim));
}

#[test]
fn min_ready_seconds_holds_old_pods_until_new_ones_are_available() {
    let mut c = settled(3, rolling(json!(1), json!(0)));
    c.edit(json!({"minReadySeconds": 25, "template": template("nginx:1.9.1")}));
    let steps = c.run(1, 0);
    assert_rolled_out(&c, 3, "nginx:1.9.1");
    // Each new Pod needs a step to become ready and three 10 s steps to pass 25 s.
    assert!(steps >= 12, "minReadySeconds was not waited for: {steps} steps");
}

#[test]
fn rollback_pins_the_old_template_and_clearing_it_rolls_forward_again() {
    let mut c = settled(3, rolling(json!("25%"), json!("25%")));
    c.edit(json!({"template": template("nginx:1.9.1")}));
    c.run(1, 0);
    c.edit(json!({"rollbackTo": {"revision": 1}}));
    c.run(1, 0);
    assert_rolled_out(&c, 3, "nginx:1.7.9");
    assert_eq!(c.condition("RolledBack")["status"], "True");
    // Revision 1 was reused as revision 3 and still answers to 1.
    let reused = c.revisions.iter().find(|r| r["revision"] == 3).expect("revision 3");
    assert_eq!(reused["data"], template("nginx:1.7.9"));
    assert_eq!(reused["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"], "1");
    assert_eq!(c.revisions.len(), 2);

    c.edit(json!({"rollbackTo": null}));
    c.run(1, 0);
    assert_rolled_out(&c, 3, "nginx:1.9.1");
    assert_eq!(c.condition("RolledBack"), Value::Null);
    assert_eq!(c.parent["status"]["revision"], 4);
}

#[test]
fn paused_deployments_scale_but_do_not_roll_out() {
    let mut c = settled(3, rolling(json!("25%"), json!("25%")));
    c.edit(json!({"paused": true, "template": template("nginx:1.9.1"), "replicas": 4}));
    for _ in 0..5 {
        c.step();
    }
    assert_eq!(c.images(), vec!["nginx:1.7.9".to_string(); 4], "{}", c.log.join("\n"));
    assert_eq!(c.condition("Progressing")["reason"], "DeploymentPaused");
    assert_eq!(c.revisions.len(), 1, "no revision recorded while paused");
    c.edit(json!({"paused": false}));
    c.run(1, 1);
    assert_rolled_out(&c, 4, "nginx:1.9.1");
}

#[test]
fn revision_history_is_pruned_to_the_limit() {
    let mut c = settled(2, rolling(json!(1), json!(0)));
    c.edit(json!({"revisionHistoryLimit": 2}));
    for v in ["1.9.1", "1.10", "1.11", "1.12"] {
        c.edit(json!({"template": template(&format!("nginx:{v}"))}));
        c.run(1, 0);
    }
    let mut numbers: Vec<i64> = c.revisions.iter().map(|r| r["revision"].as_i64().unwrap()).collect();
    numbers.sort();
    assert_eq!(numbers, vec![3, 4, 5]);
}

#[test]
fn scaling_to_zero_and_back() {
    let mut c = settled(3, rolling(json!("25%"), json!("25%")));
    c.edit(json!({"replicas": 0}));
    for _ in 0..3 {
        c.step();
    }
    assert!(c.pods.is_empty());
    c.edit(json!({"replicas": 3}));
    c.run(1, 0);
    assert_rolled_out(&c, 3, "nginx:1.7.9");
}

/// The tutorial's use cases, applied from the shipped samples in order, each
/// driven to completion.
#[test]
fn seed_use_cases_from_the_samples_in_order() {
    let sample = |name: &str| -> Value {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples").join(name);
        let yaml: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let object = MyDeploymentPlugin::default(Object::new(operator_plugin_sdk::serde_json::to_value(yaml).unwrap())).unwrap();
        object.value()["spec"].clone()
    };
    let mut c = Cluster::new(sample("my-deployment-instance.yaml"));
    c.run(1, 0);
    assert_rolled_out(&c, 3, "nginx:1.7.9");

    // Use case 3: delete a Pod; it is replaced.
    c.pods.remove(0);
    c.run(1, 0);
    assert_rolled_out(&c, 3, "nginx:1.7.9");

    let replace = |c: &mut Cluster, name: &str| {
        let spec = sample(name);
        c.parent["spec"] = spec;
        let g = c.parent["metadata"]["generation"].as_i64().unwrap();
        c.parent["metadata"]["generation"] = json!(g + 1);
    };
    replace(&mut c, "my-deployment-instance-update-image-1.9.1.yaml");
    c.run(1, 0);
    assert_rolled_out(&c, 3, "nginx:1.9.1");
    replace(&mut c, "my-deployment-instance-update-scaleup-1.9.1.yaml");
    c.run(2, 1);
    assert_rolled_out(&c, 5, "nginx:1.9.1");
    replace(&mut c, "my-deployment-instance-update-scaledown-1.9.1.yaml");
    c.run(1, 0);
    assert_rolled_out(&c, 2, "nginx:1.9.1");
    replace(&mut c, "my-deployment-instance-update-image-and-scaleup-1.14.yaml");
    c.run(2, 1);
    assert_rolled_out(&c, 5, "nginx:1.14");
    assert_eq!(c.parent["status"]["revision"], 3);
    replace(&mut c, "my-deployment-instance-rollback.yaml");
    c.run(2, 1);
    assert_rolled_out(&c, 5, "nginx:1.9.1");
    assert_eq!(c.condition("RolledBack")["status"], "True");
    assert_eq!(c.parent["status"]["revision"], 4);
}

/// Many interleavings: Pods take 1 to 3 steps to become Ready (seeded, so
/// failures reproduce), over several strategies and sizes; every step keeps
/// the promises and every rollout ends.
#[test]
fn rollouts_keep_their_bounds_under_varied_start_up_times() {
    let strategies = [
        (rolling(json!("25%"), json!("25%")), "25%", "25%"),
        (rolling(json!(1), json!(0)), "1", "0"),
        (rolling(json!(0), json!(1)), "0", "1"),
        (rolling(json!(2), json!(2)), "2", "2"),
        (rolling(json!("100%"), json!("0%")), "100%", "0%"),
    ];
    // ResolveFenceposts, restated for the assertions.
    let resolve = |v: &str, replicas: i32, up: bool| -> i32 {
        match v.strip_suffix('%') {
            Some(p) => {
                let x = p.parse::<i32>().unwrap() * replicas;
                if up { (x + 99) / 100 } else { x / 100 }
            }
            None => v.parse().unwrap(),
        }
    };
    for seed in 1..=8u64 {
        for (strategy, surge, unavailable) in &strategies {
            for (from, to) in [(3, 3), (4, 7), (6, 2), (1, 5)] {
                let mut c = settled(from, strategy.clone());
                c.seed = Some(seed);
                let image = format!("nginx:seed-{seed}");
                c.edit(json!({"replicas": to, "template": template(&image)}));
                let s = resolve(surge, to, true);
                let mut u = resolve(unavailable, to, false);
                if s == 0 && u == 0 {
                    u = 1;
                }
                c.run(s, u.min(to));
                assert_rolled_out(&c, to as usize, &image);
            }
        }
    }
}

/// Mid-rollout disruptions: a user deletes an old and a new Pod, and the
/// template changes again before the first rollout is done. The rollout
/// still ends with every Pod on the last template, within its bounds.
#[test]
fn a_rollout_recovers_from_deleted_pods_and_a_second_template_change() {
    let mut c = settled(4, rolling(json!(1), json!(1)));
    c.edit(json!({"template": template("nginx:1.9.1")}));
    for _ in 0..3 {
        c.step();
    }
    let new_hash = |c: &Cluster| c.parent["status"]["updateRevision"].as_str().unwrap().trim_start_matches("my-nginx-app-").to_string();
    let h2 = new_hash(&c);
    let old = c.pods.iter().position(|p| p["metadata"]["labels"]["pod-template-hash"] != h2.as_str()).expect("an old Pod");
    c.pods.remove(old);
    if let Some(new) = c.pods.iter().position(|p| p["metadata"]["labels"]["pod-template-hash"] == h2.as_str()) {
        let name = c.pods.remove(new)["metadata"]["name"].as_str().unwrap().to_string();
        c.starting.retain(|(n, _)| *n != name);
    }
    c.step();
    c.edit(json!({"template": template("nginx:1.10")}));
    c.run(1, 1);
    assert_rolled_out(&c, 4, "nginx:1.10");
    assert_eq!(c.parent["status"]["revision"], 3);
}

/// The "config hash" pattern: a change of a ConfigMap the template names
/// (here through `envFrom`) rolls the Pods like an image change, within
/// maxSurge / maxUnavailable, and a change of its labels alone does not.
#[test]
fn a_changed_configmap_rolls_the_pods_and_a_relabel_does_not() {
    let configmap = |data: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nginx-conf", "namespace": "default", "resourceVersion": "5"}, "data": {"nginx.conf": data}});
    let mut t = template("nginx:1.7.9");
    t["spec"]["containers"][0]["envFrom"] = json!([{"configMapRef": {"name": "nginx-conf"}}]);
    let mut c = Cluster::new(json!({
        "replicas": 3,
        "selector": {"matchLabels": {"app": "my-nginx-app"}},
        "template": t,
        "strategy": rolling(json!(1), json!(0)),
    }));
    c.related = vec![configmap("worker_processes 1;")];
    c.run(1, 0);
    let hash_of = |p: &Value| p["metadata"]["labels"]["pod-template-hash"].as_str().unwrap().to_string();
    let digest_of = |p: &Value| p["metadata"]["annotations"]["apps.example.com/config-hash"].as_str().map(String::from);
    let first: Vec<String> = c.pods.iter().map(hash_of).collect();
    assert_eq!(first.len(), 3);
    let first_digest = digest_of(&c.pods[0]).expect("Pods carry the config hash");
    assert_eq!(c.revisions.len(), 1);

    // Labels and resourceVersion only: nothing to roll.
    c.related[0]["metadata"]["labels"] = json!({"touched": "yes"});
    c.related[0]["metadata"]["resourceVersion"] = json!("6");
    c.step();
    assert_eq!(c.pods.iter().map(hash_of).collect::<Vec<_>>(), first);
    assert_eq!(c.revisions.len(), 1);

    // New content: a new revision, then a rolling update to it.
    c.related = vec![configmap("worker_processes 4;")];
    c.run(1, 0);
    assert_eq!(c.revisions.len(), 2, "{}", c.log.join("\n"));
    assert_eq!(c.pods.len(), 3);
    assert!(c.pods.iter().all(|p| !first.contains(&hash_of(p))), "every Pod was replaced");
    let second_digest = digest_of(&c.pods[0]).unwrap();
    assert_ne!(second_digest, first_digest);
    assert!(c.pods.iter().all(|p| digest_of(p).as_deref() == Some(second_digest.as_str())));
    assert_rolled_out(&c, 3, "nginx:1.7.9");
}

/// A MyDeployment whose template names no ConfigMap is unaffected by the
/// feature: its Pods carry no config hash (and every fixture stays as it was).
#[test]
fn a_template_without_configmaps_gets_no_config_hash() {
    let c = settled(2, rolling(json!(1), json!(0)));
    assert!(c.pods.iter().all(|p| p["metadata"]["annotations"].get("apps.example.com/config-hash").is_none()));
}
