//! Ownership enforcement end to end: the hostile plugin tries each forbidden
//! action against the embedded API server, and each is refused with a reason
//! naming the rule, nothing is written (not even the allowed create that came
//! before it in the batch), the parent gets `Reconciled=False` /
//! `ActionRefused` and a Warning Event, the refusal is counted, and the
//! parent is backed off rather than retried in a hot loop.

use crate::common;

use std::time::Duration;

use apiserver::ApiServer;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use operator_runtime::manager::{self, Running};
use operator_runtime::sandbox::Sandbox;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(90);

struct Env {
    _server: ApiServer,
    client: kube::Client,
    running: Running,
}

impl Env {
    async fn start() -> Env {
        let server = ApiServer::new();
        let sandbox = Sandbox::new(common::config(Duration::from_secs(5))).unwrap();
        let plugin = common::load(&sandbox, "hostile");
        let client = server.kube_client();
        common::install_hostile_crd(client.clone()).await;
        let running = manager::Builder::new(client.clone())
            .plugins(vec![plugin])
            .start()
            .await
            .unwrap_or_else(|e| panic!("manager: {}", operator_runtime::error_chain(&e)));
        tokio::time::timeout(WAIT, running.wait_synced()).await.expect("caches sync");
        Env { _server: server, client, running }
    }

    fn hostiles(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), "default", &common::hostile_resource())
    }

    async fn hostile(&self, name: &str, mode: &str, target: &str) -> String {
        let h =
            json!({"apiVersion": "test.operator.dev/v1", "kind": "Hostile", "metadata": {"name": name}, "spec": {"mode": mode, "target": target}});
        let created = self.hostiles().create(&PostParams::default(), &serde_json::from_value(h).unwrap()).await.unwrap();
        created.metadata.uid.unwrap()
    }

    /// The value of the metric line that starts with `series`.
    fn metric(&self, series: &str) -> f64 {
        let [value] = self.metrics([series]);
        value
    }

    /// The values of `series`, all read from one scrape.
    fn metrics<const N: usize>(&self, series: [&str; N]) -> [f64; N] {
        let text = self.running.metrics().render();
        series.map(|s| text.lines().find_map(|l| l.strip_prefix(s)?.trim().parse().ok()).unwrap_or(0.0))
    }

    async fn stop(self) {
        self.running.shutdown(Duration::from_secs(30)).await;
    }
}

fn condition(obj: &DynamicObject, type_: &str) -> Option<Value> {
    obj.data.pointer("/status/conditions")?.as_array()?.iter().find(|c| c["type"] == type_).cloned()
}

/// One forbidden attempt: the parent's name, its mode, the object it aims
/// at, and the words of the rule the refusal must name.
struct Attempt {
    name: &'static str,
    mode: &'static str,
    target: &'static str,
    rule: &'static str,
}

const ATTEMPTS: &[Attempt] = &[
    Attempt { name: "elsewhere", mode: "create-elsewhere", target: "", rule: "namespace \"kube-system\" is not the parent's namespace \"default\"" },
    Attempt { name: "undeclared", mode: "create-undeclared", target: "", rule: "kind v1/Secret is not among the plugin's declared children" },
    Attempt {
        name: "scoped",
        mode: "create-cluster-scoped",
        target: "",
        rule: "kind v1/Namespace is cluster-scoped and cannot be a child of the namespaced Hostile",
    },
    Attempt { name: "replace-loose", mode: "replace-unowned", target: "loose", rule: "ConfigMap default/loose is not controlled by this Hostile" },
    Attempt { name: "patch-loose", mode: "patch-unowned", target: "loose", rule: "ConfigMap default/loose is not controlled by this Hostile" },
    Attempt { name: "delete-loose", mode: "delete-unowned", target: "loose", rule: "ConfigMap default/loose is not controlled by this Hostile" },
    Attempt {
        name: "replace-theirs",
        mode: "replace-unowned",
        target: "owner-allowed",
        rule: "ConfigMap default/owner-allowed is not controlled by this Hostile",
    },
    Attempt {
        name: "patch-theirs",
        mode: "patch-unowned",
        target: "owner-allowed",
        rule: "ConfigMap default/owner-allowed is not controlled by this Hostile",
    },
    Attempt {
        name: "delete-theirs",
        mode: "delete-unowned",
        target: "owner-allowed",
        rule: "ConfigMap default/owner-allowed is not controlled by this Hostile",
    },
    Attempt { name: "suicide", mode: "delete-parent", target: "", rule: "the parent Hostile default/suicide itself is not a child" },
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_forbidden_action_is_refused_and_nothing_is_written() {
    let env = Env::start().await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), "default");

    // The objects to steal: one nobody controls, one another parent controls.
    let loose = json!({"metadata": {"name": "loose"}, "data": {"k": "v"}});
    cms.create(&PostParams::default(), &serde_json::from_value(loose).unwrap()).await.unwrap();
    let owner_uid = env.hostile("owner", "keep", "").await;
    let theirs = common::eventually("the owner's ConfigMap", WAIT, || async { cms.get("owner-allowed").await.ok() }).await;
    assert_eq!(theirs.metadata.owner_references.as_ref().unwrap()[0].uid, owner_uid);
    let versions_before = [cms.get("loose").await.unwrap().metadata.resource_version, theirs.metadata.resource_version.clone()];

    let mut uids = Vec::new();
    for a in ATTEMPTS {
        uids.push(env.hostile(a.name, a.mode, a.target).await);
    }
    let hostiles = env.hostiles();
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    for (a, uid) in ATTEMPTS.iter().zip(&uids) {
        let cond = common::eventually(&format!("{}: Reconciled=False naming the rule", a.name), WAIT, || async {
            let h = hostiles.get(a.name).await.ok()?;
            let c = condition(&h, "Reconciled")?;
            (c["status"] == "False" && c["message"].as_str()?.contains(a.rule)).then_some(c)
        })
        .await;
        assert_eq!(cond["reason"], "ActionRefused", "{}: {cond}", a.name);
        assert!(cond["message"].as_str().unwrap().starts_with("action 1 ("), "{}: the refused action is named by its index: {cond}", a.name);
        let warning = common::eventually(&format!("{}: a Warning Event", a.name), WAIT, || async {
            events
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid.as_str()) && e.type_.as_deref() == Some("Warning"))
        })
        .await;
        assert_eq!(warning.reason.as_deref(), Some("ActionRefused"), "{}", a.name);
        assert!(warning.note.as_deref().unwrap_or("").contains(a.rule), "{}: {warning:?}", a.name);
        assert!(cms.get(&format!("{}-allowed", a.name)).await.is_err(), "{}: the allowed create before the refused action was not made", a.name);
    }

    // Nothing the attempts aimed at was written.
    assert!(Api::<ConfigMap>::namespaced(env.client.clone(), "kube-system").get("elsewhere-elsewhere").await.is_err());
    assert!(Api::<Secret>::namespaced(env.client.clone(), "default").get("undeclared-secret").await.is_err());
    assert!(Api::<Namespace>::all(env.client.clone()).get("scoped-ns").await.is_err());
    let loose = cms.get("loose").await.expect("the unowned ConfigMap was not deleted");
    let theirs = cms.get("owner-allowed").await.expect("the other parent's ConfigMap was not deleted");
    assert_eq!([loose.metadata.resource_version.clone(), theirs.metadata.resource_version.clone()], versions_before, "neither was changed");
    assert_eq!(loose.data.unwrap().get("stolen"), None);
    assert_eq!(theirs.metadata.owner_references.unwrap()[0].uid, owner_uid, "still the other parent's");
    assert!(hostiles.get("suicide").await.unwrap().metadata.deletion_timestamp.is_none(), "the parent was not deleted");

    let refused = env.metric("plugin_call_errors_total{plugin=\"hostile\",kind=\"action_refused\"}");
    assert!(refused >= ATTEMPTS.len() as f64, "every refusal is counted: {refused}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_parent_is_backed_off_not_retried_in_a_hot_loop() {
    let env = Env::start().await;
    env.hostile("stubborn", "create-undeclared", "").await;
    let hostiles = env.hostiles();
    common::eventually("Reconciled=False", WAIT, || async {
        let h = hostiles.get("stubborn").await.ok()?;
        (condition(&h, "Reconciled")?["status"] == "False").then_some(())
    })
    .await;
    // Exponential backoff from 5 ms: about 10 failures in the first 3 s. A
    // hot loop would run hundreds in that time; a slow machine runs fewer.
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Both from one scrape. A refusal is counted when it happens and the
    // failed reconcile when it ends, so one retry may be between the two.
    let [errors, refused] = env.metrics([
        "controller_runtime_reconcile_errors_total{controller=\"hostile\"}",
        "plugin_call_errors_total{plugin=\"hostile\",kind=\"action_refused\"}",
    ]);
    assert!((1.0..=16.0).contains(&errors), "{errors} failed reconciles in about 3 s");
    assert!(refused == errors || refused == errors + 1.0, "each failure was the refusal: {refused} refusals, {errors} failures");
    env.stop().await;
}
