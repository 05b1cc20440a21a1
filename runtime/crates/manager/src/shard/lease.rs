//! A replica's own shard Lease: created at start, renewed every retry
//! period, released on a graceful stop.
//!
//! The Lease is named after the shard and held by it (`holderIdentity` =
//! its name); the sharder reads "held by itself and renewed" as alive. A
//! replica that finds its Lease taken over, or cannot renew it within the
//! renew deadline, has lost its shard: [`ShardLease::hold`] returns and the
//! host exits, as it does on a lost leader election. Its restart is a new
//! shard with a new name, so the sharder's verdict on the old name stays
//! true (the handover model in `sharding/tests/handover_model.rs` shows what
//! goes wrong when a name is taken back).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::time::Instant;

use super::Sharding;

/// How a replica loses its shard.
#[derive(Debug, thiserror::Error)]
pub enum Lost {
    #[error("shard Lease {namespace}/{name} was taken over by {holder:?} (this replica's Lease expired)")]
    TakenOver { namespace: String, name: String, holder: String },
    #[error("shard Lease {namespace}/{name} was not renewed within the renew deadline ({deadline:?})")]
    Deadline { namespace: String, name: String, deadline: Duration },
    #[error("shard Lease {namespace}/{name} was deleted")]
    Deleted { namespace: String, name: String },
}

/// Why the Lease could not be created.
#[derive(Debug, thiserror::Error)]
#[error("cannot create shard Lease {namespace}/{name}")]
pub struct CreateError {
    namespace: String,
    name: String,
    #[source]
    source: kube::Error,
}

/// This replica's shard Lease.
pub struct ShardLease {
    api: Api<Lease>,
    sharding: Sharding,
    /// The Lease as this replica last wrote it: a renewal is one conditional
    /// write of it (a loaded API server answers one request sooner than
    /// two); a conflict means someone else wrote it, and the renewal reads
    /// it to find out who.
    written: std::sync::Mutex<Option<Lease>>,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

impl ShardLease {
    /// Creates the Lease, held by this shard.
    pub async fn create(client: kube::Client, sharding: Sharding) -> Result<ShardLease, CreateError> {
        let api: Api<Lease> = Api::namespaced(client, &sharding.namespace);
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(sharding.shard.clone()),
                namespace: Some(sharding.namespace.clone()),
                labels: Some(BTreeMap::from([(operator_sharding::labels::RING_LABEL.to_owned(), sharding.ring.clone())])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(sharding.shard.clone()),
                lease_duration_seconds: Some(i32::try_from(sharding.lease_duration.as_secs()).unwrap_or(i32::MAX)),
                acquire_time: Some(now()),
                renew_time: Some(now()),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        let created = api.create(&PostParams::default(), &lease).await;
        let created = created.map_err(|source| CreateError { namespace: sharding.namespace.clone(), name: sharding.shard.clone(), source })?;
        tracing::info!(shard = %sharding.shard, ring = %sharding.ring, "shard Lease created");
        Ok(ShardLease { api, sharding, written: std::sync::Mutex::new(Some(created)) })
    }

    /// Renews the Lease every retry period until `stop` turns true (then
    /// releases it and returns `Ok`), or until the shard is lost.
    pub async fn hold(&self, mut stop: tokio::sync::watch::Receiver<bool>) -> Result<(), Lost> {
        let mut renewed = Instant::now();
        loop {
            tokio::select! {
                () = async { drop(stop.wait_for(|s| *s).await) } => {
                    self.release().await;
                    return Ok(());
                }
                () = tokio::time::sleep(self.sharding.retry_period) => {}
            }
            let left = self.sharding.renew_deadline.saturating_sub(renewed.elapsed());
            match tokio::time::timeout(left, self.renew()).await {
                Ok(Ok(())) => renewed = Instant::now(),
                Ok(Err(Renewal::Lost(lost))) => return Err(lost),
                Ok(Err(Renewal::Failed(e))) => {
                    tracing::warn!(shard = %self.sharding.shard, error = %crate::error_chain(&e), "shard Lease renewal failed; retrying")
                }
                Err(_) => {}
            }
            if renewed.elapsed() >= self.sharding.renew_deadline {
                return Err(Lost::Deadline {
                    namespace: self.sharding.namespace.clone(),
                    name: self.sharding.shard.clone(),
                    deadline: self.sharding.renew_deadline,
                });
            }
        }
    }

    async fn renew(&self) -> Result<(), Renewal> {
        let name = &self.sharding.shard;
        let last = self.written.lock().unwrap().take();
        if let Some(mut lease) = last {
            lease.spec.get_or_insert_with(LeaseSpec::default).renew_time = Some(now());
            match self.api.replace(name, &PostParams::default(), &lease).await {
                Ok(written) => {
                    *self.written.lock().unwrap() = Some(written);
                    return Ok(());
                }
                // Written by someone else (a takeover?): read it below.
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(e) => {
                    *self.written.lock().unwrap() = Some(lease);
                    return Err(Renewal::Failed(e));
                }
            }
        }
        let Some(mut lease) = self.api.get_opt(name).await.map_err(Renewal::Failed)? else {
            return Err(Renewal::Lost(Lost::Deleted { namespace: self.sharding.namespace.clone(), name: name.clone() }));
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if holder != *name {
            return Err(Renewal::Lost(Lost::TakenOver { namespace: self.sharding.namespace.clone(), name: name.clone(), holder }));
        }
        spec.renew_time = Some(now());
        // The update carries the resourceVersion read: a takeover in between
        // answers 409 and the next round sees the new holder.
        let written = self.api.replace(name, &PostParams::default(), &lease).await.map_err(Renewal::Failed)?;
        *self.written.lock().unwrap() = Some(written);
        Ok(())
    }

    /// Gives the shard up: the sharder moves its parents at once instead of
    /// waiting out the Lease.
    pub async fn release(&self) {
        let name = &self.sharding.shard;
        let result = async {
            let Some(mut lease) = self.api.get_opt(name).await? else { return Ok(()) };
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if spec.holder_identity.as_deref() != Some(name.as_str()) {
                return Ok(());
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            self.api.replace(name, &PostParams::default(), &lease).await.map(drop)
        }
        .await;
        match result {
            Ok(()) => tracing::info!(shard = %name, "shard Lease released"),
            Err(e) => {
                tracing::warn!(shard = %name, error = %crate::error_chain(&e), "cannot release the shard Lease; the sharder will wait for it to expire")
            }
        }
    }
}

enum Renewal {
    Lost(Lost),
    Failed(kube::Error),
}
