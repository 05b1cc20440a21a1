//! How a Deployment moves its ReplicaSets, as upstream's `sync.go`, `rolling.go` and
//! `recreate.go`:
//! - **RollingUpdate**: the new ReplicaSet grows while all Pods stay within replicas +
//!   maxSurge; old ones shrink while available Pods stay at least replicas - maxUnavailable
//!   (unhealthy old Pods first, oldest ReplicaSet first).
//! - **Recreate**: old ReplicaSets go to 0; once none of their Pods is left running, the new
//!   one is created (if needed) and scaled to replicas.
//! - **Scaling** (`spec.replicas` changed, or paused): a single active ReplicaSet takes the new
//!   size; during a rollout the change is shared among the active ReplicaSets in proportion to
//!   their size (`max-replicas` annotation), larger ones first, leftovers to the largest.

use super::{DESIRED_REPLICAS, Halt, MAX_REPLICAS, Rollout, Step, annotation, arithmetic, created, status};
use crate::controller_ref::controller_uid;
use crate::{meta_str, spec_replicas, status_count};
use serde_json::Value;
use std::sync::Arc;

impl Rollout<'_> {
    /// Upstream's `isScalingEvent`: an active ReplicaSet's `desired-replicas` differs from
    /// `spec.replicas`.
    pub(super) fn is_scaling_event(&mut self) -> Step<bool> {
        let new = self.new_replica_set(false)?;
        let replicas = self.replicas();
        let mut active = self.active_old(new);
        active.extend(new.filter(|&i| spec_replicas(&self.sets[i]) > 0));
        Ok(active.into_iter().any(|i| annotation(&self.sets[i], DESIRED_REPLICAS).and_then(|d| d.parse::<i32>().ok()).is_some_and(|d| d != replicas)))
    }

    /// Upstream's `sync`: scale without rolling; a paused Deployment's history is cleaned too.
    pub(super) fn sync_scale(&mut self) -> Step {
        let new = self.new_replica_set(false)?;
        self.scale_all(new)?;
        if self.d.pointer("/spec/paused") == Some(&Value::Bool(true)) {
            self.cleanup(new)?;
        }
        self.sync_deployment_status(new);
        Ok(())
    }

    /// Upstream's `syncStatusOnly` (a Deployment being deleted).
    pub(super) fn sync_status_only(&mut self) -> Step {
        let new = self.new_replica_set(false)?;
        self.sync_deployment_status(new);
        Ok(())
    }

    /// Upstream's `FindActiveOrLatest`: the only active ReplicaSet, or the newest when none is.
    fn active_or_latest(&self, new: Option<usize>) -> Option<usize> {
        let mut old = self.old(new);
        old.sort_by(|&a, &b| created(&self.sets[b]).cmp(&created(&self.sets[a])));
        if new.is_none() && old.is_empty() {
            return None;
        }
        let active: Vec<usize> = old.iter().copied().chain(new).filter(|&i| spec_replicas(&self.sets[i]) > 0).collect();
        match active.len() {
            0 => new.or(old.first().copied()),
            1 => Some(active[0]),
            _ => None,
        }
    }

    /// Upstream's `IsSaturated`: the new ReplicaSet has all replicas, desired and available.
    fn saturated(&self, new: Option<usize>) -> bool {
        let Some(rs) = new.map(|i| &self.sets[i]) else { return false };
        let replicas = self.replicas();
        let desired = annotation(rs, DESIRED_REPLICAS).and_then(|d| d.parse::<i32>().ok());
        spec_replicas(rs) == replicas && desired == Some(replicas) && status_count(rs, "availableReplicas") == replicas
    }

    /// Upstream's `scale`.
    fn scale_all(&mut self, new: Option<usize>) -> Step {
        let replicas = self.replicas();
        if let Some(i) = self.active_or_latest(new) {
            if spec_replicas(&self.sets[i]) != replicas {
                self.scale_and_record(i, replicas)?;
            }
            return Ok(());
        }
        if self.saturated(new) {
            for i in self.active_old(new) {
                self.scale_and_record(i, 0)?;
            }
            return Ok(());
        }
        if !arithmetic::is_rolling(&self.d) {
            return Ok(());
        }
        let mut active: Vec<usize> = self.active_old(new);
        active.extend(new.filter(|&i| spec_replicas(&self.sets[i]) > 0));
        let surge = arithmetic::max_surge(&self.d);
        let allowed = if replicas > 0 { replicas + surge } else { 0 };
        let to_add = allowed - self.spec_sum(active.iter().copied());
        // Larger first; equal sizes: newer first when growing, older first when shrinking.
        let size = |i: usize| spec_replicas(&self.sets[i]);
        let operation = if to_add > 0 {
            "up"
        } else if to_add < 0 {
            "down"
        } else {
            ""
        };
        if to_add != 0 {
            active.sort_by(|&a, &b| {
                size(b).cmp(&size(a)).then_with(|| {
                    let by_age = created(&self.sets[a]).cmp(&created(&self.sets[b]));
                    if to_add > 0 { by_age.reverse() } else { by_age }
                })
            });
        }
        let status_replicas = self.d.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0) as i32;
        let mut added = 0;
        let mut sizes = vec![];
        for &i in &active {
            let rs = &self.sets[i];
            let mut share = 0;
            if to_add != 0 {
                let annotated = annotation(rs, MAX_REPLICAS).and_then(|m| m.parse::<i32>().ok()).filter(|&m| m != 0).unwrap_or(status_replicas);
                share = arithmetic::proportion(size(i), replicas, surge, annotated, to_add, added);
                added += share;
            }
            sizes.push(size(i) + share);
        }
        for (k, &i) in active.iter().enumerate() {
            if k == 0 && to_add != 0 {
                sizes[0] = (sizes[0] + to_add - added).max(0);
            }
            self.scale(i, sizes[k], operation)?;
        }
        Ok(())
    }

    /// Upstream's `rolloutRolling`.
    pub(super) fn rollout_rolling(&mut self) -> Step {
        let new = self.new_replica_set(true)?.ok_or(Halt::Failed)?;
        if self.reconcile_new(new)? || self.reconcile_old(new)? {
            self.sync_rollout_status(Some(new));
            return Ok(());
        }
        if status::complete(&self.d, &self.d["status"]) {
            self.cleanup(Some(new))?;
        }
        self.sync_rollout_status(Some(new));
        Ok(())
    }

    /// Upstream's `reconcileNewReplicaSet`.
    fn reconcile_new(&mut self, new: usize) -> Step<bool> {
        let (replicas, current) = (self.replicas(), spec_replicas(&self.sets[new]));
        if current == replicas {
            return Ok(false);
        }
        if current > replicas {
            return self.scale_and_record(new, replicas);
        }
        let to = arithmetic::new_rs_new_replicas(&self.d, self.spec_sum(0..self.sets.len()), current);
        self.scale_and_record(new, to)
    }

    /// Upstream's `reconcileOldReplicaSets`.
    fn reconcile_old(&mut self, new: usize) -> Step<bool> {
        let mut old = self.active_old(Some(new));
        if self.spec_sum(old.iter().copied()) == 0 {
            return Ok(false);
        }
        old.sort_by(|&a, &b| created(&self.sets[a]).cmp(&created(&self.sets[b])));
        let min_available = self.replicas() - arithmetic::max_unavailable(&self.d);
        let new_unavailable = spec_replicas(&self.sets[new]) - status_count(&self.sets[new], "availableReplicas");
        let max_scaled_down = self.spec_sum(0..self.sets.len()) - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return Ok(false);
        }
        let cleaned = self.cleanup_unhealthy(&old, max_scaled_down)?;
        let scaled = self.scale_down_old(&old, new)?;
        Ok(cleaned + scaled > 0)
    }

    /// Upstream's `cleanupUnhealthyReplicas`: old Pods that are not available go first.
    fn cleanup_unhealthy(&mut self, old: &[usize], max: i32) -> Step<i32> {
        let mut total = 0;
        for &i in old {
            if total >= max {
                break;
            }
            let (size, available) = (spec_replicas(&self.sets[i]), status_count(&self.sets[i], "availableReplicas"));
            if size == 0 || size == available {
                continue;
            }
            let count = (max - total).min(size - available);
            if count < 0 {
                // More available than wanted: a status not yet caught up with a scale-down.
                // Upstream refuses the sync rather than scale up here.
                return Err(Halt::Retry);
            }
            self.scale_and_record(i, size - count)?;
            total += count;
        }
        Ok(total)
    }

    /// Upstream's `scaleDownOldReplicaSetsForRollingUpdate`.
    fn scale_down_old(&mut self, old: &[usize], new: usize) -> Step<i32> {
        let min_available = self.replicas() - arithmetic::max_unavailable(&self.d);
        let available = self.status_sum(old.iter().copied().chain([new]), "availableReplicas");
        if available <= min_available {
            return Ok(0);
        }
        let wanted = available - min_available;
        let mut total = 0;
        for &i in old {
            if total >= wanted {
                break;
            }
            let size = spec_replicas(&self.sets[i]);
            if size == 0 {
                continue;
            }
            let count = size.min(wanted - total);
            self.scale_and_record(i, size - count)?;
            total += count;
        }
        Ok(total)
    }

    /// Upstream's `rolloutRecreate`.
    pub(super) fn rollout_recreate(&mut self, pods: &[Arc<Value>]) -> Step {
        let mut new = self.new_replica_set(false)?;
        let mut scaled_down = false;
        for i in self.active_old(new) {
            scaled_down |= self.scale_and_record(i, 0)?;
        }
        if scaled_down || self.old_pods_running(new, pods) {
            self.sync_rollout_status(new);
            return Ok(());
        }
        let new_index = match new {
            Some(i) => i,
            None => self.new_replica_set(true)?.ok_or(Halt::Failed)?,
        };
        new = Some(new_index);
        self.scale_and_record(new_index, self.replicas())?;
        if status::complete(&self.d, &self.d["status"]) {
            self.cleanup(new)?;
        }
        self.sync_rollout_status(new);
        Ok(())
    }

    /// Upstream's `oldPodsRunning`: an old ReplicaSet still counts Pods, or a Pod of one is
    /// neither Succeeded nor Failed (terminating Pods count: Recreate waits for them).
    fn old_pods_running(&self, new: Option<usize>, pods: &[Arc<Value>]) -> bool {
        let old = self.old(new);
        if self.status_sum(old.iter().copied(), "replicas") > 0 {
            return true;
        }
        let old_uids: Vec<&str> = old.iter().map(|&i| meta_str(&self.sets[i], "uid")).collect();
        pods.iter().any(|p| {
            let phase = p.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default();
            old_uids.contains(&controller_uid(p)) && phase != "Succeeded" && phase != "Failed"
        })
    }
}
