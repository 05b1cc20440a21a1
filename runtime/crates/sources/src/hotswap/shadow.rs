//! Shadow runs: a candidate version is staged beside the running one instead
//! of swapped in, and every reconcile of the running version is run again on
//! the candidate with the same inputs; the two answers are compared with
//! [`crate::record::compare`]. The candidate's writes are never executed.
//!
//! Staging (see docs/operations.md, "Upgrading a plugin"):
//! - ConfigMap: the candidate's bytes under `<key>.candidate` beside `<key>`.
//! - Files (`--plugin FILE --watch`): `FILE.candidate` beside `FILE`.
//!
//! Promotion is an edit of the source, after which the swap follows through
//! the ordinary hot-swap path (so it is loaded, checked and reported like any
//! other version):
//! - ConfigMap: the annotation `operator-host.dev/promote: <key>[@sha256:<digest prefix>]`
//!   (comma-separated for several) makes `<key>` run the bytes staged under
//!   `<key>.candidate`. Written by an operator with `kubectl annotate`
//!   (promotion at once), or by the host after `promote_after` agreeing
//!   reconciles. The host always writes the digest, so a stale annotation
//!   never promotes a later candidate it did not shadow.
//! - Files: `FILE.candidate` is renamed over `FILE` (by the host, or by `mv`).
//! - A `Plugin` object: `spec.candidate` moved to `spec.source` (by the
//!   host under `spec.promotion`, or by `kubectl patch`), see
//!   `crate::plugin_resource`.
//!
//! A candidate that differs or fails even once is never promoted
//! automatically: it stays staged, reported, until it is replaced, removed
//! or promoted by hand.
//!
//! Off the hot path: the candidate runs in a spawned task after the running
//! version has answered, on the blocking pool, at most `concurrency` calls at
//! once; a reconcile that finds every slot taken is not shadowed (counted as
//! `skipped` in the log summary), so shadowing never queues without bound
//! nor takes sandbox call slots from the running version.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use operator_plugin_sdk::{Action, GroupVersionKind};

use super::{Origin, describe};
use crate::controller::hook::{CallInput, CallObserver, Watcher};
use crate::events::Recorder;
use crate::metrics::Metrics;
use crate::record::compare::{self, Verdict};
use crate::record::{Answer, Inputs};
use crate::sandbox::{CallError, LoadedPlugin};

/// A key or file name ending so holds a candidate for the key or file without it.
pub const CANDIDATE_SUFFIX: &str = ".candidate";
/// The ConfigMap annotation that promotes staged candidates.
pub const PROMOTE_ANNOTATION: &str = "operator-host.dev/promote";

/// The plugin id a candidate id stages for (`None`: not a candidate).
pub fn active_id(id: &str) -> Option<&str> {
    id.strip_suffix(CANDIDATE_SUFFIX).filter(|a| !a.is_empty() && !a.ends_with('/'))
}

/// `FILE.candidate`.
pub fn candidate_path(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(CANDIDATE_SUFFIX);
    PathBuf::from(s)
}

/// Hex SHA-256 of the (inflated) plugin bytes, as [`crate::sandbox::PluginInfo::digest`].
fn digest_of(stored: &[u8]) -> Option<String> {
    super::gunzip_if_gzipped(stored.to_vec()).ok().map(|b| crate::sandbox::cache::digest(&b))
}

/// Applies the promote annotation to a ConfigMap's plugins (`key` → bytes):
/// each promoted `<key>` gets the bytes of `<key>.candidate`, which is no
/// longer staged. An entry naming a digest promotes only a candidate with
/// that digest (prefix); others stay staged.
pub fn promote_by_annotation(annotations: Option<&BTreeMap<String, String>>, data: &mut BTreeMap<String, Vec<u8>>) {
    let Some(value) = annotations.and_then(|a| a.get(PROMOTE_ANNOTATION)) else { return };
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (key, digest) = entry.split_once('@').map_or((entry, None), |(k, d)| (k, Some(d)));
        let candidate_key = format!("{key}{CANDIDATE_SUFFIX}");
        let Some(bytes) = data.get(&candidate_key) else { continue };
        if let Some(d) = digest
            && !digest_of(bytes).is_some_and(|actual| actual.starts_with(d.trim_start_matches("sha256:")))
        {
            continue;
        }
        let bytes = data.remove(&candidate_key).expect("present");
        data.insert(key.to_string(), bytes);
        // The candidate's signature (`<key>.candidate.sig`) goes with it.
        let sig = super::trust::SIGNATURE_SUFFIX;
        if let Some(signature) = data.remove(&format!("{candidate_key}{sig}")) {
            data.insert(format!("{key}{sig}"), signature);
        }
    }
}

/// Tunables of shadow runs.
#[derive(Clone, Debug)]
pub struct ShadowConfig {
    /// Agreeing reconciles, with no difference and no error, after which a
    /// candidate is promoted; 0 = never automatically. Default 100: with no
    /// difference in 100 samples, the rate of differences is below 3% with
    /// 95% confidence ("rule of three"), and at the default 10 min resync a
    /// few dozen parents get there within the hour.
    pub promote_after: u64,
    /// Candidate calls at once (default 2: a candidate never takes more than
    /// two of the blocking pool's threads from the running version).
    pub concurrency: usize,
    /// Differences or errors reported as Events per candidate (default 3);
    /// later ones are counted and summarised in the log only.
    pub events: u64,
}

impl Default for ShadowConfig {
    fn default() -> Self {
        Self { promote_after: 100, concurrency: 2, events: 3 }
    }
}

/// What a candidate did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub agree: u64,
    pub differ: u64,
    pub errors: u64,
    /// Reconciles not shadowed because every slot was busy.
    pub skipped: u64,
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.agree + self.differ + self.errors;
        write!(f, "{n} reconciles, {} agree, {} differ, {} errors ({} not shadowed: busy)", self.agree, self.differ, self.errors, self.skipped)
    }
}

/// Everything shadow runs need, shared by the reloader (staging) and the
/// controllers' [`Tap`](crate::record::Tap) (observing). Cheap to clone.
#[derive(Clone)]
pub struct Shadows {
    inner: Arc<Shared>,
}

struct Shared {
    config: ShadowConfig,
    metrics: Arc<Metrics>,
    client: kube::Client,
    events: Recorder,
    /// By the parent kind of the plugin shadowed (one plugin per parent kind).
    staged: Mutex<HashMap<GroupVersionKind, Arc<Shadow>>>,
    /// Candidates that arrived before anything ran as the id they shadow,
    /// by that id: staged once it runs. A Plugin's source and candidate are
    /// watched apart, so either may arrive first.
    waiting: Mutex<HashMap<String, (Origin, LoadedPlugin)>>,
}

/// One staged candidate.
pub struct Shadow {
    shared: Arc<Shared>,
    /// The id of the running plugin this candidate shadows.
    pub active_id: String,
    pub candidate: LoadedPlugin,
    origin: Origin,
    slots: Arc<tokio::sync::Semaphore>,
    tally: Mutex<Tally>,
    events_sent: AtomicU64,
    /// Set once a difference or error was seen: never promoted automatically.
    blocked: AtomicBool,
    /// Set once promotion was asked for (or the candidate unstaged).
    done: AtomicBool,
}

impl Shadows {
    pub fn new(config: ShadowConfig, metrics: Arc<Metrics>, client: kube::Client, clock: crate::clock::SharedClock) -> Self {
        let events = Recorder::new(client.clone(), "hotswap", clock);
        Self { inner: Arc::new(Shared { config, metrics, client, events, staged: Mutex::new(HashMap::new()), waiting: Mutex::new(HashMap::new()) }) }
    }

    /// The candidate shadowing `active` (by its parent kind), unless it is
    /// `active` itself (promoted, the swap under way).
    pub fn for_active(&self, active: &LoadedPlugin) -> Option<Arc<Shadow>> {
        let staged = self.inner.staged.lock().unwrap();
        let s = staged.get(&active.manifest().parent)?;
        (!s.done.load(Ordering::Relaxed) && s.candidate.info().digest != active.info().digest).then(|| s.clone())
    }

    /// What the candidate staged for `active_id` did so far.
    pub fn tally(&self, active_id: &str) -> Option<Tally> {
        self.inner.staged.lock().unwrap().values().find(|s| s.active_id == active_id).map(|s| *s.tally.lock().unwrap())
    }

    /// The candidate staged for `active_id` and what it did so far.
    pub fn staged_for(&self, active_id: &str) -> Option<(LoadedPlugin, Tally)> {
        let staged = self.inner.staged.lock().unwrap();
        staged.values().find(|s| s.active_id == active_id && !s.done.load(Ordering::Relaxed)).map(|s| (s.candidate.clone(), *s.tally.lock().unwrap()))
    }

    /// Stages `candidate` (from `origin`) beside `active` (running as
    /// `active_id`); replaces a candidate staged before for it.
    pub fn stage(&self, active_id: &str, active: &LoadedPlugin, origin: Origin, candidate: LoadedPlugin) -> Result<Arc<Shadow>, String> {
        if active.manifest().parent != candidate.manifest().parent {
            let kind = |p: &LoadedPlugin| format!("{}/{}", p.manifest().parent.api_version(), p.manifest().parent.kind);
            return Err(format!(
                "the candidate reconciles {}, the running version {}: a shadow run needs the same parent kind",
                kind(&candidate),
                kind(active)
            ));
        }
        let shadow = Arc::new(Shadow {
            shared: self.inner.clone(),
            active_id: active_id.into(),
            candidate,
            origin,
            slots: Arc::new(tokio::sync::Semaphore::new(self.inner.config.concurrency.max(1))),
            tally: Mutex::default(),
            events_sent: AtomicU64::new(0),
            blocked: AtomicBool::new(false),
            done: AtomicBool::new(false),
        });
        if let Some(old) = self.inner.staged.lock().unwrap().insert(active.manifest().parent.clone(), shadow.clone()) {
            old.done.store(true, Ordering::Relaxed);
        }
        Ok(shadow)
    }

    /// Holds `candidate` (from `origin`) until a version runs as `active_id`;
    /// replaces one held before for it.
    pub fn wait_for(&self, active_id: &str, origin: Origin, candidate: LoadedPlugin) {
        self.inner.waiting.lock().unwrap().insert(active_id.into(), (origin, candidate));
    }

    /// The candidate held for `active_id`, taken (to be staged now that it runs).
    pub fn take_waiting(&self, active_id: &str) -> Option<(Origin, LoadedPlugin)> {
        self.inner.waiting.lock().unwrap().remove(active_id)
    }

    /// The digest of the candidate staged from `candidate_id`, if any.
    pub fn staged_digest(&self, candidate_id: &str) -> Option<String> {
        let staged = self.inner.staged.lock().unwrap();
        staged.values().find(|s| s.origin.id() == candidate_id).map(|s| s.candidate.info().digest.clone())
    }

    /// Unstages the candidate that came from `candidate_id`; returns it.
    pub fn unstage(&self, candidate_id: &str) -> Option<Arc<Shadow>> {
        self.inner.waiting.lock().unwrap().retain(|_, (origin, _)| origin.id() != candidate_id);
        let mut staged = self.inner.staged.lock().unwrap();
        let kind = staged.iter().find(|(_, s)| s.origin.id() == candidate_id).map(|(k, _)| k.clone())?;
        let s = staged.remove(&kind)?;
        s.done.store(true, Ordering::Relaxed);
        Some(s)
    }

    /// After `plugin` went live as `active_id`: the candidate staged for it
    /// with the same bytes was promoted and is unstaged; returned.
    pub fn went_live(&self, active_id: &str, plugin: &LoadedPlugin) -> Option<Arc<Shadow>> {
        let mut staged = self.inner.staged.lock().unwrap();
        let kind =
            staged.iter().find(|(_, s)| s.active_id == active_id && s.candidate.info().digest == plugin.info().digest).map(|(k, _)| k.clone())?;
        let s = staged.remove(&kind)?;
        s.done.store(true, Ordering::Relaxed);
        Some(s)
    }
}

impl Shadow {
    pub fn tally(&self) -> Tally {
        *self.tally.lock().unwrap()
    }

    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Runs the candidate on `inputs` in the background and compares its
    /// answer with `active`'s. Returns at once.
    pub fn observe(self: Arc<Self>, inputs: Inputs, active: Answer) {
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            self.tally.lock().unwrap().skipped += 1;
            return;
        };
        tokio::spawn(async move {
            let candidate = self.candidate.clone();
            let run = inputs.clone();
            let result =
                tokio::task::spawn_blocking(move || candidate.reconcile_related_blocking(&run.parent, &run.children, &run.related, run.now)).await;
            drop(slot);
            let Ok(result) = result else { return }; // the runtime is shutting down
            let verdict = compare::verdict(&active, &Answer::of(&result));
            self.count(&inputs, verdict).await;
        });
    }

    async fn count(self: &Arc<Self>, inputs: &Inputs, verdict: Verdict) {
        if self.done.load(Ordering::Relaxed) {
            return;
        }
        self.shared.metrics.plugin_shadow_reconcile(&self.active_id, verdict.label());
        let tally = {
            let mut t = self.tally.lock().unwrap();
            match &verdict {
                Verdict::Agree => t.agree += 1,
                Verdict::Differ(_) => t.differ += 1,
                Verdict::Error(_) => t.errors += 1,
            }
            *t
        };
        let seen = tally.agree + tally.differ + tally.errors;
        let name = describe(&self.candidate);
        let parent = inputs.parent_name();
        let problem = match &verdict {
            Verdict::Agree => None,
            Verdict::Differ(d) => {
                let more = if d.len() > 1 { format!(" (+{} more)", d.len() - 1) } else { String::new() };
                Some(("ShadowDiffers", format!("candidate {name} differs on {parent}: {}{more}; not promoted automatically", d[0])))
            }
            Verdict::Error(f) => Some(("ShadowFailed", format!("candidate {name} failed on {parent}: {}; not promoted automatically", f.message))),
        };
        if let Some((reason, message)) = problem {
            self.blocked.store(true, Ordering::Relaxed);
            tracing::warn!(plugin = %self.active_id, %tally, "{message}");
            // Rate limit: the first few go to the ConfigMap, the rest to the log.
            if self.events_sent.fetch_add(1, Ordering::Relaxed) < self.shared.config.events {
                self.event("Warning", reason, &message).await;
            }
            return;
        }
        if seen % 100 == 0 {
            tracing::info!(plugin = %self.active_id, candidate = %name, "shadow run: {tally}");
        }
        // A Plugin object's candidate is promoted by its own `spec.promotion`
        // (crate::plugin_resource), from the tally the status page shows.
        let promote_after = if matches!(self.origin, Origin::Resource { .. }) { 0 } else { self.shared.config.promote_after };
        if promote_after > 0 && tally.agree >= promote_after && !self.blocked.load(Ordering::Relaxed) && !self.done.swap(true, Ordering::Relaxed) {
            self.promote(tally).await;
        }
    }

    /// Asks the source to run the candidate (see the module docs).
    async fn promote(&self, tally: Tally) {
        let name = describe(&self.candidate);
        let result = match &self.origin {
            Origin::ConfigMap { namespace, name: cm, key, .. } => {
                let active_key = active_id(key).unwrap_or(key);
                self.annotate_promotion(namespace, cm, active_key).await
            }
            Origin::File(candidate) => {
                let active = PathBuf::from(&self.active_id);
                std::fs::rename(candidate, &active).map_err(|e| format!("cannot rename {} to {}: {e}", candidate.display(), active.display()))
            }
            Origin::Resource { name, .. } => Err(format!("plugin {name} is promoted by its spec.promotion, not by the shadow run")),
            // The host does not write to registries: the operator moves the tag.
            Origin::Oci(reference) => Err(format!(
                "a registry tag is moved by its owner: `{}`",
                super::oci::promote_command(reference, &self.active_id, &self.candidate.info().digest)
            )),
        };
        match result {
            Ok(()) => {
                let message = format!("candidate {name} agreed on all of {tally}; promoting it to {}", self.active_id);
                tracing::info!(plugin = %self.active_id, "{message}");
                self.event("Normal", "ShadowPromoting", &message).await;
            }
            Err(why) => {
                let message = format!("candidate {name} agreed on all of {tally} but cannot be promoted: {why}");
                tracing::warn!(plugin = %self.active_id, "{message}");
                self.event("Warning", "ShadowPromotionFailed", &message).await;
            }
        }
    }

    /// Adds `<key>@<digest>` to the ConfigMap's promote annotation.
    async fn annotate_promotion(&self, namespace: &str, name: &str, key: &str) -> Result<(), String> {
        let api: Api<ConfigMap> = Api::namespaced(self.shared.client.clone(), namespace);
        let entry = format!("{key}@sha256:{}", self.candidate.info().digest);
        let mut last = String::new();
        for _ in 0..3 {
            let cm = api.get(name).await.map_err(|e| crate::error_chain(&e))?;
            let current = cm.metadata.annotations.as_ref().and_then(|a| a.get(PROMOTE_ANNOTATION)).cloned().unwrap_or_default();
            let mut entries: Vec<&str> = current.split(',').map(str::trim).filter(|e| !e.is_empty() && e.split('@').next() != Some(key)).collect();
            entries.push(&entry);
            let patch = serde_json::json!({"metadata": {
                "resourceVersion": cm.metadata.resource_version,
                "annotations": {PROMOTE_ANNOTATION: entries.join(",")},
            }});
            match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => return Ok(()),
                Err(e) if crate::api_error::ApiErrorClass::of(&e) == crate::api_error::ApiErrorClass::Conflict => last = crate::error_chain(&e),
                Err(e) => return Err(crate::error_chain(&e)),
            }
        }
        Err(last)
    }

    async fn event(&self, type_: &str, reason: &str, message: &str) {
        if let Some(regarding) = self.origin.regarding()
            && let Err(e) = self.shared.events.publish(&regarding, type_, reason, message).await
        {
            tracing::warn!(error = %crate::error_chain(&e), "could not record event");
        }
    }
}

impl Shadows {
    /// The observer that runs every call of a plugin with a staged candidate
    /// on the candidate too, for the controllers' hook
    /// ([`CallHook::observed_by`](crate::controller::hook::CallHook::observed_by)).
    pub fn observer(&self) -> Arc<dyn CallObserver> {
        Arc::new(Shadowing(self.clone()))
    }
}

/// Runs every call on the candidate staged for the plugin's parent kind.
struct Shadowing(Shadows);

impl CallObserver for Shadowing {
    fn watch(&self, plugin: &LoadedPlugin) -> Option<Watcher> {
        let shadow = self.0.for_active(plugin)?;
        Some(Box::new(move |input: &CallInput, result: &Result<Vec<Action>, CallError>| shadow.observe(Inputs::of(input), Answer::of(result))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_ids_name_the_plugin_they_stage_for() {
        assert_eq!(active_id("configmap/ns/plugins/w.wasm.candidate"), Some("configmap/ns/plugins/w.wasm"));
        assert_eq!(active_id("/p/w.wasm.candidate"), Some("/p/w.wasm"));
        assert_eq!(active_id("configmap/ns/plugins/w.wasm"), None);
        assert_eq!(active_id(".candidate"), None);
        assert_eq!(candidate_path(Path::new("/p/w.wasm")), PathBuf::from("/p/w.wasm.candidate"));
    }

    #[test]
    fn the_promote_annotation_moves_the_candidate_in_only_for_a_matching_digest() {
        let data = || BTreeMap::from([("a.wasm".to_string(), b"old".to_vec()), ("a.wasm.candidate".to_string(), b"new".to_vec())]);
        let digest = crate::sandbox::cache::digest(b"new");
        let annotate = |v: &str| Some(BTreeMap::from([(PROMOTE_ANNOTATION.to_string(), v.to_string())]));

        let mut d = data();
        promote_by_annotation(None, &mut d);
        assert_eq!(d, data(), "no annotation: staged");
        for value in ["a.wasm", &format!("a.wasm@sha256:{digest}"), &format!("other.wasm, a.wasm@{}", &digest[..12])] {
            let mut d = data();
            promote_by_annotation(annotate(value).as_ref(), &mut d);
            assert_eq!(d, BTreeMap::from([("a.wasm".to_string(), b"new".to_vec())]), "{value}");
        }
        let mut d = data();
        promote_by_annotation(annotate("a.wasm@sha256:0000").as_ref(), &mut d);
        assert_eq!(d, data(), "another digest: still staged");
    }
}
