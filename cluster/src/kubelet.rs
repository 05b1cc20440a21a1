//! Fake Nodes, a scheduler and a kwok-style kubelet.
//!
//! - [`create_nodes`] makes `node-1`..`node-N` (Ready, with addresses, capacity and node info).
//! - The scheduler binds every unscheduled Pod (default scheduler) to the least-loaded node
//!   through `pods/binding`, which sets `PodScheduled`, once every PersistentVolumeClaim it
//!   mounts is bound (a Pod with an unbound claim stays Pending, as with `Immediate` classes).
//! - The kubelet starts Pods on its nodes: phase `Running`, `hostIP`, `podIP(s)`, `startTime`,
//!   `containerStatuses` built from the spec's containers (running since now, started, not yet
//!   ready) and the conditions `PodReadyToStartContainers`, `Initialized`, `ContainersReady`,
//!   `Ready`, `PodScheduled`; after [`ClusterConfig::ready_after`] (or the Pod's
//!   `sim.operator-host.dev/ready-after`) the containers and the Pod become Ready. The
//!   `never-ready`, `restarts` and `fail` annotations change the outcome (see [`super`]).
//! - Deleted Pods carry `deletionTimestamp` and `deletionGracePeriodSeconds` (the API server's
//!   graceful deletion, on while the kubelet runs); the kubelet removes them once the grace
//!   period has passed. It does so for every Pod, whichever node it is bound to, as the pod
//!   garbage collector would for a node that does not exist.

use super::{ClusterConfig, Next, annotation, builtin, deleting, flag, meta_str, now, opts, parse_duration};
use apiserver::rest::{Core, DeleteOptions, Sub};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tokio::time::Instant;

const MANAGER: &str = "kubelet";

/// Create (or keep) the fake nodes `node-1`..`node-count`; returns their names.
pub fn create_nodes(core: &Core, count: usize) -> Vec<String> {
    let res = builtin(core, "", "v1", "nodes");
    let ts = now(core);
    (1..=count)
        .map(|i| {
            let name = format!("node-{i}");
            let cond = |t: &str, status: &str, reason: &str, message: &str| {
                json!({"type": t, "status": status, "reason": reason, "message": message, "lastHeartbeatTime": ts, "lastTransitionTime": ts})
            };
            let node = json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64", "type": "kwok",
                    },
                    "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
                },
                "spec": {"podCIDR": format!("10.244.{i}.0/24"), "podCIDRs": [format!("10.244.{i}.0/24")]},
                "status": {
                    "phase": "Running",
                    "addresses": [{"type": "InternalIP", "address": node_ip(i)}, {"type": "Hostname", "address": name}],
                    "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
                    "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
                    "conditions": [
                        cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                        cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                        cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                        cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
                    ],
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                    "nodeInfo": {
                        "architecture": "amd64", "operatingSystem": "linux", "osImage": "kwok (simulated)",
                        "kernelVersion": "", "kubeletVersion": "v1.36.3", "kubeProxyVersion": "",
                        "containerRuntimeVersion": "sim://0.1.0", "machineID": "", "systemUUID": "", "bootID": "",
                    },
                },
            });
            if core.store.get(&core.key(&res, "", &name)).is_none()
                && let Err(e) = apiserver::rest::wait(core.create(&res, "", node, &opts(MANAGER)))
                && e.code != 409
            {
                tracing::warn!(node = %name, error = %e.message, "could not create a fake node");
            }
            name
        })
        .collect()
}

fn node_ip(i: usize) -> String {
    format!("10.0.{}.{}", i / 250, i % 250 + 1)
}

/// Whether a commit concerns the scheduler or kubelet: Pods, Nodes, and claims (a Pod waits
/// for its claims to be bound).
pub(crate) fn relevant(e: &apiserver::store::Event) -> bool {
    e.key.gr.group.is_empty() && matches!(e.key.gr.resource.as_str(), "pods" | "nodes" | "persistentvolumeclaims")
}

#[derive(Debug)]
struct Started {
    /// When the ready delay runs out.
    ready_at: Instant,
    /// The final state (Ready, Failed, or staying not ready) has been written.
    settled: bool,
}

/// The scheduler and kubelet of the fake nodes.
#[derive(Debug)]
pub struct Kubelet {
    nodes: Vec<String>,
    config: ClusterConfig,
    started: HashMap<String, Started>,
    /// uid → when the grace period of a deleted Pod runs out.
    terminating: HashMap<String, Instant>,
    next_ip: u32,
}

impl Kubelet {
    /// A kubelet for these nodes.
    pub fn new(nodes: Vec<String>, config: ClusterConfig) -> Self {
        Kubelet { nodes, config, started: HashMap::new(), terminating: HashMap::new(), next_ip: 0 }
    }

    fn pod_ip(&mut self) -> String {
        self.next_ip += 1;
        let n = self.next_ip;
        format!("10.244.{}.{}", (n / 250) % 256, n % 250 + 2)
    }

    /// One pass over every Pod.
    pub(crate) fn pass(&mut self, core: &Core) -> Next {
        let mut next = Next::default();
        let res = builtin(core, "", "v1", "pods");
        let pods = core.store.list_shared(&res.group_resource(), None).0;
        let clock = Instant::now();
        let live: HashSet<&str> = pods.iter().map(|p| meta_str(p, "uid")).collect();
        self.started.retain(|uid, _| live.contains(uid.as_str()));
        self.terminating.retain(|uid, _| live.contains(uid.as_str()));

        let nodes = self.nodes.clone();
        let mut load: HashMap<&str, usize> = nodes.iter().map(|n| (n.as_str(), 0)).collect();
        for p in &pods {
            if let Some(c) = p.pointer("/spec/nodeName").and_then(Value::as_str).and_then(|n| load.get_mut(n)) {
                *c += 1;
            }
        }

        for pod in &pods {
            let (ns, name, uid) = (meta_str(pod, "namespace"), meta_str(pod, "name"), meta_str(pod, "uid"));
            let node = pod.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default();

            if deleting(pod) {
                let grace = pod.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(0);
                if grace <= 0 {
                    continue; // waiting for finalizers only
                }
                let at = *self.terminating.entry(uid.to_string()).or_insert(clock + Duration::from_secs(grace as u64));
                if clock >= at {
                    let o = DeleteOptions { grace_period: Some(0), uid: Some(uid.to_string()), ..Default::default() };
                    match core.delete(&res, ns, name, &o) {
                        Ok(_) => {}
                        Err(e) if e.code == 404 || e.code == 409 => {}
                        Err(e) => {
                            tracing::warn!(pod = name, error = %e.message, "kubelet could not remove a pod");
                            next.retry = true;
                        }
                    }
                } else {
                    next.at(at);
                }
                continue;
            }

            if node.is_empty() {
                let scheduler = pod.pointer("/spec/schedulerName").and_then(Value::as_str).unwrap_or("default-scheduler");
                // The scheduler's VolumeBinding filter: claims of `Immediate` classes must be bound first.
                if scheduler != "default-scheduler" || !super::storage::pod_claims_bound(core, pod) {
                    continue;
                }
                let Some((&target, _)) = load.iter().min_by_key(|(n, c)| (**c, **n)) else { continue };
                let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": ns}, "target": {"apiVersion": "v1", "kind": "Node", "name": target}});
                match apiserver::rest::wait(core.bind(&res, ns, name, &binding, &opts("default-scheduler"))) {
                    Ok(_) => *load.get_mut(target).expect("known node") += 1,
                    Err(e) if e.code == 404 || e.code == 409 => {}
                    Err(e) => {
                        tracing::warn!(pod = name, error = %e.message, "scheduler could not bind a pod");
                        next.retry = true;
                    }
                }
                continue;
            }
            let Some(node_index) = nodes.iter().position(|n| n == node) else { continue };
            let phase = pod.pointer("/status/phase").and_then(Value::as_str).unwrap_or("Pending");
            if matches!(phase, "Succeeded" | "Failed") {
                continue;
            }
            let ready_after = annotation(pod, "ready-after").and_then(parse_duration).unwrap_or(self.config.ready_after);
            if phase != "Running" {
                let ip = self.pod_ip();
                let status = start_status(pod, &node_ip(node_index + 1), &ip, &now(core));
                if !write_status(core, &res, pod, status) {
                    next.retry = true;
                    continue;
                }
                self.started.insert(uid.to_string(), Started { ready_at: clock + ready_after, settled: false });
            }
            let st = self.started.entry(uid.to_string()).or_insert(Started { ready_at: clock + ready_after, settled: false });
            if st.settled {
                continue;
            }
            if clock < st.ready_at {
                let at = st.ready_at;
                next.at(at);
                continue;
            }
            let current = core.store.get(&core.key(&res, ns, name)).unwrap_or_else(|| Value::clone(pod));
            let final_status = if flag(annotation(pod, "fail")) {
                Some(failed_status(&current, &now(core)))
            } else if flag(annotation(pod, "never-ready")) || restarts(pod) > 0 {
                None
            } else {
                Some(ready_status(&current, &now(core)))
            };
            if final_status.is_none_or(|s| write_status(core, &res, &current, s)) {
                st.settled = true;
            } else {
                next.retry = true;
            }
        }
        next
    }
}

fn restarts(pod: &Value) -> u64 {
    annotation(pod, "restarts").and_then(|r| r.trim().parse().ok()).unwrap_or(0)
}

fn write_status(core: &Core, res: &apiserver::resources::Resource, pod: &Value, status: Value) -> bool {
    let mut new = pod.clone();
    new["status"] = status;
    match apiserver::rest::wait(core.update(res, meta_str(pod, "namespace"), meta_str(pod, "name"), new, Sub::Status, &opts(MANAGER))) {
        Ok(_) => true,
        Err(e) if e.code == 404 => true,
        Err(e) => {
            tracing::debug!(error = %e.message, "kubelet could not write pod status");
            false
        }
    }
}

fn condition(t: &str, ok: bool, reason: Option<&str>, message: Option<String>, ts: &str) -> Value {
    let mut c = json!({"type": t, "status": if ok { "True" } else { "False" }, "lastProbeTime": null, "lastTransitionTime": ts});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    c
}

fn containers(pod: &Value, field: &str) -> Vec<Value> {
    pod.pointer(&format!("/spec/{field}")).and_then(Value::as_array).cloned().unwrap_or_default()
}

fn container_id(pod: &Value, name: &str) -> String {
    format!("sim://{}-{name}", meta_str(pod, "uid").split('-').next().unwrap_or_default())
}

fn names(pod: &Value) -> String {
    containers(pod, "containers").iter().filter_map(|c| c["name"].as_str()).collect::<Vec<_>>().join(" ")
}

/// Conditions for a running pod whose containers are (not) ready.
fn conditions(pod: &Value, ready: bool, ts: &str) -> Vec<Value> {
    let scheduled_at = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
        .and_then(|c| c["lastTransitionTime"].as_str())
        .unwrap_or(ts)
        .to_string();
    let unready = (!ready).then(|| format!("containers with unready status: [{}]", names(pod)));
    let reason = (!ready).then_some("ContainersNotReady");
    vec![
        condition("PodReadyToStartContainers", true, None, None, ts),
        condition("Initialized", true, None, None, ts),
        condition("Ready", ready, reason, unready.clone(), ts),
        condition("ContainersReady", ready, reason, unready, ts),
        condition("PodScheduled", true, None, None, &scheduled_at),
    ]
}

fn start_status(pod: &Value, host_ip: &str, pod_ip: &str, ts: &str) -> Value {
    let restarts = restarts(pod);
    let statuses: Vec<Value> = containers(pod, "containers")
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default();
            let mut s = json!({
                "name": name, "image": c["image"], "imageID": "", "containerID": container_id(pod, name),
                "ready": false, "started": true, "restartCount": 0, "state": {"running": {"startedAt": ts}},
            });
            if restarts > 0 {
                s["started"] = json!(false);
                s["restartCount"] = json!(restarts);
                s["state"] = json!({"waiting": {"reason": "CrashLoopBackOff", "message": format!(
                    "back-off 5m0s restarting failed container={name} pod={}_{}({})", meta_str(pod, "name"), meta_str(pod, "namespace"), meta_str(pod, "uid")
                )}});
                s["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": ts, "finishedAt": ts, "containerID": container_id(pod, name)}});
            }
            s
        })
        .collect();
    let init: Vec<Value> = containers(pod, "initContainers")
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap_or_default();
            json!({
                "name": name, "image": c["image"], "imageID": "", "containerID": container_id(pod, name),
                "ready": true, "started": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": ts, "finishedAt": ts, "containerID": container_id(pod, name)}},
            })
        })
        .collect();
    let mut status = json!({
        "phase": "Running",
        "conditions": conditions(pod, false, ts),
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
        "startTime": ts,
        "containerStatuses": statuses,
        "qosClass": pod.pointer("/status/qosClass").cloned().unwrap_or(json!("BestEffort")),
    });
    if !init.is_empty() {
        status["initContainerStatuses"] = json!(init);
    }
    status
}

fn ready_status(pod: &Value, ts: &str) -> Value {
    let mut status = pod["status"].clone();
    status["conditions"] = json!(conditions(pod, true, ts));
    if let Some(cs) = status.get_mut("containerStatuses").and_then(Value::as_array_mut) {
        for c in cs {
            c["ready"] = json!(true);
        }
    }
    status
}

fn failed_status(pod: &Value, ts: &str) -> Value {
    let mut status = pod["status"].clone();
    status["phase"] = json!("Failed");
    let mut conds = conditions(pod, false, ts);
    for c in &mut conds {
        match c["type"].as_str() {
            Some("Ready" | "ContainersReady") => c["reason"] = json!("PodFailed"),
            Some("PodReadyToStartContainers") => c["status"] = json!("False"),
            _ => {}
        }
        if let Some(m) = c.as_object_mut() {
            m.remove("message");
        }
    }
    status["conditions"] = json!(conds);
    if let Some(cs) = status.get_mut("containerStatuses").and_then(Value::as_array_mut) {
        for c in cs {
            let started = c.pointer("/state/running/startedAt").cloned().unwrap_or(json!(ts));
            c["ready"] = json!(false);
            c["started"] = json!(false);
            c["state"] =
                json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": started, "finishedAt": ts, "containerID": c["containerID"]}});
        }
    }
    status
}
