//! The host runtime end to end: the shipped plugins as real controllers
//! against the embedded API server (in-process client), plus the error path
//! with the hostile plugin. No timed assertions: every wait polls with a
//! generous timeout.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiServer;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use operator_runtime::clock::SystemClock;
use operator_runtime::manager::{self, Options, Running};
use operator_runtime::sandbox::Sandbox;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);

struct Env {
    server: ApiServer,
    client: kube::Client,
    running: Option<Running>,
}

impl Env {
    async fn start(plugins: &[&str]) -> Env {
        Self::start_with(plugins, |_| async {}).await
    }

    async fn start_with<F, Fut>(plugins: &[&str], before: F) -> Env
    where
        F: FnOnce(kube::Client) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        Self::start_full(plugins, Options::default(), before).await
    }

    async fn start_full<F, Fut>(plugins: &[&str], options: Options, before: F) -> Env
    where
        F: FnOnce(kube::Client) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        Self::start_clocked(plugins, options, Arc::new(SystemClock), before).await
    }

    async fn start_clocked<F, Fut>(plugins: &[&str], options: Options, clock: operator_runtime::clock::SharedClock, before: F) -> Env
    where
        F: FnOnce(kube::Client) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let server = ApiServer::new();
        let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
        let plugins: Vec<_> = plugins.iter().map(|p| common::load(&sandbox, p)).collect();
        let registry = operator_runtime::registry::Registry::default();
        let keyed: Vec<_> = plugins.into_iter().map(|p| (p.name().to_string(), p)).collect();
        for (id, p) in &keyed {
            registry.insert(id, p.clone());
            embedded_cluster::register_admission(&server, &registry, p);
        }
        let client = server.kube_client();
        before(client.clone()).await;
        let running = manager::Builder::new(client.clone())
            .plugins_by_source(keyed)
            .options(options)
            .clock(clock)
            .registry(registry)
            .start()
            .await
            .unwrap_or_else(|e| panic!("manager: {}", operator_runtime::error_chain(&e)));
        tokio::time::timeout(WAIT, running.wait_synced()).await.expect("caches sync");
        Env { server, client, running: Some(running) }
    }

    fn api(&self, api_version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
        self.api_in("default", api_version, kind, plural)
    }

    fn api_in(&self, namespace: &str, api_version: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let ar =
            ApiResource { group: group.into(), version: version.into(), api_version: api_version.into(), kind: kind.into(), plural: plural.into() };
        Api::namespaced_with(self.client.clone(), namespace, &ar)
    }

    async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown(Duration::from_secs(30)).await;
        }
        let _ = &self.server;
    }
}

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap()
}

fn sample(path: &str) -> Value {
    yaml(&std::fs::read_to_string(common::workspace_root().join(path)).unwrap())
}

async fn create(api: &Api<DynamicObject>, v: Value) -> DynamicObject {
    api.create(&PostParams::default(), &serde_json::from_value(v).unwrap()).await.unwrap()
}

async fn pods_of(pods: &Api<Pod>, uid: &str) -> Vec<Pod> {
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.metadata.owner_references.as_ref().is_some_and(|rs| {
                rs.iter().any(|r| r.uid == uid && r.controller == Some(true) && r.block_owner_deletion == Some(true) && r.kind == "MyDeployment")
            })
        })
        .collect()
}

async fn mark_ready(pods: &Api<Pod>, list: &[Pod]) {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    for p in list {
        let ready =
            p.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if ready {
            continue;
        }
        let status = json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now}]}});
        let _ = pods.patch_status(p.metadata.name.as_deref().unwrap(), &PatchParams::default(), &Patch::Merge(&status)).await;
    }
}

fn condition<'a>(obj: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    obj.data.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mydeployment_keeps_its_replica_count_of_owned_pods() {
    let env = Env::start(&["mydeployment"]).await;
    let mds = env.api("apps.example.com/v1", "MyDeployment", "mydeployments");
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    let md = create(&mds, sample("plugins/mydeployment/samples/my-deployment-instance.yaml")).await;
    let uid = md.metadata.uid.clone().unwrap();

    // Poll until `n` pods; never more than `max` at any poll (the expectations
    // keep a reconcile from running on a cache that misses its own creates).
    async fn settle(pods: &Api<Pod>, uid: &str, n: usize, max: usize, what: &str) -> Vec<Pod> {
        common::eventually(what, WAIT, || async {
            let ps = pods_of(pods, uid).await;
            assert!(ps.len() <= max, "{what}: {} pods, more than {max}", ps.len());
            mark_ready(pods, &ps).await;
            (ps.len() == n).then_some(ps)
        })
        .await
    }
    let three = settle(&pods, &uid, 3, 3, "3 pods").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(pods_of(&pods, &uid).await.len(), 3, "exactly 3 pods, no duplicates");

    let victim = three[0].metadata.name.clone().unwrap();
    pods.delete(&victim, &DeleteParams::default()).await.unwrap();
    common::eventually("the deleted pod to be replaced", WAIT, || async {
        let ps = pods_of(&pods, &uid).await;
        assert!(ps.len() <= 3);
        mark_ready(&pods, &ps).await;
        (ps.len() == 3 && ps.iter().all(|p| p.metadata.name.as_deref() != Some(victim.as_str()))).then_some(())
    })
    .await;

    mds.patch("my-nginx-app", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 10}}))).await.unwrap();
    settle(&pods, &uid, 10, 10, "10 pods after scaling up").await;
    mds.patch("my-nginx-app", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 2}}))).await.unwrap();
    settle(&pods, &uid, 2, 10, "2 pods after scaling down").await;

    // A template change rolls the pods over to the new image (surge 25% of 2 rounds up to 1).
    let image =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.9.1", "ports": [{"containerPort": 80}]}]}}}});
    mds.patch("my-nginx-app", &PatchParams::default(), &Patch::Merge(image)).await.unwrap();
    common::eventually("the rollout to nginx:1.9.1", WAIT, || async {
        let ps = pods_of(&pods, &uid).await;
        assert!(ps.len() <= 3, "surge of at most 1: {} pods", ps.len());
        mark_ready(&pods, &ps).await;
        let all_new = ps.iter().all(|p| p.spec.as_ref().is_some_and(|s| s.containers[0].image.as_deref() == Some("nginx:1.9.1")));
        (ps.len() == 2 && all_new).then_some(())
    })
    .await;

    let md = common::eventually("Reconciled=True", WAIT, || async {
        let md = mds.get("my-nginx-app").await.ok()?;
        (condition(&md, "Reconciled")?["status"] == "True").then_some(md)
    })
    .await;
    assert!(md.data.pointer("/status/replicas").is_some(), "the plugin's status is kept next to the host's condition: {:?}", md.data["status"]);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cronjob_every_two_seconds_creates_a_job_and_records_the_last_schedule_time() {
    let env = Env::start(&["cronjob"]).await;
    let cjs = env.api("batch.tutorial.kubebuilder.io/v1", "CronJob", "cronjobs");
    let mut cj = sample("plugins/cronjob/samples/batch_v1_cronjob.yaml");
    cj["spec"]["schedule"] = "@every 2s".into();
    cj["spec"].as_object_mut().unwrap().remove("startingDeadlineSeconds");
    let cj = create(&cjs, cj).await;
    let uid = cj.metadata.uid.clone().unwrap();
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let job = common::eventually("a Job owned by the CronJob", WAIT, || async {
        jobs.list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|j| j.metadata.owner_references.as_ref().is_some_and(|rs| rs.iter().any(|r| r.uid == uid && r.controller == Some(true))))
    })
    .await;
    assert_eq!(job.metadata.namespace.as_deref(), Some("default"));
    let cj = common::eventually("status.lastScheduleTime", WAIT, || async {
        let cj = cjs.get("cronjob-sample").await.ok()?;
        cj.data.pointer("/status/lastScheduleTime").is_some().then_some(cj)
    })
    .await;
    assert!(cj.data.pointer("/spec/concurrencyPolicy").is_some());
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cronjob_with_a_bad_schedule_is_refused_by_the_plugins_validation() {
    let env = Env::start(&["cronjob"]).await;
    let cjs = env.api("batch.tutorial.kubebuilder.io/v1", "CronJob", "cronjobs");
    let mut cj = sample("plugins/cronjob/samples/batch_v1_cronjob.yaml");
    cj["spec"]["schedule"] = "every day at noon".into();
    let err = cjs.create(&PostParams::default(), &serde_json::from_value(cj).unwrap()).await.unwrap_err();
    let kube::Error::Api(status) = err else { panic!("{err}") };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(status.message.contains("spec.schedule: Invalid value: \"every day at noon\""), "{}", status.message);
    assert!(!status.message.contains("spec.schedule: spec.schedule"), "the field is named once: {}", status.message);
    env.stop().await;
}

/// How often the hostile plugin's own (non-retryable) error came back from a call.
fn plugin_errors(env: &Env) -> u64 {
    let text = env.running.as_ref().unwrap().metrics().render();
    let series = "plugin_call_errors_total{plugin=\"hostile\",kind=\"plugin_error\"} ";
    text.lines().find_map(|l| l.strip_prefix(series)).map_or(0, |n| n.trim().parse().unwrap())
}

/// Queues every parent, as the periodic resync does, then gives the workers time.
async fn resync_and_settle(env: &Env) {
    for _ in 0..5 {
        for c in env.running.as_ref().unwrap().controllers() {
            c.resync();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_error_sets_reconciled_false_and_records_a_warning_event() {
    let env = Env::start_with(&["hostile"], common::install_hostile_crd).await;
    let hs = env.api("test.operator.dev/v1", "Hostile", "hostiles");
    let h =
        create(&hs, json!({"apiVersion": "test.operator.dev/v1", "kind": "Hostile", "metadata": {"name": "bad"}, "spec": {"mode": "error"}})).await;
    let cond = common::eventually("Reconciled=False", WAIT, || async {
        let h = hs.get("bad").await.ok()?;
        let c = condition(&h, "Reconciled")?.clone();
        (c["status"] == "False").then_some(c)
    })
    .await;
    assert_eq!(cond["reason"], "Refused");
    assert!(cond["message"].as_str().unwrap().contains("asked to fail"), "{cond}");
    let uid = h.metadata.uid.clone().unwrap();
    let ev = common::eventually("a Warning Event on the parent", WAIT, || async {
        common::event_about(&env.client, &uid, |e| e.type_.as_deref() == Some("Warning")).await
    })
    .await;
    assert_eq!(ev.reason.as_deref(), Some("Refused"));
    assert_eq!(ev.reporting_controller.as_deref(), Some("operator-host/hostile"));
    assert!(ev.reporting_instance.as_deref().is_some_and(|i| i.starts_with("operator-host/hostile")));

    // Fixing the object flips the condition back to True.
    hs.patch("bad", &PatchParams::default(), &Patch::Merge(json!({"spec": {"mode": "ok"}}))).await.unwrap();
    common::eventually("Reconciled=True after the fix", WAIT, || async {
        let h = hs.get("bad").await.ok()?;
        (condition(&h, "Reconciled")?["status"] == "True").then_some(())
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_retryable_plugin_error_is_called_once_and_again_only_after_the_parent_changes() {
    // wit/plugin.wit: `retryable: false` means only a change of the object can help.
    let env = Env::start_with(&["hostile"], common::install_hostile_crd).await;
    let hs = env.api("test.operator.dev/v1", "Hostile", "hostiles");
    let h =
        create(&hs, json!({"apiVersion": "test.operator.dev/v1", "kind": "Hostile", "metadata": {"name": "bad"}, "spec": {"mode": "error"}})).await;
    common::eventually("Reconciled=False", WAIT, || async {
        let h = hs.get("bad").await.ok()?;
        (condition(&h, "Reconciled")?["status"] == "False").then_some(())
    })
    .await;
    // Neither the error backoff (5 ms, doubling) nor a resync calls it again.
    resync_and_settle(&env).await;
    assert_eq!(plugin_errors(&env), 1, "called once");
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let uid = h.metadata.uid.clone().unwrap();
    let warnings = || async {
        let list = events.list(&ListParams::default()).await.unwrap().items;
        list.into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid.as_str()) && e.type_.as_deref() == Some("Warning"))
            .collect::<Vec<_>>()
    };
    let once = warnings().await;
    assert_eq!(once.len(), 1, "{once:?}");
    assert!(once[0].series.is_none(), "reported once, not repeated: {:?}", once[0].series);

    // A change of the parent (a label; the spec still asks to fail) is a new input: one more call.
    hs.patch("bad", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}}))).await.unwrap();
    common::eventually("a second call after the change", WAIT, || async { (plugin_errors(&env) >= 2).then_some(()) }).await;
    resync_and_settle(&env).await;
    assert_eq!(plugin_errors(&env), 2, "called once per change");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_returning_garbage_is_an_error_not_a_write() {
    let env = Env::start_with(&["hostile"], common::install_hostile_crd).await;
    let hs = env.api("test.operator.dev/v1", "Hostile", "hostiles");
    create(&hs, json!({"apiVersion": "test.operator.dev/v1", "kind": "Hostile", "metadata": {"name": "g"}, "spec": {"mode": "garbage"}})).await;
    let cond = common::eventually("Reconciled=False", WAIT, || async {
        let h = hs.get("g").await.ok()?;
        let c = condition(&h, "Reconciled")?.clone();
        (c["status"] == "False").then_some(c)
    })
    .await;
    assert_eq!(cond["reason"], "PluginInvalidOutput", "{cond}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_plugins_claiming_one_parent_kind_are_refused() {
    let server = ApiServer::new();
    let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
    let plugins = vec![common::load(&sandbox, "hello"), common::load(&sandbox, "hello")];
    let err = manager::Builder::new(server.kube_client()).plugins(plugins).start().await.unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("both reconcile"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_creates_its_configmap_and_both_shipped_plugins_run_side_by_side() {
    let env = Env::start(&["hello", "cronjob", "mydeployment"]).await;
    let hellos = env.api("example.operator.dev/v1alpha1", "Hello", "hellos");
    let h = create(
        &hellos,
        json!({"apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello", "metadata": {"name": "world"}, "spec": {"greeting": "Hi"}}),
    )
    .await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(env.client.clone(), "default");
    let cm = common::eventually("the greeting ConfigMap", WAIT, || async { cms.get("world-greeting").await.ok() }).await;
    let owner = &cm.metadata.owner_references.unwrap()[0];
    assert_eq!(owner.uid, h.metadata.uid.unwrap());
    assert_eq!(owner.controller, Some(true));
    env.stop().await;
}

const HELLO_CRD_KIND: (&str, &str, &str) = ("example.operator.dev/v1alpha1", "Hello", "hellos");

async fn hello(env: &Env, namespace: &str, name: &str, labels: Value) {
    let api = env.api_in(namespace, HELLO_CRD_KIND.0, HELLO_CRD_KIND.1, HELLO_CRD_KIND.2);
    create(&api, json!({"apiVersion": HELLO_CRD_KIND.0, "kind": "Hello", "metadata": {"name": name, "labels": labels}, "spec": {"greeting": "Hi"}}))
        .await;
}

async fn make_namespaces(client: kube::Client) {
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    for n in ["team-a", "team-b"] {
        nss.create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": n}})).unwrap()).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_restriction_leaves_other_namespaces_alone() {
    let options = Options { namespaces: vec!["team-a".into()], ..Options::default() };
    let env = Env::start_full(&["hello"], options, make_namespaces).await;
    hello(&env, "team-b", "outside", json!({})).await;
    hello(&env, "team-a", "inside", json!({})).await;
    let a: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(env.client.clone(), "team-a");
    let b: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(env.client.clone(), "team-b");
    common::eventually("the ConfigMap in team-a", WAIT, || async { a.get("inside-greeting").await.ok() }).await;
    // team-b was created first; by now its reconcile would have happened had it been watched.
    assert!(b.get("outside-greeting").await.is_err(), "team-b is not watched");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_selector_narrows_the_parents_reconciled() {
    let options = Options { selector: Some("team=a".into()), ..Options::default() };
    let env = Env::start_full(&["hello"], options, |_| async {}).await;
    hello(&env, "default", "unlabelled", json!({})).await;
    hello(&env, "default", "labelled", json!({"team": "a"})).await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(env.client.clone(), "default");
    common::eventually("the selected parent's ConfigMap", WAIT, || async { cms.get("labelled-greeting").await.ok() }).await;
    assert!(cms.get("unlabelled-greeting").await.is_err(), "the unselected parent is not reconciled");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_changed_behind_the_plugins_back_is_put_right() {
    let env = Env::start(&["hello"]).await;
    hello(&env, "default", "drift", json!({})).await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(env.client.clone(), "default");
    common::eventually("the ConfigMap", WAIT, || async { cms.get("drift-greeting").await.ok() }).await;
    cms.patch("drift-greeting", &PatchParams::default(), &Patch::Merge(json!({"data": {"greeting": "tampered"}}))).await.unwrap();
    common::eventually("the ConfigMap to be patched back", WAIT, || async {
        let cm = cms.get("drift-greeting").await.ok()?;
        (cm.data?.get("greeting")? == "Hi").then_some(())
    })
    .await;
    cms.delete("drift-greeting", &DeleteParams::default()).await.unwrap();
    common::eventually("the ConfigMap to be recreated", WAIT, || async { cms.get("drift-greeting").await.ok() }).await;
    env.stop().await;
}

async fn create_md(env: &Env, name: &str, replicas: i64) -> (Api<DynamicObject>, String) {
    let mds = env.api("apps.example.com/v1", "MyDeployment", "mydeployments");
    let mut md = sample("plugins/mydeployment/samples/my-deployment-instance.yaml");
    md["metadata"]["name"] = name.into();
    md["spec"]["replicas"] = replicas.into();
    let uid = create(&mds, md).await.metadata.uid.unwrap();
    (mds, uid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_write_is_reported_backed_off_and_retried_until_it_succeeds() {
    use apiserver::{Fault, FaultAction};
    let env = Env::start(&["mydeployment"]).await;
    let fault = env.server.faults().inject(Fault {
        verb: Some("create".into()),
        group: Some("".into()),
        resource: Some("pods".into()),
        times: None,
        action: FaultAction::internal_error(),
    });
    let (mds, uid) = create_md(&env, "flaky", 2).await;
    let cond = common::eventually("Reconciled=False from the failed create", WAIT, || async {
        let md = mds.get("flaky").await.ok()?;
        let c = condition(&md, "Reconciled")?.clone();
        (c["status"] == "False").then_some(c)
    })
    .await;
    assert_eq!(cond["reason"], "WriteFailedInternalError", "{cond}");
    assert!(cond["message"].as_str().unwrap().contains("create Pod default/"), "{cond}");
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    common::eventually("a Warning Event for the failed write", WAIT, || async {
        events.list(&ListParams::default()).await.ok()?.items.into_iter().find(|e| {
            e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid.as_str()) && e.reason.as_deref() == Some("WriteFailedInternalError")
        })
    })
    .await;
    env.server.faults().clear(fault);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    common::eventually("the pods once the API recovers", WAIT, || async { (pods_of(&pods, &uid).await.len() == 2).then_some(()) }).await;
    common::eventually("Reconciled=True after recovery", WAIT, || async {
        let md = mds.get("flaky").await.ok()?;
        (condition(&md, "Reconciled")?["status"] == "True").then_some(())
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_is_retried_at_once_without_an_error_condition() {
    use apiserver::{Fault, FaultAction};
    let env = Env::start(&["mydeployment"]).await;
    env.server.faults().inject(Fault {
        verb: Some("create".into()),
        group: Some("".into()),
        resource: Some("pods".into()),
        times: Some(1),
        action: FaultAction::Error { code: 409, reason: "Conflict".into(), message: "injected conflict".into() },
    });
    let (mds, uid) = create_md(&env, "racy", 2).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), "default");
    common::eventually("the pods despite the conflict", WAIT, || async { (pods_of(&pods, &uid).await.len() == 2).then_some(()) }).await;
    let md = common::eventually("Reconciled=True", WAIT, || async {
        let md = mds.get("racy").await.ok()?;
        (condition(&md, "Reconciled")?["status"] == "True").then_some(md)
    })
    .await;
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let warnings: Vec<_> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == md.metadata.uid.as_deref() && e.type_.as_deref() == Some("Warning"))
        .collect();
    assert!(warnings.is_empty(), "a conflict is not an error: {warnings:?}");
    let text = env.running.as_ref().unwrap().metrics().render();
    assert!(
        text.contains("controller_runtime_reconcile_total{controller=\"mydeployment\",result=\"requeue\"} 1"),
        "the conflict was met and requeued:\n{text}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_kind_without_a_status_subresource_still_gets_its_condition() {
    let env = Env::start_with(&["hostile"], |client| async move {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "hostiles.test.operator.dev"},
            "spec": {"group": "test.operator.dev", "scope": "Namespaced",
                "names": {"plural": "hostiles", "singular": "hostile", "kind": "Hostile", "listKind": "HostileList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        });
        manager::install_crd(&client, "test", &crd, Duration::from_secs(30)).await.unwrap();
    })
    .await;
    let hs = env.api("test.operator.dev/v1", "Hostile", "hostiles");
    create(&hs, json!({"apiVersion": "test.operator.dev/v1", "kind": "Hostile", "metadata": {"name": "plain"}, "spec": {"mode": "error"}})).await;
    common::eventually("Reconciled=False on the main resource", WAIT, || async {
        let h = hs.get("plain").await.ok()?;
        (condition(&h, "Reconciled")?["status"] == "False").then_some(())
    })
    .await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_plugin_is_contained_and_counted_by_kind() {
    let env = Env::start_with(&["hostile"], common::install_hostile_crd).await;
    let hs = env.api("test.operator.dev/v1", "Hostile", "hostiles");
    create(&hs, json!({"apiVersion": "test.operator.dev/v1", "kind": "Hostile", "metadata": {"name": "boom"}, "spec": {"mode": "panic"}})).await;
    let cond = common::eventually("Reconciled=False", WAIT, || async {
        let h = hs.get("boom").await.ok()?;
        let c = condition(&h, "Reconciled")?.clone();
        (c["status"] == "False").then_some(c)
    })
    .await;
    assert_eq!(cond["reason"], "PluginPanicked", "{cond}");
    let text = env.running.as_ref().unwrap().metrics().render();
    assert!(text.contains("plugin_call_errors_total{plugin=\"hostile\",kind=\"panic\"}"), "{text}");
    assert!(text.contains("controller_runtime_reconcile_errors_total{controller=\"hostile\"}"), "{text}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_sees_the_host_clock_so_a_minutely_cronjob_runs_when_the_clock_says_so() {
    // The host's clock stands still until the test moves it past the first
    // minute boundary after the CronJob's creation (the API server's real
    // time), however long starting the host took.
    let clock = Arc::new(operator_runtime::clock::ManualClock::new(chrono::Utc::now()));
    let env = Env::start_clocked(&["cronjob"], Options::default(), clock.clone(), |_| async {}).await;
    let cjs = env.api("batch.tutorial.kubebuilder.io/v1", "CronJob", "cronjobs");
    let mut cj = sample("plugins/cronjob/samples/batch_v1_cronjob.yaml");
    cj["spec"].as_object_mut().unwrap().remove("startingDeadlineSeconds");
    let created = create(&cjs, cj).await;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), "default");
    let owned = |uid: String| {
        let jobs = jobs.clone();
        async move {
            jobs.list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|j| j.metadata.owner_references.as_ref().is_some_and(|rs| rs.iter().any(|r| r.uid == uid)))
                .count()
        }
    };
    let uid = created.metadata.uid.clone().unwrap();
    assert_eq!(owned(uid.clone()).await, 0);
    // The first */1 run after creation is due one second before the clock's new time.
    let created_at = created.metadata.creation_timestamp.clone().unwrap().0.as_second();
    let first_run = chrono::DateTime::from_timestamp((created_at / 60 + 1) * 60, 0).unwrap();
    assert!(operator_runtime::clock::Clock::now(&*clock) < first_run, "the host's clock is still before the first run");
    clock.set(first_run + chrono::TimeDelta::seconds(1));
    // A spec touch makes the host reconcile now (the plugin's requeue is up to a minute away).
    cjs.patch("cronjob-sample", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"tick": "1"}}}))).await.unwrap();
    common::eventually("the Job of the run the clock made due", WAIT, || {
        let uid = uid.clone();
        let owned = &owned;
        async move { (owned(uid).await >= 1).then_some(()) }
    })
    .await;
    let cj = common::eventually("status.lastScheduleTime", WAIT, || async {
        let cj = cjs.get("cronjob-sample").await.ok()?;
        cj.data.pointer("/status/lastScheduleTime").and_then(Value::as_str).map(str::to_string)
    })
    .await;
    let scheduled = chrono::DateTime::parse_from_rfc3339(&cj).unwrap();
    assert!(scheduled.timestamp() % 60 == 0, "a minute boundary: {cj}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_whose_name_is_taken_by_an_unowned_object_is_an_error_not_done() {
    let env = Env::start(&["hello"]).await;
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(env.client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "taken-greeting"}, "data": {"greeting": "mine"}})).unwrap(),
    )
    .await
    .unwrap();
    hello(&env, "default", "taken", json!({})).await;
    let hellos = env.api(HELLO_CRD_KIND.0, HELLO_CRD_KIND.1, HELLO_CRD_KIND.2);
    let uid = hellos.get("taken").await.unwrap().metadata.uid.unwrap();
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    let ev = common::eventually("a Warning about the taken name", WAIT, || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid.as_str()) && e.type_.as_deref() == Some("Warning"))
    })
    .await;
    assert_eq!(ev.reason.as_deref(), Some("WriteFailedAlreadyExists"));
    assert!(ev.note.as_deref().unwrap_or("").contains("the name is taken by an object this parent does not control"), "{ev:?}");
    let cm = cms.get("taken-greeting").await.unwrap();
    assert_eq!(cm.data.unwrap()["greeting"], "mine", "the other object is left alone");
    assert!(cm.metadata.owner_references.is_none());
    env.stop().await;
}

/// The executor itself, with a cache that has not seen the object yet (its
/// watch event still on the way): the API server is asked who holds the name.
/// Calling it done would never be retried, since an object without an owner
/// reference never requeues the parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_already_exists_the_cache_has_not_seen_yet_is_checked_with_the_api_server() {
    use operator_plugin_sdk::GroupVersionKind;
    use operator_runtime::actions::{Executor, Existing, Lookup, Write};
    struct NotSeenYet;
    impl Lookup for NotSeenYet {
        fn find(&self, _: &GroupVersionKind, _: &str, _: &str) -> Option<Existing> {
            None
        }
        fn namespaced(&self, _: &GroupVersionKind) -> bool {
            true
        }
    }
    let server = ApiServer::new();
    let client = server.kube_client();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner = json!([{"apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello", "name": "p", "uid": "parent-uid", "controller": true}]);
    for (name, owners) in [("theirs", json!(null)), ("ours", owner)] {
        let cm = json!({"metadata": {"name": name, "ownerReferences": owners}, "data": {"k": "v"}});
        cms.create(&PostParams::default(), &serde_json::from_value(cm).unwrap()).await.unwrap();
    }
    let gvk = GroupVersionKind { group: String::new(), version: "v1".into(), kind: "ConfigMap".into() };
    let resources = [(gvk.clone(), ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()))].into();
    let recorder = operator_runtime::events::Recorder::new(client.clone(), "test", Arc::new(SystemClock));
    let regarding = operator_runtime::events::Regarding {
        api_version: "example.operator.dev/v1alpha1".into(),
        kind: "Hello".into(),
        namespace: "default".into(),
        name: "p".into(),
        uid: "parent-uid".into(),
    };
    let executor = Executor {
        client: &client,
        resources: &resources,
        recorder: &recorder,
        regarding: &regarding,
        lookup: &NotSeenYet,
        parent_uid: "parent-uid",
        plugin: "hello",
        child_label: None,
        low_priority_echoes: None,
    };
    let create = |name: &str| Write::Create {
        gvk: gvk.clone(),
        namespace: "default".into(),
        object: json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}, "data": {"k": "mine"}}),
        fixed_name: true,
    };
    let ours = executor.execute(vec![create("ours")]).await;
    assert!(ours.error.is_none(), "the parent's own object is already there: nothing to do, {:?}", ours.error);
    let theirs = executor.execute(vec![create("theirs")]).await;
    let error = theirs.error.expect("a name held by an uncontrolled object is an error");
    assert!(error.what.contains("the name is taken by an object this parent does not control"), "{}", error.what);
    assert_eq!(error.reason(), "AlreadyExists");
    assert_eq!(cms.get("theirs").await.unwrap().data.unwrap()["k"], "v", "the other object is left alone");
}

/// Events recorded off the reconcile path (`Recorder::record`) keep the
/// recorder's deduplication: the same Event three times is one Event whose
/// series counts three.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_recorded_in_the_background_are_deduplicated() {
    let server = ApiServer::new();
    let client = server.kube_client();
    let recorder = operator_runtime::events::Recorder::new(client.clone(), "test", Arc::new(SystemClock));
    let regarding = operator_runtime::events::Regarding {
        api_version: "example.operator.dev/v1alpha1".into(),
        kind: "Hello".into(),
        namespace: "default".into(),
        name: "p".into(),
        uid: "parent-uid".into(),
    };
    for _ in 0..3 {
        recorder.record(&regarding, "Warning", "Broken", "the same note");
    }
    recorder.record(&regarding, "Normal", "Other", "another note");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let broken = common::eventually("one Broken Event counted three times", WAIT, || async {
        let all = events.list(&ListParams::default()).await.unwrap().items;
        let broken: Vec<Event> = all.iter().filter(|e| e.reason.as_deref() == Some("Broken")).cloned().collect();
        let other = all.iter().filter(|e| e.reason.as_deref() == Some("Other")).count();
        let counted = broken.first().and_then(|e| e.series.as_ref()).map(|s| s.count) == Some(3);
        (broken.len() == 1 && counted && other == 1).then_some(broken)
    })
    .await;
    assert_eq!(broken[0].reporting_controller.as_deref(), Some("operator-host/test"));
    assert_eq!(recorder.dropped(), 0);
}
