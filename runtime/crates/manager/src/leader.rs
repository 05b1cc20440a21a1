//! Leader election with a `coordination.k8s.io/v1` Lease, with client-go's
//! `leaderelection` semantics, so replicas of the host (and any tool that
//! reads client-go leases, e.g. `kubectl get lease`) agree on who leads.
//!
//! 1. Acquire: every `retry_period` (jittered by up to 1.2x, as client-go's
//!    `JitterUntil`) read the Lease; take it when it is missing, free (empty
//!    `holderIdentity`), ours, or expired. "Expired" is judged as client-go
//!    does: by when *this* process last saw the Lease record change
//!    (`observedTime`, a local monotonic instant) plus `leaseDurationSeconds`,
//!    never by comparing the holder's `renewTime` with our wall clock, so
//!    clock skew between nodes cannot steal a lease.
//! 2. Every write is an update carrying the `resourceVersion` that was read
//!    (optimistic concurrency): of two candidates, the API server lets one
//!    win and answers the other 409 Conflict.
//! 3. Renew: every `retry_period` the leader rewrites `renewTime`; when no
//!    renewal has succeeded within `renew_deadline` of a renew cycle's start,
//!    leadership is lost ([`Error::Lost`]).
//! 4. `leaseTransitions` counts changes of holder; `acquireTime` and
//!    `renewTime` are MicroTime (RFC 3339 with microseconds).
//! 5. Release (client-go's `ReleaseOnCancel`): the leader clears
//!    `holderIdentity` and sets `leaseDurationSeconds: 1`, so a standby takes
//!    over at its next retry instead of waiting out the lease.
//!
//! Why not a crate: `kube-leader-election` 0.44 is built on kube 4, and
//! `kube-lease-manager` 0.13 (kube 5) locks by server-side-apply field
//! ownership and judges expiry by the holder's `renewTime` against the local
//! wall clock, with no renew deadline; neither matches client-go's protocol,
//! which the ecosystem's tooling and our operators' users expect.
//!
//! Wall-clock times written into the Lease come from the system clock, not the
//! host's [`crate::clock`]: they are read by other processes, and the lease
//! must keep real time even when plugins run on a virtual clock.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::api_error::ApiErrorClass;

/// client-go's `JitterFactor`: acquire retries wait `retry_period * (1 + rand * 1.2)`.
const JITTER_FACTOR: f64 = 1.2;

/// Leader election settings (the `--leader-election-*` flags).
#[derive(Clone, Debug)]
pub struct Config {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease (`--leader-election-id`).
    pub name: String,
    /// This process's identity, unique per process: `hostname_<uuid>`.
    pub identity: String,
    /// How long a standby waits after it last saw the Lease change before taking it (default 15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a failed renewal before it gives up leading (default 10 s).
    pub renew_deadline: Duration,
    /// Time between acquire attempts and between renewals (default 2 s).
    pub retry_period: Duration,
}

/// What leader election can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid leader election settings: {0}")]
    InvalidConfig(String),
    #[error("lost the lease {namespace}/{name}: it was not renewed within the renew deadline ({deadline:?})")]
    Lost { namespace: String, name: String, deadline: Duration },
    #[error("the leader election task stopped unexpectedly: {0}")]
    Task(String),
    #[error("cannot release the lease {namespace}/{name}")]
    Release {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

type Result<T, E = Error> = std::result::Result<T, E>;

impl Config {
    /// Checks the relations client-go enforces between the durations.
    pub fn validate(&self) -> Result<()> {
        let invalid = |m: String| Err(Error::InvalidConfig(m));
        if self.identity.is_empty() {
            return invalid("the identity must not be empty".into());
        }
        if self.name.is_empty() || self.namespace.is_empty() {
            return invalid("the lease name and namespace must not be empty".into());
        }
        if self.lease_duration < Duration::from_secs(1) {
            return invalid(format!("lease duration {:?} is under 1s (the Lease stores whole seconds)", self.lease_duration));
        }
        if self.lease_duration <= self.renew_deadline {
            return invalid(format!(
                "lease duration ({:?}) must be greater than the renew deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        if self.retry_period.is_zero() {
            return invalid("the retry period must be greater than zero".into());
        }
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * JITTER_FACTOR {
            return invalid(format!(
                "renew deadline ({:?}) must be greater than {JITTER_FACTOR} x the retry period ({:?})",
                self.renew_deadline, self.retry_period
            ));
        }
        Ok(())
    }
}

/// `hostname_<uuid v4>`, as controller-runtime names a candidate: the
/// hostname (a Pod's name in a cluster) says where the leader runs, the UUID
/// keeps two processes on one host apart.
pub fn default_identity() -> String {
    let hostname = ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty()))
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "unknown".into());
    format!("{hostname}_{}", uuid::Uuid::new_v4())
}

/// The Lease record as this process last saw it, and when it saw it change.
#[derive(Debug)]
struct Observed {
    spec: LeaseSpec,
    at: Instant,
}

/// One candidate for the lease.
#[derive(Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: Config,
    observed: Option<Observed>,
    /// State of the jitter generator (xorshift64*; only spreads retries).
    jitter: u64,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

fn holder(spec: &LeaseSpec) -> &str {
    spec.holder_identity.as_deref().unwrap_or("")
}

impl LeaderElector {
    /// A candidate; checks the settings.
    pub fn new(client: kube::Client, config: Config) -> Result<Self> {
        config.validate()?;
        let api = Api::namespaced(client, &config.namespace);
        let jitter = (uuid::Uuid::new_v4().as_u128() as u64) | 1;
        Ok(Self { api, config, observed: None, jitter })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether the last record this process saw names it the holder.
    pub fn is_leader(&self) -> bool {
        self.observed.as_ref().is_some_and(|o| holder(&o.spec) == self.config.identity)
    }

    /// The holder in the last record this process saw ("" when free or unseen).
    pub fn observed_holder(&self) -> &str {
        self.observed.as_ref().map_or("", |o| holder(&o.spec))
    }

    fn observe(&mut self, spec: LeaseSpec) {
        if self.observed.as_ref().is_none_or(|o| o.spec != spec) {
            self.observed = Some(Observed { spec, at: Instant::now() });
        }
    }

    /// One step of client-go's `tryAcquireOrRenew`: `Ok(true)` when this
    /// process holds the lease afterwards, `Ok(false)` when someone else
    /// does (or won a race for it).
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = now();
        let seconds = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let mut record = LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(seconds),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        };
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(record.clone()),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    self.observed = Some(Observed { spec: record, at: Instant::now() });
                    Ok(true)
                }
                // Another candidate created it first (AlreadyExists).
                Err(e) if ApiErrorClass::of(&e) == ApiErrorClass::AlreadyExists => Ok(false),
                Err(e) => Err(e),
            };
        };
        let old = lease.spec.clone().unwrap_or_default();
        self.observe(old.clone());
        let old_holder = holder(&old);
        let ours = old_holder == self.config.identity;
        if !old_holder.is_empty() && !ours {
            let duration = Duration::from_secs(u64::try_from(old.lease_duration_seconds.unwrap_or(0)).unwrap_or(0));
            let observed_at = self.observed.as_ref().map_or_else(Instant::now, |o| o.at);
            if observed_at + duration > Instant::now() {
                return Ok(false);
            }
        }
        if ours {
            record.acquire_time = old.acquire_time.clone();
            record.lease_transitions = old.lease_transitions;
        } else {
            record.lease_transitions = Some(old.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        // `lease.metadata.resourceVersion` is the one read: a concurrent writer gets 409.
        lease.spec = Some(record.clone());
        match self.api.replace(&self.config.name, &PostParams::default(), &lease).await {
            Ok(_) => {
                self.observed = Some(Observed { spec: record, at: Instant::now() });
                Ok(true)
            }
            Err(e) if ApiErrorClass::of(&e) == ApiErrorClass::Conflict => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn jittered(&mut self, base: Duration) -> Duration {
        let mut x = self.jitter;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.jitter = x;
        let unit = (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64;
        base.mul_f64(1.0 + unit * JITTER_FACTOR)
    }

    /// Retries every (jittered) retry period until this process holds the lease.
    pub async fn acquire(&mut self) {
        tracing::info!(lease = %self.lease_ref(), identity = %self.config.identity, "attempting to acquire the leader lease");
        let mut last_holder = String::new();
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(lease = %self.lease_ref(), identity = %self.config.identity, "acquired the leader lease");
                    return;
                }
                Ok(false) => {
                    let h = self.observed_holder().to_string();
                    if h != last_holder {
                        tracing::info!(lease = %self.lease_ref(), holder = %h, "the lease is held by another candidate; standing by");
                        last_holder = h;
                    }
                }
                Err(e) => {
                    tracing::warn!(lease = %self.lease_ref(), error = %crate::error_chain(&e), "cannot read or write the lease; retrying")
                }
            }
            let wait = self.jittered(self.config.retry_period);
            tokio::time::sleep(wait).await;
        }
    }

    /// Renews every retry period; returns [`Error::Lost`] once a renew cycle
    /// found no success within the renew deadline.
    pub async fn renew_until_lost(&mut self) -> Error {
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let deadline = Instant::now() + self.config.renew_deadline;
            loop {
                match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                    Ok(Ok(true)) => break,
                    Ok(Ok(false)) => {
                        tracing::warn!(lease = %self.lease_ref(), holder = %self.observed_holder(), "renewal refused")
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(lease = %self.lease_ref(), error = %crate::error_chain(&e), "renewal failed; retrying")
                    }
                    Err(_) => return self.lost(),
                }
                let next = Instant::now() + self.config.retry_period;
                if next >= deadline {
                    tokio::time::sleep_until(deadline).await;
                    return self.lost();
                }
                tokio::time::sleep_until(next).await;
            }
        }
    }

    fn lost(&self) -> Error {
        Error::Lost { namespace: self.config.namespace.clone(), name: self.config.name.clone(), deadline: self.config.renew_deadline }
    }

    fn lease_ref(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    /// Gives the lease up if this process holds it (client-go's release):
    /// empty holder, `leaseDurationSeconds: 1`, transitions kept.
    pub async fn release(&mut self) -> Result<()> {
        if !self.is_leader() {
            return Ok(());
        }
        let err = |source| Error::Release { namespace: self.config.namespace.clone(), name: self.config.name.clone(), source };
        let Some(mut lease) = self.api.get_opt(&self.config.name).await.map_err(err)? else {
            return Ok(());
        };
        let old = lease.spec.clone().unwrap_or_default();
        if holder(&old) != self.config.identity {
            return Ok(());
        }
        let now = now();
        let record = LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: old.lease_transitions,
            ..LeaseSpec::default()
        };
        lease.spec = Some(record.clone());
        let err = |source| Error::Release { namespace: self.config.namespace.clone(), name: self.config.name.clone(), source };
        self.api.replace(&self.config.name, &PostParams::default(), &lease).await.map_err(err)?;
        self.observed = Some(Observed { spec: record, at: Instant::now() });
        tracing::info!(lease = %self.lease_ref(), "released the leader lease");
        Ok(())
    }

    /// Acquires, then renews; `leading` says whether this process leads.
    /// Returns `Ok(())` after releasing the lease once `release` turns true
    /// (or its sender is dropped), and [`Error::Lost`] when a renewal missed
    /// its deadline.
    pub async fn run(mut self, leading: watch::Sender<bool>, mut release: watch::Receiver<bool>) -> Result<()> {
        tokio::select! {
            () = self.acquire() => {}
            _ = release.wait_for(|r| *r) => return Ok(()),
        }
        leading.send_replace(true);
        let outcome = tokio::select! {
            lost = self.renew_until_lost() => Err(lost),
            _ = release.wait_for(|r| *r) => Ok(()),
        };
        leading.send_replace(false);
        match outcome {
            Err(lost) => Err(lost),
            Ok(()) => self.release().await,
        }
    }
}

/// A candidate running in the background: whether it leads (also as
/// `leader_election_master_status{name=<lease>}`), and how to stop it.
#[derive(Debug)]
pub struct Election {
    leading: watch::Receiver<bool>,
    release: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<()>>,
    release_timeout: Duration,
}

impl Election {
    /// Starts campaigning for the lease.
    pub fn start(client: kube::Client, config: Config, metrics: std::sync::Arc<crate::metrics::Metrics>) -> Result<Self> {
        let release_timeout = config.lease_duration;
        let name = config.name.clone();
        let elector = LeaderElector::new(client, config)?;
        let (leading_tx, leading) = watch::channel(false);
        metrics.set_leader(&name, false);
        let mut follow = leading.clone();
        tokio::spawn(async move {
            while follow.changed().await.is_ok() {
                let now = *follow.borrow_and_update();
                metrics.set_leader(&name, now);
            }
        });
        let (release, release_rx) = watch::channel(false);
        let task = tokio::spawn(elector.run(leading_tx, release_rx));
        Ok(Self { leading, release, task, release_timeout })
    }

    /// Turns true while this process holds the lease.
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Resolves when leadership was lost (cancel-safe; pending while the
    /// candidate stands by or leads).
    pub async fn lost(&mut self) -> Error {
        match (&mut self.task).await {
            Ok(Err(e)) => e,
            Ok(Ok(())) => std::future::pending().await,
            Err(join) => Error::Task(join.to_string()),
        }
    }

    /// Stops campaigning and, if leading, releases the lease (waits at most
    /// one lease duration; a failure is logged, the lease then expires).
    pub async fn release(self) {
        self.release.send_replace(true);
        match tokio::time::timeout(self.release_timeout, self.task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => {
                tracing::warn!(error = %crate::error_chain(&e), "leader lease not released; it expires instead")
            }
            Ok(Err(join)) => tracing::warn!(error = %join, "leader election task failed"),
            Err(_) => tracing::warn!("releasing the leader lease timed out; it expires instead"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(lease: u64, renew: u64, retry: u64) -> Config {
        Config {
            namespace: "default".into(),
            name: "operator-host".into(),
            identity: "a_1".into(),
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
        }
    }

    #[test]
    fn the_defaults_are_valid() {
        config(15, 10, 2).validate().unwrap();
    }

    #[test]
    fn a_lease_duration_not_above_the_renew_deadline_is_refused() {
        let e = config(10, 10, 2).validate().unwrap_err().to_string();
        assert!(e.contains("must be greater than the renew deadline"), "{e}");
    }

    #[test]
    fn a_renew_deadline_within_jittered_retries_is_refused() {
        let e = config(15, 2, 2).validate().unwrap_err().to_string();
        assert!(e.contains("1.2 x the retry period"), "{e}");
    }

    #[test]
    fn identities_are_unique_per_process_and_start_with_the_hostname() {
        let (a, b) = (default_identity(), default_identity());
        assert_ne!(a, b);
        let (host, suffix) = a.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        assert_eq!(suffix.len(), 36, "{a}");
    }
}
