//! Storage: a default StorageClass, a simulated provisioner and the binder half of
//! kube-controller-manager's PersistentVolume controller (`pkg/controller/volume/persistentvolume`).
//!
//! - [`create_default_class`] makes the StorageClass `standard`, annotated
//!   `storageclass.kubernetes.io/is-default-class: "true"`, provisioner [`PROVISIONER`],
//!   `reclaimPolicy: Delete`, `volumeBindingMode: Immediate` (the server's `DefaultStorageClass`
//!   admission then gives it to claims that name no class).
//! - The binder, for each claim with no `volumeName`: binds it to the volume whose `claimRef`
//!   names it (a provisioned one) or else to the smallest `Available` volume of its class with
//!   its access modes and enough capacity (the volume's `claimRef` set, annotated
//!   `pv.kubernetes.io/bound-by-controller`); the claim gets `volumeName`,
//!   `pv.kubernetes.io/bind-completed` and `bound-by-controller`, status `Bound` with the
//!   volume's capacity and access modes; the volume phase `Bound`. A claim of a class with a
//!   provisioner and no volume is annotated `volume.kubernetes.io/storage-provisioner` (and the
//!   beta name) for that provisioner. A volume whose claim is gone is `Released`.
//! - The provisioner (external, as upstream's sig-storage provisioners are): for a claim
//!   annotated with [`PROVISIONER`], a volume `pvc-<claim uid>` of the requested size,
//!   `hostPath` under `/var/lib/operator-host-sim/`, the class's reclaim policy, `claimRef` to
//!   the claim and `pv.kubernetes.io/provisioned-by`; a `Released` volume it provisioned with
//!   reclaim policy `Delete` is deleted.
//!
//! - Protection (kube-controller-manager's `pvc-protection` and `pv-protection` controllers):
//!   the API server gives new claims and volumes the `kubernetes.io/pvc-protection` and
//!   `kubernetes.io/pv-protection` finalizers; a deleted claim loses it once no scheduled Pod
//!   mounts it, a deleted volume once it is not `Bound`.
//!
//! No data is stored anywhere: the volume is a record the kubelet checks before starting a Pod.

use super::{Next, Retry, builtin, deleting, meta_str, opts, put};
use apiserver::resources::Resource;
use apiserver::rest::{Core, DeleteOptions, Sub};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// The simulated provisioner's name, on the default StorageClass and on what it provisions.
pub const PROVISIONER: &str = "sim.operator-host.dev/hostpath";
/// The default StorageClass's name (kind's and minikube's name for theirs).
pub const DEFAULT_CLASS: &str = "standard";

const MANAGER: &str = "persistent-volume-binder";
const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";

/// Create (or keep) the default StorageClass.
pub fn create_default_class(core: &Core) {
    let res = builtin(core, "storage.k8s.io", "v1", "storageclasses");
    if core.store.get(&core.key(&res, "", DEFAULT_CLASS)).is_some() {
        return;
    }
    let class = json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": DEFAULT_CLASS, "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    });
    if let Err(e) = apiserver::rest::wait(core.create(&res, "", class, &opts("simulated-cluster")))
        && e.code != 409
    {
        tracing::warn!(error = %e.message, "could not create the default StorageClass");
    }
}

/// Whether a commit concerns the binder, provisioner or protection: claims, volumes, classes,
/// and Pods (a deleted claim waits for the Pods that mount it).
pub(crate) fn relevant(e: &apiserver::store::Event) -> bool {
    let gr = &e.key.gr;
    (gr.group.is_empty() && matches!(gr.resource.as_str(), "persistentvolumeclaims" | "persistentvolumes" | "pods"))
        || (gr.group == "storage.k8s.io" && gr.resource == "storageclasses")
}

struct Pass<'a> {
    core: &'a Core,
    claims: Resource,
    volumes: Resource,
    classes: HashMap<String, Arc<Value>>,
}

/// One pass of the binder and the provisioner over every claim and volume.
pub(crate) fn pass(core: &Core) -> Next {
    let mut next = Next::default();
    let claims = builtin(core, "", "v1", "persistentvolumeclaims");
    let volumes = builtin(core, "", "v1", "persistentvolumes");
    let class_res = builtin(core, "storage.k8s.io", "v1", "storageclasses");
    let classes = core.store.list_shared(&class_res.group_resource(), None).0.into_iter().map(|c| (meta_str(&c, "name").to_string(), c)).collect();
    let pass = Pass { core, claims, volumes, classes };
    let claim_list = core.store.list_shared(&pass.claims.group_resource(), None).0;
    let mut volume_list: Vec<Value> = core.store.list_shared(&pass.volumes.group_resource(), None).0.iter().map(|v| Value::clone(v)).collect();
    for claim in &claim_list {
        if pass.claim(claim, &mut volume_list).is_err() {
            next.retry = true;
        }
    }
    let by_uid: HashMap<&str, &Arc<Value>> = claim_list.iter().map(|c| (meta_str(c, "uid"), c)).collect();
    for volume in &volume_list {
        if pass.volume(volume, &by_uid).is_err() {
            next.retry = true;
        }
    }
    if pass.protection(&claim_list, &volume_list).is_err() {
        next.retry = true;
    }
    next
}

const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
const PV_PROTECTION: &str = "kubernetes.io/pv-protection";

impl Pass<'_> {
    /// Bind, annotate for provisioning, or provision one claim.
    fn claim(&self, claim: &Value, volumes: &mut Vec<Value>) -> Result<(), Retry> {
        if deleting(claim) {
            return Ok(());
        }
        let uid = meta_str(claim, "uid");
        let bound_name = claim.pointer("/spec/volumeName").and_then(Value::as_str).unwrap_or_default();
        if !bound_name.is_empty() {
            // Bound already (or pre-bound by its author): finish what a half-done bind left.
            let Some(volume) = volumes.iter().find(|v| meta_str(v, "name") == bound_name).cloned() else { return Ok(()) };
            return self.bind(claim, &volume, volumes);
        }
        let class = claim.pointer("/spec/storageClassName").and_then(Value::as_str).unwrap_or_default();
        let own = volumes.iter().find(|v| v.pointer("/spec/claimRef/uid").and_then(Value::as_str) == Some(uid)).cloned();
        let volume = own.or_else(|| best_match(claim, class, volumes).cloned());
        if let Some(volume) = volume {
            return self.bind(claim, &volume, volumes);
        }
        let Some(provisioner) = self.classes.get(class).and_then(|c| c["provisioner"].as_str()) else { return Ok(()) };
        let annotated = claim.pointer("/metadata/annotations").and_then(|a| a.get(ANN_STORAGE_PROVISIONER)).and_then(Value::as_str);
        if annotated != Some(provisioner) {
            let mut new = claim.clone();
            let annotations = new["metadata"].as_object_mut().expect("metadata").entry("annotations").or_insert_with(|| json!({}));
            annotations[ANN_BETA_STORAGE_PROVISIONER] = json!(provisioner);
            annotations[ANN_STORAGE_PROVISIONER] = json!(provisioner);
            put(self.core, &self.claims, new, Sub::Main, MANAGER)?;
            return Ok(()); // provisioned on the next pass, from the annotated claim
        }
        if provisioner == PROVISIONER {
            let volume = self.provision(claim, class)?;
            volumes.push(volume);
        }
        Ok(())
    }

    /// The simulated provisioner: a volume for `claim`, pre-bound to it through `claimRef`.
    fn provision(&self, claim: &Value, class: &str) -> Result<Value, Retry> {
        let name = format!("pvc-{}", meta_str(claim, "uid"));
        let reclaim = self.classes.get(class).and_then(|c| c["reclaimPolicy"].as_str()).unwrap_or("Delete");
        let storage = claim.pointer("/spec/resources/requests/storage").cloned().unwrap_or(json!("1Gi"));
        let volume = json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {ANN_PROVISIONED_BY: PROVISIONER}},
            "spec": {
                "capacity": {"storage": storage},
                "accessModes": claim.pointer("/spec/accessModes").cloned().unwrap_or(json!(["ReadWriteOnce"])),
                "persistentVolumeReclaimPolicy": reclaim,
                "storageClassName": class,
                "volumeMode": claim.pointer("/spec/volumeMode").cloned().unwrap_or(json!("Filesystem")),
                "hostPath": {"path": format!("/var/lib/operator-host-sim/{name}"), "type": ""},
                "claimRef": {
                    "kind": "PersistentVolumeClaim", "apiVersion": "v1",
                    "namespace": meta_str(claim, "namespace"), "name": meta_str(claim, "name"),
                    "uid": meta_str(claim, "uid"), "resourceVersion": meta_str(claim, "resourceVersion"),
                },
            },
        });
        match apiserver::rest::wait(self.core.create(&self.volumes, "", volume, &opts(PROVISIONER))) {
            Ok(v) => Ok(v),
            Err(e) if e.code == 409 => Err(Retry),
            Err(e) => {
                tracing::warn!(volume = %name, error = %e.message, "the simulated provisioner could not create a volume");
                Err(Retry)
            }
        }
    }

    /// Upstream's `bind`: the volume to the claim, then the claim to the volume, then the
    /// claim's status.
    fn bind(&self, claim: &Value, volume: &Value, volumes: &mut [Value]) -> Result<(), Retry> {
        let uid = meta_str(claim, "uid");
        let mut vol = volume.clone();
        if vol.pointer("/spec/claimRef/uid").and_then(Value::as_str) != Some(uid) {
            vol["spec"]["claimRef"] = json!({
                "kind": "PersistentVolumeClaim", "apiVersion": "v1",
                "namespace": meta_str(claim, "namespace"), "name": meta_str(claim, "name"),
                "uid": uid, "resourceVersion": meta_str(claim, "resourceVersion"),
            });
            vol["metadata"].as_object_mut().expect("metadata").entry("annotations").or_insert_with(|| json!({}))[ANN_BOUND_BY_CONTROLLER] =
                json!("yes");
            vol = put(self.core, &self.volumes, vol, Sub::Main, MANAGER)?;
        }
        if vol.pointer("/status/phase").and_then(Value::as_str) != Some("Bound") {
            vol["status"] = json!({"phase": "Bound", "lastPhaseTransitionTime": crate::now(self.core)});
            vol = put(self.core, &self.volumes, vol, Sub::Status, MANAGER)?;
        }
        if let Some(slot) = volumes.iter_mut().find(|v| meta_str(v, "name") == meta_str(&vol, "name")) {
            *slot = vol.clone();
        }
        let mut new = claim.clone();
        let annotations = new["metadata"].as_object_mut().expect("metadata").entry("annotations").or_insert_with(|| json!({}));
        let mut changed = annotations.get(ANN_BIND_COMPLETED) != Some(&json!("yes"));
        annotations[ANN_BIND_COMPLETED] = json!("yes");
        if new.pointer("/spec/volumeName").and_then(Value::as_str).unwrap_or_default().is_empty() {
            new["spec"]["volumeName"] = json!(meta_str(&vol, "name"));
            new["metadata"]["annotations"][ANN_BOUND_BY_CONTROLLER] = json!("yes");
            changed = true;
        }
        if changed {
            new = put(self.core, &self.claims, new, Sub::Main, MANAGER)?;
        }
        let status = json!({
            "phase": "Bound",
            "accessModes": vol.pointer("/spec/accessModes").cloned().unwrap_or(json!([])),
            "capacity": vol.pointer("/spec/capacity").cloned().unwrap_or(json!({})),
        });
        if new.get("status") != Some(&status) {
            new["status"] = status;
            put(self.core, &self.claims, new, Sub::Status, MANAGER)?;
        }
        Ok(())
    }

    /// A volume whose claim is gone: `Released`; then deleted if this provisioner made it and
    /// its reclaim policy is `Delete`.
    fn volume(&self, volume: &Value, claims: &HashMap<&str, &Arc<Value>>) -> Result<(), Retry> {
        let Some(claim_uid) = volume.pointer("/spec/claimRef/uid").and_then(Value::as_str) else { return Ok(()) };
        if claims.contains_key(claim_uid) || deleting(volume) {
            return Ok(());
        }
        let phase = volume.pointer("/status/phase").and_then(Value::as_str).unwrap_or_default();
        if phase != "Released" {
            let mut new = volume.clone();
            new["status"] = json!({"phase": "Released", "lastPhaseTransitionTime": crate::now(self.core)});
            put(self.core, &self.volumes, new, Sub::Status, MANAGER)?;
            return Ok(());
        }
        let ours = volume.pointer("/metadata/annotations").and_then(|a| a.get(ANN_PROVISIONED_BY)).and_then(Value::as_str) == Some(PROVISIONER);
        let delete = volume.pointer("/spec/persistentVolumeReclaimPolicy").and_then(Value::as_str) == Some("Delete");
        if ours && delete {
            let o = DeleteOptions { uid: Some(meta_str(volume, "uid").into()), ..Default::default() };
            match self.core.delete(&self.volumes, "", meta_str(volume, "name"), &o) {
                Ok(_) => {}
                Err(e) if e.code == 404 => {}
                Err(_) => return Err(Retry),
            }
        }
        Ok(())
    }
}

impl Pass<'_> {
    /// kube-controller-manager's `pvc-protection` and `pv-protection` controllers: a deleted
    /// claim loses its finalizer once no scheduled Pod mounts it (upstream's
    /// `podUsesPVCForDeletion`), a deleted volume once it is not `Bound`.
    fn protection(&self, claims: &[Arc<Value>], volumes: &[Value]) -> Result<(), Retry> {
        let pods = builtin(self.core, "", "v1", "pods");
        let deleted_claims: Vec<&Arc<Value>> = claims.iter().filter(|c| deleting(c) && has_finalizer(c, PVC_PROTECTION)).collect();
        let mut failed = false;
        if !deleted_claims.is_empty() {
            let pods = self.core.store.list_shared(&pods.group_resource(), None).0;
            for claim in deleted_claims {
                let (ns, name) = (meta_str(claim, "namespace"), meta_str(claim, "name"));
                let used = pods.iter().any(|p| {
                    meta_str(p, "namespace") == ns
                        && p.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty())
                        && p.pointer("/spec/volumes")
                            .and_then(Value::as_array)
                            .is_some_and(|vs| vs.iter().any(|v| v.pointer("/persistentVolumeClaim/claimName").and_then(Value::as_str) == Some(name)))
                });
                if !used {
                    failed |= self.remove_finalizer(&self.claims, claim, PVC_PROTECTION).is_err();
                }
            }
        }
        for volume in volumes.iter().filter(|v| deleting(v) && has_finalizer(v, PV_PROTECTION)) {
            if volume.pointer("/status/phase").and_then(Value::as_str) != Some("Bound") {
                failed |= self.remove_finalizer(&self.volumes, volume, PV_PROTECTION).is_err();
            }
        }
        if failed { Err(Retry) } else { Ok(()) }
    }

    fn remove_finalizer(&self, res: &Resource, obj: &Value, finalizer: &str) -> Result<(), Retry> {
        let mut new = obj.clone();
        if let Some(list) = new.pointer_mut("/metadata/finalizers").and_then(Value::as_array_mut) {
            list.retain(|f| f != finalizer);
        }
        match put(self.core, res, new, Sub::Main, "pvc-protection-controller") {
            Ok(_) => Ok(()),
            Err(_) if self.core.store.get(&self.core.key(res, meta_str(obj, "namespace"), meta_str(obj, "name"))).is_none() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn has_finalizer(obj: &Value, finalizer: &str) -> bool {
    crate::finalizers(obj).iter().any(|f| f == finalizer)
}

/// The smallest `Available` volume (no `claimRef`) of `class` with the claim's access modes
/// and at least its requested storage (upstream's `findMatchingVolume`, without selectors or
/// node affinity).
fn best_match<'v>(claim: &Value, class: &str, volumes: &'v [Value]) -> Option<&'v Value> {
    let wanted = claim.pointer("/spec/resources/requests/storage").and_then(Value::as_str).and_then(quantity_bytes).unwrap_or(0);
    let modes: Vec<&Value> = claim.pointer("/spec/accessModes").and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default();
    volumes
        .iter()
        .filter(|v| v.pointer("/spec/claimRef").is_none_or(Value::is_null) && !deleting(v))
        .filter(|v| v.pointer("/spec/storageClassName").and_then(Value::as_str).unwrap_or_default() == class)
        .filter(|v| {
            let have = v.pointer("/spec/accessModes").and_then(Value::as_array);
            modes.iter().all(|m| have.is_some_and(|h| h.contains(m)))
        })
        .filter_map(|v| Some((v, v.pointer("/spec/capacity/storage").and_then(Value::as_str).and_then(quantity_bytes)?)))
        .filter(|(_, size)| *size >= wanted)
        .min_by_key(|(v, size)| (*size, meta_str(v, "name").to_string()))
        .map(|(v, _)| v)
}

/// A storage quantity in bytes (`1Gi`, `500Mi`, `10G`, `1024`); `None` when unreadable.
fn quantity_bytes(q: &str) -> Option<u128> {
    let q = q.trim();
    let split = q.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let factor: u128 = match suffix {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    Some((value * factor as f64).ceil() as u128)
}

/// Whether every claim `pod` mounts exists and is bound (the scheduler's `VolumeBinding` check
/// for claims of `Immediate` classes: a Pod with an unbound claim is not scheduled).
pub(crate) fn pod_claims_bound(core: &Core, pod: &Value) -> bool {
    let res = builtin(core, "", "v1", "persistentvolumeclaims");
    let ns = meta_str(pod, "namespace");
    pod.pointer("/spec/volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.pointer("/persistentVolumeClaim/claimName")?.as_str())
        .all(|name| {
            core.store
                .get(&core.key(&res, ns, name))
                .is_some_and(|c| c.pointer("/status/phase").and_then(Value::as_str) == Some("Bound") && !deleting(&c))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_binary_and_decimal_suffixes() {
        assert_eq!(quantity_bytes("1Gi"), Some(1 << 30));
        assert_eq!(quantity_bytes("500M"), Some(500_000_000));
        assert_eq!(quantity_bytes("1024"), Some(1024));
        assert_eq!(quantity_bytes("1.5Ki"), Some(1536));
        assert_eq!(quantity_bytes("1x"), None);
    }

    #[test]
    fn the_smallest_available_volume_of_the_class_that_fits_is_chosen() {
        let claim = json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        let pv = |name: &str, size: &str, class: &str, bound: bool| {
            let mut v = json!({"metadata": {"name": name}, "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": class}});
            if bound {
                v["spec"]["claimRef"] = json!({"name": "other"});
            }
            v
        };
        let volumes = vec![
            pv("big", "10Gi", "slow", false),
            pv("small", "512Mi", "slow", false),
            pv("fits", "2Gi", "slow", false),
            pv("taken", "1Gi", "slow", true),
            pv("other-class", "1Gi", "fast", false),
        ];
        assert_eq!(best_match(&claim, "slow", &volumes).map(|v| meta_str(v, "name")), Some("fits"));
        assert_eq!(best_match(&claim, "none", &volumes), None);
    }
}
