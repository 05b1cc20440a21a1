//! A `Plugin`'s sources as running tasks: each checked source (the spec's
//! `source`, its `candidate`) becomes one task that sends the reloader an
//! [`Update`] per new version, under the Plugin's id, with the trust its
//! spec requires. The ConfigMap and file watches are the hot-swap ones
//! ([`configmap::watch`], [`files::FileWatch`]); OCI goes through the
//! [`OciSource`] seam. What keeps a source from giving bytes (no such key,
//! an unreadable file, no OCI puller, a failed pull) is kept in [`Problems`]
//! for the status; the version that runs, if any, keeps running.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::spec::Checked;
use crate::hotswap::configmap::{self, Selection};
use crate::hotswap::oci::cosign::Evidence;
use crate::hotswap::trust::{self, Policy};
use crate::hotswap::{Origin, Update, files};

/// What an OCI source asks the puller for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciRequest {
    /// `REGISTRY/REPO:TAG` or `REGISTRY/REPO@sha256:DIGEST`, no `oci://`.
    pub reference: String,
    /// cosign public keys (PEM) the manifest digest must be signed with;
    /// empty: no cosign signature is required.
    pub cosign_keys: Vec<String>,
}

/// A pulled, verified artifact.
#[derive(Clone, Debug)]
pub struct Pulled {
    /// The manifest digest (`sha256:<hex>`) the reference resolved to.
    pub digest: String,
    /// The Wasm component (or its gzip), as the layer holds it.
    pub bytes: Vec<u8>,
    /// The cosign signatures found for `digest`, when the host's own policy
    /// names cosign keys (`--cosign-key`): handed to the reloader with the
    /// bytes, so that policy admits a version signed with one of its keys.
    pub cosign: Option<Evidence>,
}

/// The seam an OCI client plugs into: resolve `request.reference` to a
/// manifest digest, check the cosign signature when keys are given, and
/// return the component's bytes (with the signatures found, when the host's
/// policy wants them: [`Pulled::cosign`]). Errors are messages for the status
/// (`lastError`) and are retried. Called again at `pollInterval` for a tag;
/// the reloader ignores bytes it already runs, so returning the same
/// artifact again is harmless.
#[async_trait::async_trait]
pub trait OciSource: Send + Sync {
    async fn pull(&self, request: &OciRequest) -> Result<Pulled, String>;
}

/// Why a source gives no bytes now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// `SourceUnavailable`, `OciUnavailable` or `PullFailed`.
    pub reason: &'static str,
    pub message: String,
}

/// What the sources report by plugin id, shared with the status writer:
/// their problems, and the component digest each sent last (so the status
/// can tell a version still loading from the one that serves).
#[derive(Clone, Default)]
pub struct Problems(Arc<Mutex<Reports>>);

#[derive(Default)]
struct Reports {
    problems: HashMap<String, Problem>,
    sent: HashMap<String, String>,
}

impl Problems {
    pub fn set(&self, id: &str, reason: &'static str, message: String) {
        tracing::warn!(plugin = %id, reason, "{message}");
        self.0.lock().unwrap().problems.insert(id.into(), Problem { reason, message });
    }

    pub fn clear(&self, id: &str) {
        self.0.lock().unwrap().problems.remove(id);
    }

    pub fn get(&self, id: &str) -> Option<Problem> {
        self.0.lock().unwrap().problems.get(id).cloned()
    }

    /// `bytes` (as stored, gzipped or not) were sent for `id`.
    fn sent(&self, id: &str, bytes: &[u8]) {
        let digest = crate::hotswap::gunzip_if_gzipped(bytes.to_vec()).ok().map(|c| crate::sandbox::cache::digest(&c));
        let mut r = self.0.lock().unwrap();
        r.problems.remove(id);
        match digest {
            Some(d) => r.sent.insert(id.into(), d),
            None => r.sent.remove(id),
        };
    }

    /// Hex SHA-256 of the component sent last for `id`.
    pub fn last_sent(&self, id: &str) -> Option<String> {
        self.0.lock().unwrap().sent.get(id).cloned()
    }

    /// Forgets `id` (its Plugin is gone).
    pub fn forget(&self, id: &str) {
        let mut r = self.0.lock().unwrap();
        r.problems.remove(id);
        r.sent.remove(id);
    }
}

/// What every source task shares.
#[derive(Clone)]
pub struct Context {
    pub client: kube::Client,
    pub updates: mpsc::Sender<Update>,
    pub problems: Problems,
    pub oci: Option<Arc<dyn OciSource>>,
    /// How often a `file` source is polled.
    pub file_interval: Duration,
}

/// Aborts a task when dropped, so aborting a source's task stops the watch it started.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs `source` for `origin` until aborted or the reloader is gone.
pub async fn run(ctx: Context, origin: Origin, source: Checked, trust: Option<Policy>, cosign_keys: Vec<String>) {
    let id = origin.id();
    let send = |bytes: Vec<u8>, signature: Option<Vec<u8>>, cosign: Option<Evidence>| {
        ctx.problems.sent(&id, &bytes);
        ctx.updates.send(Update { origin: origin.clone(), bytes: Some(bytes), signature, trust: trust.clone(), cosign })
    };
    match source {
        Checked::ConfigMap(c) => {
            let (tx, mut rx) = mpsc::channel(4);
            let selection = Selection::Named { namespace: c.namespace.clone(), name: c.name.clone() };
            let _watch = AbortOnDrop(tokio::spawn(configmap::watch(ctx.client.clone(), selection, tx)));
            while let Some(u) = rx.recv().await {
                let Origin::ConfigMap { key, .. } = &u.origin else { continue };
                if *key != c.key {
                    continue;
                }
                match u.bytes {
                    Some(bytes) => {
                        if send(bytes, u.signature, None).await.is_err() {
                            return;
                        }
                    }
                    None => ctx.problems.set(
                        &id,
                        "SourceUnavailable",
                        format!(
                            "configmap {}/{} has no key {} any more (or is gone); the version loaded last keeps running",
                            c.namespace, c.name, c.key
                        ),
                    ),
                }
            }
        }
        Checked::File(path) => {
            // Stamped before the first read: a change from here on is sent.
            let watch = files::FileWatch::new(vec![path.clone()]);
            match tokio::fs::read(&path).await {
                Ok(bytes) => {
                    let signature = tokio::fs::read(trust::signature_path(&path)).await.ok();
                    if send(bytes, signature, None).await.is_err() {
                        return;
                    }
                }
                Err(e) => ctx.problems.set(&id, "SourceUnavailable", format!("cannot read {}: {e}", path.display())),
            }
            let (tx, mut rx) = mpsc::channel(4);
            let _watch = AbortOnDrop(tokio::spawn(watch.run(ctx.file_interval, tx)));
            while let Some(u) = rx.recv().await {
                if let Some(bytes) = u.bytes
                    && send(bytes, u.signature, None).await.is_err()
                {
                    return;
                }
            }
        }
        Checked::Oci { reference, poll } => {
            let Some(oci) = ctx.oci.clone() else {
                let message =
                    format!("cannot pull {reference}: this host runs with no OCI client (a library user gave none); use a configMap or file source");
                return ctx.problems.set(&id, "OciUnavailable", message);
            };
            pull_loop(&ctx, &id, oci.as_ref(), OciRequest { reference, cosign_keys }, poll, send).await;
        }
    }
}

/// Pulls until aborted: again at `poll` for a tag, with a backoff after a
/// failure, and not again after a success without `poll`.
async fn pull_loop<F, Fut>(ctx: &Context, id: &str, oci: &dyn OciSource, request: OciRequest, poll: Option<Duration>, send: F)
where
    F: Fn(Vec<u8>, Option<Vec<u8>>, Option<Evidence>) -> Fut,
    Fut: std::future::Future<Output = Result<(), mpsc::error::SendError<Update>>>,
{
    let mut last: Option<String> = None;
    let mut backoff = Duration::from_secs(1);
    loop {
        let wait = match oci.pull(&request).await {
            Ok(pulled) => {
                backoff = Duration::from_secs(1);
                if last.as_deref() != Some(&pulled.digest) {
                    tracing::info!(plugin = %id, reference = %request.reference, digest = %pulled.digest, "pulled");
                    last = Some(pulled.digest);
                    if send(pulled.bytes, None, pulled.cosign).await.is_err() {
                        return;
                    }
                } else {
                    ctx.problems.clear(id);
                }
                match poll {
                    Some(p) => p,
                    None => return,
                }
            }
            Err(e) => {
                ctx.problems.set(id, "PullFailed", format!("cannot pull {}: {e}; the version loaded last keeps running", request.reference));
                backoff = (backoff * 2).min(poll.unwrap_or(Duration::from_secs(300)).max(Duration::from_secs(1)));
                backoff
            }
        };
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pulls answered from a script: each call takes the next answer.
    struct Scripted(Mutex<Vec<Result<Pulled, String>>>);

    #[async_trait::async_trait]
    impl OciSource for Scripted {
        async fn pull(&self, _: &OciRequest) -> Result<Pulled, String> {
            self.0.lock().unwrap().remove(0)
        }
    }

    fn origin() -> Origin {
        Origin::Resource { name: "p".into(), uid: "u".into(), candidate: false, signature_name: "s".into() }
    }

    fn context(oci: Option<Arc<dyn OciSource>>) -> (Context, mpsc::Receiver<Update>) {
        let (tx, rx) = mpsc::channel(8);
        let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
        (Context { client, updates: tx, problems: Problems::default(), oci, file_interval: Duration::from_millis(10) }, rx)
    }

    #[tokio::test]
    async fn without_an_oci_client_an_oci_source_is_a_clear_problem() {
        let (ctx, _rx) = context(None);
        let problems = ctx.problems.clone();
        run(ctx, origin(), Checked::Oci { reference: "r/x:v1".into(), poll: None }, None, vec![]).await;
        let p = problems.get("plugin/p").unwrap();
        assert_eq!(p.reason, "OciUnavailable");
        assert!(p.message.contains("r/x:v1") && p.message.contains("no OCI client"), "{}", p.message);
    }

    #[tokio::test(start_paused = true)]
    async fn a_polled_tag_sends_each_new_digest_once_and_a_failed_pull_is_a_problem() {
        let pulled = |d: &str| Ok(Pulled { digest: d.into(), bytes: d.as_bytes().to_vec(), cosign: None });
        let script = vec![pulled("sha256:1"), pulled("sha256:1"), Err("registry down".into()), pulled("sha256:2")];
        let (ctx, mut rx) = context(Some(Arc::new(Scripted(Mutex::new(script)))));
        let problems = ctx.problems.clone();
        let task = tokio::spawn(run(ctx, origin(), Checked::Oci { reference: "r/x:v1".into(), poll: Some(Duration::from_secs(60)) }, None, vec![]));
        assert_eq!(rx.recv().await.unwrap().bytes.as_deref(), Some(&b"sha256:1"[..]));
        assert_eq!(rx.recv().await.unwrap().bytes.as_deref(), Some(&b"sha256:2"[..]), "the same digest is not sent twice");
        assert_eq!(problems.get("plugin/p"), None, "a good pull clears the failed one");
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_pull_is_reported_until_one_succeeds() {
        let script = vec![Err("registry down".into()), Ok(Pulled { digest: "sha256:1".into(), bytes: b"x".to_vec(), cosign: None })];
        let (ctx, mut rx) = context(Some(Arc::new(Scripted(Mutex::new(script)))));
        let problems = ctx.problems.clone();
        let task = tokio::spawn(run(ctx, origin(), Checked::Oci { reference: "r/x:v1".into(), poll: None }, None, vec![]));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let p = problems.get("plugin/p").unwrap();
        assert_eq!((p.reason, p.message.contains("registry down")), ("PullFailed", true));
        assert!(rx.recv().await.is_some());
        assert_eq!(problems.get("plugin/p"), None);
        task.await.unwrap();
    }
}
