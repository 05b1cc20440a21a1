//! Tag polling: `--plugin oci://...:TAG` with `--oci-poll-interval` resolves
//! the tag again at that interval; a digest other than the one running is
//! pulled, verified and handed to the hot-swap path as a new version (the
//! trust policy, staging and rollback apply as to any other source). A tag
//! that cannot be resolved or pulled (registry down, tampered manifest, not
//! a plugin) is reported once per distinct failure and the running version
//! keeps serving; the tag is tried again at the next tick.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{Digest, OciError, Pulled, Puller, Reference};
use crate::hotswap::{Origin, Update};
use crate::metrics::Metrics;

/// One polled reference and the digest last handed on.
struct Polled {
    reference: Reference,
    /// `None` until a first version was handed on (a candidate, staged
    /// only once the running version serves).
    current: Option<Digest>,
    /// The last failure reported (so a long outage is one log line, not one a tick).
    failing: Option<String>,
}

/// Polls tagged references; references by digest never change and are left out.
pub struct OciWatch {
    puller: Arc<Puller>,
    polled: Vec<Polled>,
    /// Whether cosign signatures are fetched with each new version.
    signatures: bool,
    metrics: Arc<Metrics>,
}

impl OciWatch {
    /// `started`: each reference and the digest it started with (`None`:
    /// not loaded yet, handed on at the first poll).
    pub fn new(puller: Arc<Puller>, started: Vec<(Reference, Option<Digest>)>, signatures: bool, metrics: Arc<Metrics>) -> Self {
        let polled = started
            .into_iter()
            .filter(|(r, _)| r.digest.is_none())
            .map(|(reference, current)| Polled { reference, current, failing: None })
            .collect();
        Self { puller, polled, signatures, metrics }
    }

    /// Polls every `interval` until the receiver is dropped.
    pub async fn run(mut self, interval: Duration, tx: mpsc::Sender<Update>) {
        if self.polled.is_empty() {
            return;
        }
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await; // the first tick is now: the start-up pull was just made
        loop {
            tick.tick().await;
            for i in 0..self.polled.len() {
                let Some(update) = self.poll(i).await else { continue };
                if tx.send(update).await.is_err() {
                    return;
                }
            }
        }
    }

    async fn poll(&mut self, i: usize) -> Option<Update> {
        let puller = self.puller.clone();
        let p = &mut self.polled[i];
        let result = async {
            let digest = puller.resolve(&p.reference).await?;
            // After a failure the version is handed on again even when the
            // tag did not move: the reloader ignores what already runs, and
            // that clears the failure from the plugin's status.
            if p.current.as_ref() == Some(&digest) && p.failing.is_none() {
                return Ok(None);
            }
            let pulled = puller.pull_digest(&p.reference, &digest).await?;
            let evidence = if self.signatures { Some(puller.signatures(&p.reference, &digest).await?) } else { None };
            Ok::<_, OciError>(Some((digest, pulled, evidence)))
        }
        .await;
        let id = Origin::Oci(p.reference.clone()).id();
        match result {
            Ok(None) => {
                p.failing = None;
                None
            }
            Ok(Some((digest, pulled, cosign))) => {
                let from = p.current.as_ref().map_or_else(|| "nothing".to_string(), Digest::to_string);
                if p.current.as_ref() == Some(&digest) {
                    tracing::info!(plugin = %id, digest = %digest, "tag {} reachable again: handing its version on", p.reference);
                } else {
                    tracing::info!(plugin = %id, from = %from, to = %digest, "tag {} moved: pulled the new version", p.reference);
                }
                p.current = Some(digest);
                p.failing = None;
                Some(update(&p.reference, pulled, cosign))
            }
            Err(e) => {
                let why = crate::error_chain(&e);
                if p.failing.as_deref() != Some(why.as_str()) {
                    let running = p.current.as_ref().map_or_else(|| "(none yet)".to_string(), Digest::to_string);
                    let message = format!("cannot pull a new version of plugin {id}: {why}; the running version {running} keeps serving");
                    tracing::warn!(plugin = %id, reason = e.label(), "{message}");
                    self.metrics.plugin_swap(&id, "rejected");
                    // What a Plugin object mirroring this plugin shows and events.
                    self.metrics.activity.refused(&id, "PullFailed", &message);
                    p.failing = Some(why);
                }
                None
            }
        }
    }
}

/// The hot-swap update for a pulled version.
pub fn update(reference: &Reference, pulled: Pulled, cosign: Option<super::cosign::Evidence>) -> Update {
    Update { origin: Origin::Oci(reference.clone()), bytes: Some(pulled.component), signature: None, trust: None, cosign }
}
