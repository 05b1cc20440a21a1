//! Storage for the real control plane: a default StorageClass and an external provisioner.
//!
//! kube-controller-manager runs the PersistentVolume controller (the binder), but nothing on
//! these machines provisions volumes: kwok plays the kubelet and there is no CSI driver. So a
//! claim of a class whose provisioner is external waits, annotated by the binder with
//! `volume.kubernetes.io/storage-provisioner: <provisioner>`, until someone makes a volume.
//! [`Provisioner`] is that someone, as sig-storage's external provisioners are: it watches
//! claims (through the real kubectl's `get --watch -o json`) and, for each unbound claim
//! annotated with [`PROVISIONER`], creates a PersistentVolume `pvc-<claim uid>` of the requested
//! size with `claimRef` to the claim and `pv.kubernetes.io/provisioned-by`; the binder then
//! binds them (`Bound` both ways, `pv.kubernetes.io/bind-completed`). It also watches volumes
//! and deletes the `Released` ones it provisioned whose reclaim policy is `Delete`.
//!
//! The class is `standard`, default, `volumeBindingMode: Immediate`: kube-scheduler then
//! schedules a Pod only once its claims are bound, and needs no CSI or node topology from kwok
//! (`WaitForFirstConsumer` would have the scheduler pick a node first and hand provisioning a
//! `volume.kubernetes.io/selected-node`, which this provisioner does not need).

use operator_test_kit::Kubectl;
use serde_json::{Value, json};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The provisioner's name, on the default StorageClass and on the volumes it makes.
pub const PROVISIONER: &str = "real-cluster.operator-host.dev/hostpath";

/// The default StorageClass, as YAML for `kubectl apply`.
pub fn default_class_yaml() -> String {
    format!(
        r#"apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: {PROVISIONER}
reclaimPolicy: Delete
volumeBindingMode: Immediate
"#
    )
}

/// The running provisioner: two watch loops on threads. Stopped on drop.
pub struct Provisioner {
    stop: Arc<AtomicBool>,
    watches: Arc<Mutex<Vec<Child>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Provisioner {
    /// Start watching claims and volumes as `kubectl` (the administrator).
    pub fn start(kubectl: Kubectl) -> Provisioner {
        let stop = Arc::new(AtomicBool::new(false));
        let watches = Arc::new(Mutex::new(Vec::new()));
        let threads = [("persistentvolumeclaims", provision as fn(&Kubectl, &Value)), ("persistentvolumes", reclaim)]
            .into_iter()
            .map(|(resource, handle)| {
                let (kubectl, stop, watches) = (kubectl.clone(), stop.clone(), watches.clone());
                std::thread::spawn(move || watch(&kubectl, resource, &stop, &watches, handle))
            })
            .collect();
        Provisioner { stop, watches, threads }
    }
}

impl Drop for Provisioner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for child in self.watches.lock().expect("watch list").iter_mut() {
            let _ = child.kill();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// `kubectl get <resource> -A --watch -o json`, each object to `handle`; the watch is started
/// again when it ends (the API server restarted, the watch timed out) until stopped.
fn watch(kubectl: &Kubectl, resource: &str, stop: &AtomicBool, watches: &Mutex<Vec<Child>>, handle: fn(&Kubectl, &Value)) {
    while !stop.load(Ordering::SeqCst) {
        let child = kubectl
            .command(&["get", resource, "--all-namespaces", "--watch", "-o", "json"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let Ok(mut child) = child else { return };
        let stdout = child.stdout.take().expect("piped stdout");
        {
            let mut list = watches.lock().expect("watch list");
            list.retain_mut(|c| c.try_wait().ok().flatten().is_none());
            list.push(child);
        }
        if stop.load(Ordering::SeqCst) {
            break; // stopped between the check and the push: the kill may have missed it
        }
        for object in serde_json::Deserializer::from_reader(std::io::BufReader::new(stdout)).into_iter::<Value>() {
            match object {
                Ok(o) => handle(kubectl, &o),
                Err(_) => break,
            }
        }
        if !stop.load(Ordering::SeqCst) {
            // The watch ended (e.g. the API server is restarting): back off before watching again.
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    for child in watches.lock().expect("watch list").iter_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or_default()
}

/// A volume for an unbound claim annotated for this provisioner.
fn provision(kubectl: &Kubectl, claim: &Value) {
    let ours = text(claim, "/metadata/annotations/volume.kubernetes.io~1storage-provisioner") == PROVISIONER;
    if !ours || !text(claim, "/spec/volumeName").is_empty() || claim.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let name = format!("pvc-{}", text(claim, "/metadata/uid"));
    let volume = json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER}},
        "spec": {
            "capacity": {"storage": claim.pointer("/spec/resources/requests/storage").cloned().unwrap_or(json!("1Gi"))},
            "accessModes": claim.pointer("/spec/accessModes").cloned().unwrap_or(json!(["ReadWriteOnce"])),
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": text(claim, "/spec/storageClassName"),
            "volumeMode": claim.pointer("/spec/volumeMode").cloned().unwrap_or(json!("Filesystem")),
            "hostPath": {"path": format!("/var/lib/real-cluster/{name}")},
            "claimRef": {
                "kind": "PersistentVolumeClaim", "apiVersion": "v1",
                "namespace": text(claim, "/metadata/namespace"), "name": text(claim, "/metadata/name"),
                "uid": text(claim, "/metadata/uid"), "resourceVersion": text(claim, "/metadata/resourceVersion"),
            },
        },
    });
    let out = kubectl.run_stdin(&["create", "-f", "-"], Some(volume.to_string().as_bytes()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && !stderr.contains("AlreadyExists") && !stderr.contains("already exists") {
        eprintln!("real-cluster provisioner: could not create {name}: {stderr}");
    }
}

/// Delete a released volume this provisioner made, when its reclaim policy says so.
fn reclaim(kubectl: &Kubectl, volume: &Value) {
    let ours = text(volume, "/metadata/annotations/pv.kubernetes.io~1provisioned-by") == PROVISIONER;
    let released = text(volume, "/status/phase") == "Released";
    if ours && released && text(volume, "/spec/persistentVolumeReclaimPolicy") == "Delete" {
        kubectl.run(&["delete", "pv", text(volume, "/metadata/name"), "--wait=false", "--ignore-not-found"]);
    }
}
