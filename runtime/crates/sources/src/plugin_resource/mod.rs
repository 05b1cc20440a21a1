//! The `Plugin` custom resource (`plugins.operator-host.dev/v1alpha1`,
//! cluster-scoped): what runs, declared and seen the Kubernetes way. With
//! `host run --plugin-resources` the host installs the [`crd`], watches
//! Plugin objects and, for each:
//! 1. turns its `spec.source` (and `spec.candidate`) into running [`sources`]
//!    that feed the hot-swap reloader under the id `plugin/NAME`
//!    (`plugin/NAME.candidate` is staged and shadowed beside it), with the
//!    trust its [`spec`] requires on top of the host's;
//! 2. writes its [`status`] from the host's status page (the same numbers
//!    `host status` prints) whenever it changes, checked every
//!    `status_interval` and at every swap;
//! 3. promotes its candidate (moves `spec.candidate` to `spec.source`) under
//!    `spec.promotion: {mode: Automatic}` once the shadow tally allows.
//!
//! Deleting a Plugin stops its plugin (no finalizer: a host that was down
//! simply does not load it). With leader election only the leader writes
//! status and promotes, as only it writes the webhook configurations; every
//! replica loads the same plugins. Plugins given by `--plugin` (files,
//! `oci://`) and ConfigMap keys are published as Plugin objects of their
//! own ([`mirror`]): output only, labelled, and left out of the watch.

pub mod crd;
pub mod mirror;
pub mod registry;
pub mod sources;
pub mod spec;
pub mod status;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

pub use sources::{OciRequest, OciSource, Pulled};

use crate::events::{Recorder, Regarding};
use crate::hotswap::{Origin, Update};
use crate::metrics::Metrics;
use spec::{PluginSpec, PromotionMode};

/// How long the host waits for its Plugin CRD to be Established.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

/// What the Plugin watch needs.
pub struct Config {
    pub client: kube::Client,
    pub metrics: Arc<Metrics>,
    /// The status page's source: the plugins by id and the staged candidates.
    pub status: crate::status::Source,
    pub recorder: Recorder,
    /// The OCI client; `None`: an `oci` source is reported `OciUnavailable`.
    pub oci: Option<Arc<dyn OciSource>>,
    /// With leader election: whether this replica leads (only then it writes).
    pub leading: Option<watch::Receiver<bool>>,
    /// Agreeing reconciles before an automatic promotion, unless the Plugin
    /// says (`--shadow-promote-after`).
    pub promote_after: u64,
    /// How often `file` sources are polled.
    pub file_interval: Duration,
    /// How often statuses are compared with the host's state (besides at every swap).
    pub status_interval: Duration,
    /// The `--plugin` values the host was given: their plugins (and those
    /// of ConfigMap keys) are published as Plugin objects ([`mirror`]).
    pub published: mirror::Flags,
}

/// Installs the Plugin CRD (server-side apply) and waits until it is Established.
pub async fn install(client: &kube::Client) -> Result<(), crate::manager::Error> {
    crate::manager::install_crd(client, "the host (--plugin-resources)", &crd::crd(), ESTABLISH_TIMEOUT).await
}

/// Aborts a task when dropped.
struct Task(tokio::task::JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A running source and what started it (restarted when that changes).
struct Running {
    key: String,
    _task: Task,
}

/// One Plugin object as last seen.
struct Tracked {
    uid: String,
    generation: Option<i64>,
    resource_version: Option<String>,
    spec: Option<PluginSpec>,
    invalid: Option<String>,
    /// Its `status` now (as the watch last saw it, or as last written).
    status: Value,
    source: Option<Running>,
    candidate: Option<Running>,
}

fn id(name: &str, candidate: bool) -> String {
    origin(name, "", candidate, String::new()).id()
}

fn origin(name: &str, uid: &str, candidate: bool, signature_name: String) -> Origin {
    Origin::Resource { name: name.into(), uid: uid.into(), candidate, signature_name }
}

/// Watches Plugin objects and sends their plugins to `updates` (the
/// reloader's input, shared with the other sources) until aborted or the
/// reloader is gone.
pub async fn run(config: Config, updates: mpsc::Sender<Update>) {
    let api: Api<DynamicObject> = Api::all_with(config.client.clone(), &crd::api_resource());
    // The objects the host publishes are output, never read back as input.
    let mut stream = watcher::watcher(api.clone(), watcher::Config::default().labels(mirror::NOT_PUBLISHED)).default_backoff().boxed();
    let ctx = sources::Context {
        client: config.client.clone(),
        updates,
        problems: sources::Problems::default(),
        oci: config.oci.clone(),
        file_interval: config.file_interval,
    };
    let mirror = mirror::Mirror::new(config.published.clone());
    let mut w = Watch { config, api, ctx, plugins: BTreeMap::new(), promoted: HashSet::new(), mirror };
    let mut listing = BTreeSet::new();
    let mut tick = tokio::time::interval(w.config.status_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut swaps = w.config.status.registry.changes();
    loop {
        tokio::select! {
            event = stream.next() => match event {
                None => return,
                Some(Ok(Event::Init)) => listing.clear(),
                Some(Ok(Event::InitApply(o))) => {
                    listing.insert(o.metadata.name.clone().unwrap_or_default());
                    w.applied(o).await;
                }
                Some(Ok(Event::InitDone)) => {
                    let gone: Vec<String> = w.plugins.keys().filter(|n| !listing.contains(*n)).cloned().collect();
                    for name in gone {
                        w.deleted(&name).await;
                    }
                }
                Some(Ok(Event::Apply(o))) => w.applied(o).await,
                Some(Ok(Event::Delete(o))) => w.deleted(&o.metadata.name.clone().unwrap_or_default()).await,
                Some(Err(e)) => tracing::warn!(error = %crate::error_chain(&e), "Plugin watch failed; retrying"),
            },
            _ = tick.tick() => w.write_statuses().await,
            changed = swaps.changed() => {
                if changed.is_err() {
                    return;
                }
                w.write_statuses().await;
            }
        }
        if w.ctx.updates.is_closed() {
            return;
        }
    }
}

/// The watch's state: the Plugins by name.
struct Watch {
    config: Config,
    api: Api<DynamicObject>,
    ctx: sources::Context,
    plugins: BTreeMap<String, Tracked>,
    /// (name, resourceVersion) promoted already: not patched twice.
    promoted: HashSet<(String, String)>,
    /// The objects published for plugins given by flag or ConfigMap key.
    mirror: mirror::Mirror,
}

impl Watch {
    /// A Plugin was created or changed: (re)starts the sources its spec changed.
    async fn applied(&mut self, o: DynamicObject) {
        let name = o.metadata.name.clone().unwrap_or_default();
        let uid = o.metadata.uid.clone().unwrap_or_default();
        let spec: Result<PluginSpec, String> =
            serde_json::from_value(o.data.get("spec").cloned().unwrap_or(Value::Null)).map_err(|e| format!("spec does not parse: {e}"));
        let checked = spec.as_ref().map_err(Clone::clone).and_then(|s| s.check().map_err(|e| e.to_string()));
        let t = self.plugins.entry(name.clone()).or_insert_with(|| Tracked {
            uid: uid.clone(),
            generation: None,
            resource_version: None,
            spec: None,
            invalid: None,
            status: Value::Null,
            source: None,
            candidate: None,
        });
        t.uid = uid.clone();
        t.generation = o.metadata.generation;
        t.resource_version = o.metadata.resource_version.clone();
        t.status = o.data.get("status").cloned().unwrap_or(Value::Null);
        let (source, candidate, policy) = match checked {
            Ok(c) => c,
            Err(why) => {
                // The sources of the last valid spec keep feeding what runs.
                tracing::warn!(plugin = %name, "Plugin {name}: {why}");
                t.invalid = Some(why);
                return;
            }
        };
        let spec = spec.expect("checked");
        t.invalid = None;
        let key = |s: &Option<spec::Source>| serde_json::to_string(&(&uid, s, &spec.trust)).expect("a spec serializes");
        let source_key = key(&Some(spec.source.clone()));
        if t.source.as_ref().map(|r| &r.key) != Some(&source_key) {
            let origin = origin(&name, &uid, false, spec::signature_name(&source));
            let task = tokio::spawn(sources::run(self.ctx.clone(), origin, source, policy.clone(), spec.trust.cosign_keys.clone()));
            t.source = Some(Running { key: source_key, _task: Task(task) });
        }
        match candidate {
            Some(c) => {
                let candidate_key = key(&spec.candidate);
                if t.candidate.as_ref().map(|r| &r.key) != Some(&candidate_key) {
                    let origin = origin(&name, &uid, true, spec::signature_name(&c));
                    let task = tokio::spawn(sources::run(self.ctx.clone(), origin, c, policy, spec.trust.cosign_keys.clone()));
                    t.candidate = Some(Running { key: candidate_key, _task: Task(task) });
                }
            }
            None => {
                if t.candidate.take().is_some() {
                    self.ctx.problems.forget(&id(&name, true));
                    remove(&self.ctx, &name, &uid, true).await;
                }
            }
        }
        t.spec = Some(spec);
    }

    /// A Plugin is gone: its sources stop and so does its plugin.
    async fn deleted(&mut self, name: &str) {
        let Some(t) = self.plugins.remove(name) else { return };
        for candidate in [true, false] {
            self.ctx.problems.forget(&id(name, candidate));
            remove(&self.ctx, name, &t.uid, candidate).await;
        }
    }

    fn leading(&self) -> bool {
        self.config.leading.as_ref().is_none_or(|l| *l.borrow())
    }

    /// Writes every status that differs from what the host reports now, and
    /// promotes the candidates whose time has come.
    async fn write_statuses(&mut self) {
        if !self.leading() {
            return;
        }
        let snapshot = self.config.status.snapshot(&self.config.metrics);
        let now = crate::activity::rfc3339(chrono::Utc::now());
        let user: BTreeSet<String> = self.plugins.keys().cloned().collect();
        let pass = mirror::Pass {
            api: &self.api,
            recorder: &self.config.recorder,
            activity: &self.config.metrics.activity,
            running: &snapshot.plugins,
            user: &user,
            now: &now,
        };
        self.mirror.pass(pass).await;
        let activity = &self.config.metrics.activity;
        let mut promote = vec![];
        for (name, t) in &mut self.plugins {
            let (main, cand) = (id(name, false), id(name, true));
            let running = snapshot.plugins.iter().find(|p| p.id == main);
            let inputs = status::Inputs {
                generation: t.generation,
                running,
                invalid: t.invalid.clone(),
                problem: self.ctx.problems.get(&main),
                refusal: activity.refusal(&main),
                loading: self.ctx.problems.last_sent(&main),
                has_candidate: t.spec.as_ref().is_some_and(|s| s.candidate.is_some()),
                candidate_problem: self.ctx.problems.get(&cand),
                candidate_refusal: activity.refusal(&cand),
            };
            if let (Some(spec), Some(p)) = (&t.spec, running)
                && ready_to_promote(spec, p, &inputs, self.ctx.problems.last_sent(&cand).as_deref(), self.config.promote_after)
            {
                promote.push((name.clone(), t.resource_version.clone().unwrap_or_default()));
            }
            let previous = t.status["conditions"].as_array().cloned().unwrap_or_default();
            let desired = status::desired(&inputs, &previous, &now);
            if status::without_nulls(&desired) == t.status {
                continue;
            }
            match self.api.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": desired}))).await {
                Ok(_) => t.status = status::without_nulls(&desired),
                Err(e) => tracing::warn!(plugin = %name, error = %crate::error_chain(&e), "cannot write the Plugin's status; retrying"),
            }
        }
        for (name, resource_version) in promote {
            self.promote(&name, resource_version).await;
        }
    }

    /// Moves `spec.candidate` to `spec.source`, if the object did not change since it was read.
    async fn promote(&mut self, name: &str, resource_version: String) {
        if !self.promoted.insert((name.to_string(), resource_version.clone())) {
            return;
        }
        let patch = json_patch_promotion(&resource_version);
        let result = self.api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch)).await;
        let uid = self.plugins.get(name).map(|t| t.uid.clone()).unwrap_or_default();
        let regarding = Regarding {
            api_version: crate::hotswap::PLUGIN_API_VERSION.into(),
            kind: crd::KIND.into(),
            namespace: String::new(),
            name: name.into(),
            uid,
        };
        let (type_, reason, message) = match result {
            Ok(_) => (
                "Normal",
                "ShadowPromoting",
                format!("candidate of plugin {name} agreed on every shadowed reconcile; spec.candidate moved to spec.source"),
            ),
            Err(e) => ("Warning", "ShadowPromotionFailed", format!("cannot promote the candidate of plugin {name}: {}", crate::error_chain(&e))),
        };
        tracing::info!(plugin = %name, "{message}");
        if let Err(e) = self.config.recorder.publish(&regarding, type_, reason, &message).await {
            tracing::warn!(error = %crate::error_chain(&e), "could not record event");
        }
    }
}

/// Stops the plugin (or candidate) of Plugin `name`.
async fn remove(ctx: &sources::Context, name: &str, uid: &str, candidate: bool) {
    let update = Update { origin: origin(name, uid, candidate, String::new()), bytes: None, signature: None, trust: None, cosign: None };
    let _ = ctx.updates.send(update).await;
}

/// Whether `p`'s staged candidate may be promoted under `spec.promotion`:
/// automatic, the candidate staged is the one `spec.candidate` gave last
/// (`sent`), and it agreed often enough without a difference or error.
fn ready_to_promote(spec: &PluginSpec, p: &crate::status::Plugin, i: &status::Inputs, sent: Option<&str>, host_default: u64) -> bool {
    let after = spec.promotion.after_reconciles.unwrap_or(host_default);
    let Some(c) = &p.candidate else { return false };
    spec.promotion.mode == PromotionMode::Automatic
        && spec.candidate.is_some()
        && after > 0
        && i.candidate_problem.is_none()
        && i.candidate_refusal.is_none()
        && sent == Some(c.digest.trim_start_matches("sha256:"))
        && c.differ == 0
        && c.errors == 0
        && c.agree >= after
}

/// A JSON patch that moves `spec.candidate` to `spec.source` only on the
/// object at `resource_version` (a test, as a precondition).
fn json_patch_promotion(resource_version: &str) -> json_patch::Patch {
    serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "move", "from": "/spec/candidate", "path": "/spec/source"},
    ]))
    .expect("a valid JSON patch")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::{Counts, Queue};
    use crate::sandbox::Tier;
    use crate::status::{Candidate, State};

    fn plugin(agree: u64, differ: u64) -> crate::status::Plugin {
        crate::status::Plugin {
            id: "plugin/p".into(),
            name: "p".into(),
            version: "1".into(),
            digest: "aa".into(),
            contract: "0.2.0".into(),
            tier: Tier::Baseline,
            parent: "x/v1 P".into(),
            state: State::Shadowing,
            queue: Queue::default(),
            recent: Counts::default(),
            total: Counts::default(),
            last_error: None,
            candidate: Some(Candidate { version: "2".into(), digest: "bb".into(), agree, differ, errors: 0, skipped: 0 }),
            last_rollback: None,
        }
    }

    #[test]
    fn a_candidate_is_promoted_only_automatically_after_enough_clean_agreement_with_the_bytes_staged() {
        let spec: PluginSpec = serde_json::from_value(json!({
            "source": {"file": {"path": "/a"}}, "candidate": {"file": {"path": "/b"}},
            "promotion": {"mode": "Automatic", "afterReconciles": 3}
        }))
        .unwrap();
        let i = status::Inputs::default();
        assert!(ready_to_promote(&spec, &plugin(3, 0), &i, Some("bb"), 100));
        assert!(!ready_to_promote(&spec, &plugin(2, 0), &i, Some("bb"), 100), "not enough yet");
        assert!(!ready_to_promote(&spec, &plugin(9, 1), &i, Some("bb"), 100), "it differed once");
        assert!(!ready_to_promote(&spec, &plugin(9, 0), &i, Some("cc"), 100), "spec.candidate gave other bytes since");
        let manual = PluginSpec { promotion: Default::default(), ..spec.clone() };
        assert!(!ready_to_promote(&manual, &plugin(9, 0), &i, Some("bb"), 100));
        let host_default = PluginSpec { promotion: spec::Promotion { mode: PromotionMode::Automatic, after_reconciles: None }, ..spec };
        assert!(!ready_to_promote(&host_default, &plugin(9, 0), &i, Some("bb"), 10));
        assert!(ready_to_promote(&host_default, &plugin(10, 0), &i, Some("bb"), 10));
    }

    #[test]
    fn the_promotion_patch_moves_the_candidate_only_at_the_version_read() {
        let mut doc =
            json!({"metadata": {"resourceVersion": "7"}, "spec": {"source": {"file": {"path": "/a"}}, "candidate": {"file": {"path": "/b"}}}});
        json_patch::patch(&mut doc, &json_patch_promotion("7")).unwrap();
        assert_eq!(doc["spec"], json!({"source": {"file": {"path": "/b"}}}));
        let mut newer = json!({"metadata": {"resourceVersion": "8"}, "spec": {"source": {}, "candidate": {}}});
        assert!(json_patch::patch(&mut newer, &json_patch_promotion("7")).is_err());
    }
}
