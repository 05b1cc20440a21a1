//! The `Plugin` resource against the embedded API server, wired as `host
//! run --plugin-resources` wires it: a Plugin object's ConfigMap source runs
//! under `plugin/NAME` and its status says which version serves; a spec
//! change swaps; a refused version (not a component, or signed with a key its
//! spec.trust does not hold) leaves the old one serving with Ready=False and
//! the reason; an `oci` source without an OCI client says so; a candidate is
//! shadowed and promoted automatically by moving it into spec.source; and
//! deleting the object stops its plugin. A plugin given by flag is
//! published as a labelled Plugin object the watch never reads back, with
//! the same status, a Warning Event on a refusal, and deleted once gone.

use crate::common;
use crate::upgrades::rebuilt;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiServer;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use common::trust_keys::{key, public_pem, sign};
use operator_runtime::clock::SystemClock;
use operator_runtime::controller;
use operator_runtime::events::Recorder;
use operator_runtime::hotswap::shadow::{ShadowConfig, Shadows};
use operator_runtime::hotswap::{Origin, Reloader, Update};
use operator_runtime::manager::{self, Options, Running};
use operator_runtime::metrics::Metrics;
use operator_runtime::plugin_resource::{self, crd};
use operator_runtime::record::Tap;
use operator_runtime::sandbox::Sandbox;

const WAIT: Duration = Duration::from_secs(90);
const NS: &str = "default";
const SOURCE: &str = "plugins";

fn v1() -> Vec<u8> {
    std::fs::read(common::wasm("versioned")).unwrap()
}

fn v2() -> Vec<u8> {
    std::fs::read(common::built_plugin("versioned-v2")).unwrap()
}

fn sha(bytes: &[u8]) -> String {
    format!("sha256:{}", operator_runtime::sandbox::cache::digest(bytes))
}

struct Env {
    client: kube::Client,
    manager: Running,
    /// The reloader's input, as the host's other sources (flags, ConfigMap keys) feed it.
    updates: tokio::sync::mpsc::Sender<Update>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _server: ApiServer,
}

impl Env {
    async fn start() -> Env {
        Self::start_with(Default::default()).await
    }

    /// With `published`: the `--plugin` values whose plugins are published as Plugin objects.
    async fn start_with(published: plugin_resource::mirror::Flags) -> Env {
        let server = ApiServer::new();
        let client = server.kube_client();
        let metrics = Arc::new(Metrics::new());
        let clock: operator_runtime::clock::SharedClock = Arc::new(SystemClock);
        let shadows = Shadows::new(ShadowConfig::default(), metrics.clone(), client.clone(), clock.clone());
        let options = Options {
            resync: Duration::from_secs(3600),
            controller: controller::Config { tap: Tap::default().observed_by(shadows.observer()), ..controller::Config::default() },
            ..Options::default()
        };
        let manager = manager::Builder::new(client.clone()).options(options).clock(clock.clone()).metrics(metrics.clone()).start().await.unwrap();
        plugin_resource::install(&client).await.unwrap();
        let status = operator_runtime::status::Source { registry: manager.registry().clone(), shadows: Some(shadows.clone()) };
        let config = plugin_resource::Config {
            client: client.clone(),
            metrics: metrics.clone(),
            status,
            recorder: Recorder::new(client.clone(), "plugin-resource", clock.clone()),
            oci: None,
            leading: None,
            promote_after: 100,
            file_interval: Duration::from_millis(50),
            status_interval: Duration::from_millis(100),
            published,
        };
        let reloader = Reloader {
            sandbox: Sandbox::new(common::config(Duration::from_secs(5))).unwrap(),
            manager: manager.clone(),
            metrics,
            recorder: Recorder::new(client.clone(), "hotswap", clock),
            on_applied: None,
            trust: Default::default(),
            rollback: operator_runtime::hotswap::rollback::Watchdog::new(Default::default()),
            shadows: Some(shadows),
        };
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let tasks = vec![tokio::spawn(plugin_resource::run(config, tx.clone())), tokio::spawn(reloader.run(rx))];
        Env { client, manager, updates: tx, tasks, _server: server }
    }

    async fn publish(&self, data: &[(&str, Vec<u8>)]) {
        let binary: BTreeMap<String, ByteString> = data.iter().map(|(k, v)| (k.to_string(), ByteString(v.clone()))).collect();
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": SOURCE}, "binaryData": binary});
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), NS);
        api.patch(SOURCE, &PatchParams::apply("plugin-resource-test").force(), &Patch::Apply(&body)).await.unwrap();
    }

    fn plugins(&self) -> Api<DynamicObject> {
        Api::all_with(self.client.clone(), &crd::api_resource())
    }

    async fn create(&self, name: &str, spec: Value) {
        let obj = serde_json::from_value(
            json!({"apiVersion": "plugins.operator-host.dev/v1alpha1", "kind": "Plugin", "metadata": {"name": name}, "spec": spec}),
        )
        .unwrap();
        self.plugins().create(&PostParams::default(), &obj).await.unwrap();
    }

    async fn patch_spec(&self, name: &str, spec: Value) {
        self.plugins().patch(name, &PatchParams::default(), &Patch::Merge(json!({"spec": spec}))).await.unwrap();
    }

    /// Waits until the Plugin's status satisfies `ok`; returns it.
    async fn status(&self, name: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        common::eventually(&format!("plugin {name}: {what}"), WAIT, || async {
            let s = self.plugins().get(name).await.ok()?.data.get("status").cloned()?;
            ok(&s).then_some(s)
        })
        .await
    }

    fn running_version(&self, name: &str) -> Option<String> {
        self.manager.plugin(&format!("plugin/{name}")).map(|p| p.manifest().version.clone())
    }

    async fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
        self.manager.shutdown(Duration::from_secs(30)).await;
    }
}

fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"].as_array().and_then(|c| c.iter().find(|c| c["type"] == type_)).unwrap_or(&Value::Null)
}

fn ready(status: &Value) -> (&str, &str) {
    let c = condition(status, "Ready");
    (c["status"].as_str().unwrap_or_default(), c["reason"].as_str().unwrap_or_default())
}

fn configmap_source(key: &str) -> Value {
    json!({"configMap": {"namespace": NS, "name": SOURCE, "key": key}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plugin_object_runs_swaps_refuses_and_stops_as_its_spec_says_and_its_status_tells() {
    let env = Env::start().await;
    let (one, two) = (v1(), v2());
    env.publish(&[("v1.wasm", one.clone()), ("v2.wasm", two.clone()), ("broken.wasm", b"\0asm this is not a component".to_vec())]).await;

    env.create("widgets", json!({"source": configmap_source("v1.wasm")})).await;
    let s = env.status("widgets", "Ready with v1's digest", |s| ready(s) == ("True", "Serving") && s["digest"] == sha(&one)).await;
    assert_eq!(env.running_version("widgets").as_deref(), Some("1.0.0"));
    assert_eq!((s["version"].as_str(), s["state"].as_str(), s["id"].as_str()), (Some("1.0.0"), Some("Serving"), Some("plugin/widgets")));
    assert_eq!(s["shortDigest"].as_str().unwrap(), &sha(&one)[..19]);
    assert_eq!(s["observedGeneration"], 1);
    assert!(s["contractVersion"].is_string() && s["tier"].is_string(), "{s:#}");

    // A spec change swaps.
    env.patch_spec("widgets", json!({"source": configmap_source("v2.wasm")})).await;
    let s = env.status("widgets", "Ready with v2's digest", |s| ready(s) == ("True", "Serving") && s["digest"] == sha(&two)).await;
    assert_eq!(env.running_version("widgets").as_deref(), Some("2.0.0"));
    assert_eq!(s["observedGeneration"], 2);

    // Not a component: refused; v2 serves on, and the status says both.
    env.patch_spec("widgets", json!({"source": configmap_source("broken.wasm")})).await;
    let s = env.status("widgets", "Ready=False, refused", |s| ready(s) == ("False", "Refused")).await;
    assert_eq!(s["digest"], sha(&two), "the old version still serves: {s:#}");
    let message = condition(&s, "Ready")["message"].as_str().unwrap();
    assert!(message.contains("refused") && message.contains("still running versioned 2.0.0"), "{message}");
    assert_eq!(s["lastError"].as_str(), Some(message));
    assert_eq!(condition(&s, "Degraded")["status"], "True");
    assert_eq!(env.running_version("widgets").as_deref(), Some("2.0.0"));

    // Back to a good version: Ready again, the refusal forgotten.
    env.patch_spec("widgets", json!({"source": configmap_source("v1.wasm")})).await;
    let s = env.status("widgets", "Ready with v1's digest again", |s| ready(s) == ("True", "Serving") && s["digest"] == sha(&one)).await;
    assert_eq!(s.get("lastError"), None, "{s:#}");

    // Deleting the object stops its plugin.
    env.plugins().delete("widgets", &DeleteParams::default()).await.unwrap();
    common::eventually("plugin/widgets to stop", WAIT, || async { env.running_version("widgets").is_none().then_some(()) }).await;
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plugin_runs_only_when_signed_by_a_key_of_its_spec_trust_and_an_oci_source_without_a_client_says_so() {
    let env = Env::start().await;
    let (trusted, other) = (key(1), key(2));
    let dir = tempfile::tempdir().unwrap();
    let pem = std::fs::read_to_string(public_pem(dir.path(), "trusted.pem", &trusted)).unwrap();
    let one = v1();
    env.publish(&[("v1.wasm", one.clone()), ("v1.wasm.sig", sign(&other, &one))]).await;
    env.create("signed", json!({"source": configmap_source("v1.wasm"), "trust": {"ed25519Keys": [pem]}})).await;
    let s = env.status("signed", "Ready=False, untrusted", |s| ready(s) == ("False", "Untrusted")).await;
    let message = condition(&s, "Ready")["message"].as_str().unwrap();
    assert!(message.contains("does not verify"), "{message}");
    assert_eq!(env.running_version("signed"), None);
    assert_eq!(s.get("digest"), None, "nothing serves: {s:#}");

    env.publish(&[("v1.wasm", one.clone()), ("v1.wasm.sig", sign(&trusted, &one))]).await;
    env.status("signed", "Ready once signed by the trusted key", |s| ready(s) == ("True", "Serving") && s["digest"] == sha(&one)).await;

    env.create("from-a-registry", json!({"source": {"oci": {"reference": "oci://127.0.0.1:5000/hello:v1"}}})).await;
    let s = env.status("from-a-registry", "Ready=False, OciUnavailable", |s| ready(s) == ("False", "OciUnavailable")).await;
    assert!(condition(&s, "Ready")["message"].as_str().unwrap().contains("127.0.0.1:5000/hello:v1"), "{s:#}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_candidate_is_shadowed_then_promoted_into_spec_source_after_agreeing_on_enough_reconciles() {
    let env = Env::start().await;
    let (active, candidate) = (v1(), rebuilt(v1()));
    env.publish(&[("v1.wasm", active.clone()), ("next.wasm", candidate.clone())]).await;
    env.create(
        "widgets",
        json!({"source": configmap_source("v1.wasm"), "candidate": configmap_source("next.wasm"), "promotion": {"mode": "Automatic", "afterReconciles": 5}}),
    )
    .await;
    let s = env.status("widgets", "the candidate staged", |s| condition(s, "Staged")["status"] == "True").await;
    assert_eq!((s["state"].as_str(), s["candidate"]["digest"].as_str()), (Some("Shadowing"), Some(sha(&candidate).as_str())), "{s:#}");

    let widgets: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), NS, &crate::hotswap::widgets_resource());
    for i in 0..10 {
        let obj = serde_json::from_value(
            json!({"apiVersion": "swap.test.operator-host.dev/v1", "kind": "Widget", "metadata": {"name": format!("w{i}")}, "spec": {}}),
        )
        .unwrap();
        widgets.create(&PostParams::default(), &obj).await.unwrap();
    }
    let s = env.status("widgets", "the candidate promoted and serving", |s| ready(s) == ("True", "Serving") && s["digest"] == sha(&candidate)).await;
    assert_eq!(condition(&s, "Staged")["reason"], "NoCandidate");
    let spec = env.plugins().get("widgets").await.unwrap().data["spec"].clone();
    assert_eq!(spec["source"], configmap_source("next.wasm"), "spec.candidate moved to spec.source: {spec:#}");
    assert_eq!(spec.get("candidate"), None);
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_plugin_given_by_flag_is_published_with_its_status_and_refusals_and_deleted_when_gone() {
    let path = std::path::PathBuf::from("/plugins/versioned.wasm");
    let origin = Origin::File(path.clone());
    let mut flags = plugin_resource::mirror::Flags::default();
    flags.file(origin.id(), "/plugins/versioned.wasm");
    let env = Env::start_with(flags).await;
    let send = |bytes: Option<Vec<u8>>| Update { origin: origin.clone(), bytes, signature: None, trust: None, cosign: None };
    let one = v1();
    env.updates.send(send(Some(one.clone()))).await.unwrap();

    let s = env.status("versioned", "the flag's plugin published, Ready", |s| ready(s) == ("True", "Serving") && s["digest"] == sha(&one)).await;
    assert_eq!(s["id"], origin.id(), "{s:#}");
    let o = env.plugins().get("versioned").await.unwrap();
    assert_eq!(o.metadata.labels.unwrap()[plugin_resource::mirror::PUBLISHED_BY], plugin_resource::mirror::HOST);
    assert_eq!(o.metadata.annotations.unwrap()[plugin_resource::mirror::SOURCE_ANNOTATION], "--plugin /plugins/versioned.wasm");
    assert_eq!(o.data["spec"], json!({"source": {"file": {"path": "/plugins/versioned.wasm"}}}));
    assert!(env.running_version("versioned").is_none(), "the published object is never read back as a Plugin of its own");

    // A refused version: Ready=False with the message and a Warning Event on the object; v1 serves.
    env.updates.send(send(Some(b"\0asm this is not a component".to_vec()))).await.unwrap();
    let s = env.status("versioned", "the refusal", |s| ready(s).0 == "False").await;
    assert_eq!((ready(&s).1, s["digest"].as_str()), ("Refused", Some(sha(&one).as_str())), "{s:#}");
    let message = condition(&s, "Ready")["message"].as_str().unwrap().to_string();
    assert!(message.contains("refused") && message.contains("still running versioned 1.0.0"), "{message}");
    let events: Api<Event> = Api::all(env.client.clone());
    common::eventually("a Warning Event on the published Plugin", WAIT, || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| {
                e.regarding.as_ref().is_some_and(|r| r.kind.as_deref() == Some("Plugin") && r.name.as_deref() == Some("versioned"))
                    && e.type_.as_deref() == Some("Warning")
                    && e.note.as_deref() == Some(message.as_str())
            })
            .map(|_| ())
    })
    .await;
    assert_eq!(env.manager.plugin(&origin.id()).map(|p| p.manifest().version.clone()).as_deref(), Some("1.0.0"));

    // The flag's plugin gone: the object goes too.
    env.updates.send(send(None)).await.unwrap();
    common::eventually("the published Plugin deleted", WAIT, || async { env.plugins().get_opt("versioned").await.ok()?.is_none().then_some(()) })
        .await;
    env.stop().await;
}
