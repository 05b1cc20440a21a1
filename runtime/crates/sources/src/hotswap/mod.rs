//! Hot swap: plugin bytes arrive from [`configmap`] watches or [`files`]
//! polled with `--watch`; each new version is compiled and checked off the
//! hot path (on the blocking pool) and handed to the manager, which swaps it
//! in atomically ([`crate::manager::Running::apply`]). A module that does not
//! load, or that the manager refuses (another plugin owns its parent kind, a
//! CRD that does not install), leaves the running version alone and is
//! reported: a log line, `plugin_swaps_total{result="rejected"}`, and a
//! Warning Event on the ConfigMap it came from. Every change is logged,
//! counted and evented with old → new version. A candidate (a key or file
//! ending in `.candidate`) is staged instead of swapped in: [`shadow`].
//!
//! Before anything is loaded, the [`trust`] policy admits the bytes (a
//! signature and digest pins, when asked for); after a swap, the
//! [`rollback`] watchdog watches the new version and swaps the previous one
//! back if it fails where the previous did not.
//!
//! A `Plugin` object (`crate::plugin_resource`) is one more source: its
//! updates carry [`Origin::Resource`] and the trust its spec asks for.

pub mod configmap;
pub mod files;
/// Plugins from OCI registries (the `operator-oci` crate), and the watch
/// that polls a tag for new digests.
pub mod oci {
    pub use operator_oci::*;

    pub mod watch;
}
pub mod rollback;
pub mod shadow;
pub mod trust;

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::mpsc;

use crate::events::{Recorder, Regarding};
use crate::manager::{Applied, Running};
use crate::metrics::Metrics;
use crate::sandbox::{LoadedPlugin, Sandbox};

/// Where a plugin's bytes come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    File(PathBuf),
    ConfigMap {
        namespace: String,
        name: String,
        uid: String,
        key: String,
    },
    /// A `Plugin` object (cluster-scoped): its `spec.source`, or its
    /// `spec.candidate` (staged beside the source's version, [`shadow`]).
    Resource {
        name: String,
        uid: String,
        candidate: bool,
        /// Where the signature of the bytes was looked for, for messages.
        signature_name: String,
    },
    /// A registry reference as given (`oci://REGISTRY/REPO:TAG`): the tag is
    /// the source, each digest it points to a version ([`oci`]).
    Oci(oci::Reference),
}

/// `apiVersion` of the `Plugin` resource (Events about one name it).
pub const PLUGIN_API_VERSION: &str = "plugins.operator-host.dev/v1alpha1";

impl Origin {
    /// The plugin id the manager runs it under: one id per source.
    pub fn id(&self) -> String {
        match self {
            Origin::File(path) => path.display().to_string(),
            Origin::ConfigMap { namespace, name, key, .. } => format!("configmap/{namespace}/{name}/{key}"),
            Origin::Resource { name, candidate: false, .. } => format!("plugin/{name}"),
            Origin::Resource { name, candidate: true, .. } => format!("plugin/{name}{}", shadow::CANDIDATE_SUFFIX),
            Origin::Oci(reference) => reference.to_string(),
        }
    }

    /// Where the signature of these bytes is looked for ([`trust`]).
    pub fn signature_name(&self) -> String {
        let sig = trust::SIGNATURE_SUFFIX;
        match self {
            Origin::File(path) => format!("{}{sig}", path.display()),
            Origin::ConfigMap { namespace, name, key, .. } => format!("key {key}{sig} in configmap {namespace}/{name}"),
            Origin::Resource { signature_name, .. } => signature_name.clone(),
            Origin::Oci(reference) => format!("a cosign signature of {reference} in its registry"),
        }
    }

    fn regarding(&self) -> Option<Regarding> {
        match self {
            Origin::File(_) | Origin::Oci(_) => None,
            Origin::ConfigMap { namespace, name, uid, .. } => Some(Regarding {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: namespace.clone(),
                name: name.clone(),
                uid: uid.clone(),
            }),
            Origin::Resource { name, uid, .. } => Some(Regarding {
                api_version: PLUGIN_API_VERSION.into(),
                kind: "Plugin".into(),
                namespace: String::new(),
                name: name.clone(),
                uid: uid.clone(),
            }),
        }
    }
}

/// A new version of a plugin (`bytes`), or its removal (`None`).
#[derive(Debug)]
pub struct Update {
    pub origin: Origin,
    pub bytes: Option<Vec<u8>>,
    /// The detached signature stored beside the bytes, if any ([`trust`]).
    pub signature: Option<Vec<u8>>,
    /// A policy the bytes must satisfy as well as the host's (a `Plugin`'s
    /// `spec.trust`): it can add requirements, never lift the host's.
    pub trust: Option<trust::Policy>,
    /// The cosign signatures found for a registry version's manifest digest
    /// (`None` for other sources, or when no cosign key is configured).
    pub cosign: Option<oci::cosign::Evidence>,
}

/// Called after a plugin version is running (e.g. to register embedded admission).
pub type OnApplied = Arc<dyn Fn(&LoadedPlugin) + Send + Sync>;

/// Applies updates one at a time, in arrival order.
pub struct Reloader {
    pub sandbox: Sandbox,
    pub manager: Running,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub on_applied: Option<OnApplied>,
    /// Where candidates are staged; `None` refuses them.
    pub shadows: Option<shadow::Shadows>,
    /// Which bytes may run (default: any).
    pub trust: trust::Policy,
    /// Watches each swapped-in version and swaps back a failing one.
    pub rollback: rollback::Watchdog,
}

/// `name version (sha256:abcdef123456)`.
pub fn describe(p: &LoadedPlugin) -> String {
    let digest = p.info().digest.trim_start_matches("sha256:");
    format!("{} {} (sha256:{})", p.name(), p.manifest().version, &digest[..digest.len().min(12)])
}

/// The most a gzipped plugin may inflate to (a bomb stops here): as large
/// as a plugin pulled from a registry may be.
const MAX_INFLATED: u64 = oci::MAX_LAYER_BYTES;

/// A plugin may be stored gzipped (`.wasm.gz`): a ConfigMap holds at most
/// 1 MiB on a real API server. Bytes with the gzip magic are inflated, up to
/// `MAX_INFLATED`; anything else is returned as it is.
pub fn gunzip_if_gzipped(bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    use std::io::Read;
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(bytes);
    }
    let mut out = Vec::new();
    let mut reader = flate2::read::GzDecoder::new(bytes.as_slice()).take(MAX_INFLATED + 1);
    reader.read_to_end(&mut out).map_err(|e| format!("cannot gunzip the plugin: {e}"))?;
    if out.len() as u64 > MAX_INFLATED {
        return Err(format!("the gzipped plugin inflates to more than {} MiB", MAX_INFLATED >> 20));
    }
    Ok(out)
}

impl Reloader {
    /// Runs until every sender of `updates` is gone. Rollbacks are decided
    /// here, between updates, so that one never races a newer version.
    pub async fn run(self, mut updates: mpsc::Receiver<Update>) {
        let mut judge = tokio::time::interval(self.rollback.config().tick());
        judge.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                update = updates.recv() => match update {
                    Some(update) => self.apply(update).await,
                    None => return,
                },
                _ = judge.tick() => {
                    for decision in self.rollback.judge(&self.metrics.outcomes, tokio::time::Instant::now()) {
                        self.roll_back(decision).await;
                    }
                }
            }
        }
    }

    /// Applies one update; never fails (a refusal is reported).
    pub async fn apply(&self, update: Update) {
        let id = update.origin.id();
        let Some(bytes) = update.bytes else {
            if shadow::active_id(&id).is_some() {
                return self.unstage(&update.origin).await;
            }
            self.rollback.forget(&id);
            self.metrics.activity.accepted(&id);
            if let Some(old) = self.manager.remove(&id).await {
                let message = format!("plugin {} stopped: its source {id} is gone", describe(&old));
                tracing::warn!(plugin = %id, "{message}");
                self.metrics.plugin_swap(&id, "removed");
                self.event(&update.origin, "Normal", "PluginRemoved", &message).await;
            }
            return;
        };
        let current = self.manager.plugin(&id);
        if let Some(own) = &update.trust
            && let Err(e) = own.admit_with(bytes.clone(), update.signature.as_deref(), update.cosign.as_ref(), &update.origin.signature_name())
        {
            return match e {
                trust::NotAdmitted::Untrusted(why) => self.refuse_untrusted(&update.origin, current.as_ref(), why).await,
                trust::NotAdmitted::Unreadable(why) => self.reject(&update.origin, current.as_ref(), why).await,
            };
        }
        let (bytes, digest) = match self.trust.admit_with(bytes, update.signature.as_deref(), update.cosign.as_ref(), &update.origin.signature_name())
        {
            Ok(admitted) => (admitted.component, admitted.digest),
            Err(trust::NotAdmitted::Untrusted(why)) => return self.refuse_untrusted(&update.origin, current.as_ref(), why).await,
            Err(trust::NotAdmitted::Unreadable(why)) => return self.reject(&update.origin, current.as_ref(), why).await,
        };
        if self.rollback.blocks(&id, &digest) {
            tracing::debug!(plugin = %id, "the source still holds the version rolled back; waiting for other bytes");
            return;
        }
        if current.as_ref().is_some_and(|c| c.info().digest == digest) {
            // The source changed elsewhere (another key, a label), or went
            // back to the version that runs after offering a refused one.
            self.metrics.activity.accepted(&id);
            return;
        }
        if self.shadows.as_ref().and_then(|s| s.staged_digest(&id)).is_some_and(|d| d == digest) {
            return; // this candidate is staged already
        }
        let sandbox = self.sandbox.clone();
        let label = id.clone();
        let started = std::time::Instant::now();
        let loaded = tokio::task::spawn_blocking(move || sandbox.load(&label, &bytes)).await;
        let load_ms = started.elapsed().as_secs_f64() * 1e3;
        let plugin = match loaded {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                return self.reject(&update.origin, current.as_ref(), crate::error_chain(&e)).await;
            }
            Err(e) => {
                return self.reject(&update.origin, current.as_ref(), format!("loading panicked: {e}")).await;
            }
        };
        if let Some(active) = shadow::active_id(&id) {
            return self.stage(&update.origin, active, plugin).await;
        }
        match self.manager.apply(&id, plugin.clone()).await {
            Ok(applied) => {
                self.metrics.activity.accepted(&id);
                if let Some(f) = &self.on_applied {
                    f(&plugin);
                }
                if let Applied::Swapped { old } | Applied::Restarted { old } = &applied {
                    self.rollback.swapped(&self.metrics.outcomes, update.origin.clone(), old.clone(), plugin.clone());
                }
                let (result, reason, message) = match &applied {
                    Applied::Started => ("started", "PluginLoaded", format!("plugin {} started from {id}", describe(&plugin))),
                    Applied::Swapped { old } => {
                        ("swapped", "PluginSwapped", format!("plugin {} → {} (same kinds: swapped in place)", describe(old), describe(&plugin)))
                    }
                    Applied::Restarted { old } => {
                        ("restarted", "PluginSwapped", format!("plugin {} → {} (kinds changed: watches restarted)", describe(old), describe(&plugin)))
                    }
                };
                // How long loading (mostly compiling) and the whole swap took.
                let total_ms = started.elapsed().as_secs_f64() * 1e3;
                tracing::info!(plugin = %id, load_ms = format!("{load_ms:.1}"), swap_ms = format!("{total_ms:.1}"), "{message}");
                self.metrics.plugin_swap(&id, result);
                self.event(&update.origin, "Normal", reason, &message).await;
                if let Some(promoted) = self.shadows.as_ref().and_then(|s| s.went_live(&id, &plugin)) {
                    let message = format!("candidate {} promoted to {id} after {}", describe(&plugin), promoted.tally());
                    tracing::info!(plugin = %id, "{message}");
                    self.event(&update.origin, "Normal", "PluginPromoted", &message).await;
                }
                if let Some((origin, candidate)) = self.shadows.as_ref().and_then(|s| s.take_waiting(&id)) {
                    self.stage(&origin, &id, candidate).await;
                }
            }
            Err(e) => self.reject(&update.origin, current.as_ref(), crate::error_chain(&e)).await,
        }
    }

    /// Stages `candidate` beside the plugin running as `active_id`.
    async fn stage(&self, origin: &Origin, active_id: &str, candidate: LoadedPlugin) {
        let Some(shadows) = &self.shadows else {
            return self.reject(origin, None, "staging candidates is not enabled in this host".into()).await;
        };
        let Some(active) = self.manager.plugin(active_id) else {
            // Staged once a version runs there ([`Self::apply`]).
            let message = format!("candidate {} waits for a version of {active_id} to run, to be staged beside it", describe(&candidate));
            tracing::info!(plugin = %origin.id(), "{message}");
            shadows.wait_for(active_id, origin.clone(), candidate);
            self.metrics.activity.accepted(&origin.id());
            return self.event(origin, "Normal", "PluginWaiting", &message).await;
        };
        match shadows.stage(active_id, &active, origin.clone(), candidate.clone()) {
            Ok(s) => {
                let id = origin.id();
                let how = match origin {
                    Origin::ConfigMap { namespace, name, key, .. } => format!(
                        "kubectl -n {namespace} annotate configmap {name} --overwrite {}={}@sha256:{}",
                        shadow::PROMOTE_ANNOTATION,
                        shadow::active_id(key).unwrap_or(key),
                        candidate.info().digest
                    ),
                    Origin::File(path) => format!("mv {} {active_id}", path.display()),
                    Origin::Resource { name, .. } => {
                        format!(
                            "kubectl patch plugin {name} --type json -p '[{{\"op\":\"move\",\"from\":\"/spec/candidate\",\"path\":\"/spec/source\"}}]'"
                        )
                    }
                    Origin::Oci(reference) => oci::promote_command(reference, active_id, &candidate.info().digest),
                };
                let message = format!(
                    "candidate {} staged beside {} ({active_id}): every reconcile now also runs on it, its writes discarded; promote now with `{how}`",
                    describe(&candidate),
                    describe(&active)
                );
                tracing::info!(plugin = %id, "{message}");
                drop(s);
                self.metrics.activity.accepted(&id);
                self.metrics.plugin_swap(&id, "staged");
                self.event(origin, "Normal", "PluginStaged", &message).await;
            }
            Err(why) => self.reject(origin, Some(&active), why).await,
        }
    }

    async fn unstage(&self, origin: &Origin) {
        let id = origin.id();
        if let Some(s) = self.shadows.as_ref().and_then(|s| s.unstage(&id)) {
            let message = format!("candidate {} unstaged (its source {id} is gone) after {}", describe(&s.candidate), s.tally());
            tracing::info!(plugin = %id, "{message}");
            self.event(origin, "Normal", "PluginUnstaged", &message).await;
        }
    }

    async fn reject(&self, origin: &Origin, current: Option<&LoadedPlugin>, why: String) {
        let id = origin.id();
        let kept = match current {
            Some(c) => format!("; still running {}", describe(c)),
            None => String::new(),
        };
        let message = format!("new version of plugin {id} refused: {why}{kept}");
        tracing::warn!(plugin = %id, "{message}");
        self.metrics.activity.refused(&id, "PluginRejected", &message);
        self.metrics.plugin_swap(&id, "rejected");
        self.event(origin, "Warning", "PluginRejected", &message).await;
    }

    async fn refuse_untrusted(&self, origin: &Origin, current: Option<&LoadedPlugin>, why: trust::Refusal) {
        let id = origin.id();
        let kept = match current {
            Some(c) => format!("; still running {}", describe(c)),
            None => String::new(),
        };
        let message = format!("new version of plugin {id} refused: untrusted: {why}{kept}");
        tracing::warn!(plugin = %id, "{message}");
        self.metrics.activity.refused(&id, "PluginUntrusted", &message);
        self.metrics.plugin_trust_refusal(&id, why.label());
        self.metrics.plugin_swap(&id, "rejected");
        self.event(origin, "Warning", "PluginUntrusted", &message).await;
    }

    /// Swaps the previous version back in place of a failing one.
    async fn roll_back(&self, decision: rollback::RollBack) {
        let id = decision.origin.id();
        let rollback::RollBack { bad, previous, tally, baseline, after, .. } = decision;
        let threshold = self.rollback.config().threshold;
        let why = format!(
            "{tally} in the {:.1}s after the swap (more than {:.0}%), where the previous version's {baseline}",
            after.as_secs_f64(),
            threshold * 100.0
        );
        match self.manager.apply(&id, previous.clone()).await {
            Ok(_) => {
                if let Some(f) = &self.on_applied {
                    f(&previous);
                }
                let message = format!(
                    "plugin {} rolled back to {}: {why}; these bytes are not loaded again until the source changes",
                    describe(&bad),
                    describe(&previous)
                );
                tracing::warn!(plugin = %id, "{message}");
                self.metrics.plugin_rollback(&id, tally.main_kind());
                self.metrics.activity.rolled_back(&id, &bad.info().digest, &previous.info().digest, tally.main_kind());
                self.metrics.plugin_swap(&id, "rolled_back");
                self.event(&decision.origin, "Warning", "PluginRolledBack", &message).await;
            }
            Err(e) => {
                let message = format!(
                    "plugin {} should be rolled back to {} ({why}) but cannot be: {}",
                    describe(&bad),
                    describe(&previous),
                    crate::error_chain(&e)
                );
                tracing::error!(plugin = %id, "{message}");
                self.event(&decision.origin, "Warning", "PluginRollbackFailed", &message).await;
            }
        }
    }

    async fn event(&self, origin: &Origin, type_: &str, reason: &str, message: &str) {
        if let Some(regarding) = origin.regarding()
            && let Err(e) = self.recorder.publish(&regarding, type_, reason, message).await
        {
            tracing::warn!(error = %crate::error_chain(&e), "could not record event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gzipped_plugins_are_inflated_and_plain_ones_kept() {
        assert_eq!(gunzip_if_gzipped(b"\0asm plain".to_vec()).unwrap(), b"\0asm plain");
        assert_eq!(gunzip_if_gzipped(gzip(b"\0asm zipped")).unwrap(), b"\0asm zipped");
        let mut cut = gzip(&[7u8; 4096]);
        cut.truncate(cut.len() / 2);
        assert!(gunzip_if_gzipped(cut).unwrap_err().contains("cannot gunzip"));
    }

    #[test]
    fn a_gzip_bomb_is_refused() {
        let bomb = gzip(&vec![0u8; (MAX_INFLATED + 1) as usize]);
        assert!(bomb.len() < 1 << 20);
        assert!(gunzip_if_gzipped(bomb).unwrap_err().contains("more than 64 MiB"));
    }
}
