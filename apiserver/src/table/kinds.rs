//! `kubectl get` columns of the kinds beyond the core ones in `table`, ported from upstream's
//! printers (k8s.io/kubernetes `pkg/printers/internalversion/printers.go`, v1.32: the column
//! definitions of `AddHandlers` and the cells of each `printX`): workloads (StatefulSet,
//! DaemonSet, ReplicationController, CronJob, PodTemplate), networking (Ingress, IngressClass,
//! NetworkPolicy, Endpoints, EndpointSlice), storage (PV, PVC, StorageClass, CSI kinds,
//! VolumeAttachment), policy and scheduling (HPA, PDB, PriorityClass, ResourceQuota,
//! RuntimeClass), certificates, admission and flow control, and APIService (kube-aggregator's
//! printer).

use super::cells::{
    access_modes, containers, csr_condition, format_endpoints, format_labels, format_selector, hpa_targets, ingress_hosts, items, list_with_more,
    load_balancer, or, phase, quota_columns, replicas, storage_class,
};
use super::{Columns, age, cell_string, col, human_duration, i, s};
use crate::resources::PrinterColumn;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// The columns of a built-in kind handled here, or `None`.
pub(super) fn columns(group: &str, kind: &str, now: DateTime<Utc>) -> Option<Columns> {
    let name = || col("Name", "string", "name", 0);
    let age_col = || col("Age", "string", "", 0);
    let string = |n: &str| col(n, "string", "", 0);
    let integer = |n: &str| col(n, "integer", "", 0);
    let boolean = |n: &str| col(n, "boolean", "", 0);
    let wide = |n: &str| col(n, "string", "", 1);
    let nm = |o: &Value| json!(s(o, "/metadata/name"));
    let age_of = move |o: &Value| json!(age(o.pointer("/metadata/creationTimestamp"), now));
    let since = move |o: &Value, p: &str| o.pointer(p).filter(|v| !v.is_null()).map_or("<none>".to_string(), |t| age(Some(t), now));
    Some(match (group, kind) {
        ("apps", "StatefulSet") => (
            vec![name(), string("Ready"), age_col(), wide("Containers"), wide("Images")],
            Box::new(move |o| {
                let (names, images) = containers(o, "/spec/template/spec/containers");
                vec![nm(o), json!(format!("{}/{}", i(o, "/status/readyReplicas"), replicas(o))), age_of(o), names, images]
            }),
        ),
        ("apps", "DaemonSet") => {
            let cols = ["Desired", "Current", "Ready", "Up-to-date", "Available"].map(integer);
            let cols = [vec![name()], cols.to_vec(), vec![string("Node Selector"), age_col(), wide("Containers"), wide("Images"), wide("Selector")]]
                .concat();
            (
                cols,
                Box::new(move |o| {
                    let (names, images) = containers(o, "/spec/template/spec/containers");
                    let counts = ["desiredNumberScheduled", "currentNumberScheduled", "numberReady", "updatedNumberScheduled", "numberAvailable"];
                    let mut cells = vec![nm(o)];
                    cells.extend(counts.map(|c| json!(i(o, &format!("/status/{c}")))));
                    cells.extend([
                        json!(format_labels(o.pointer("/spec/template/spec/nodeSelector"))),
                        age_of(o),
                        names,
                        images,
                        json!(format_selector(o.pointer("/spec/selector"))),
                    ]);
                    cells
                }),
            )
        }
        ("", "ReplicationController") => {
            let cols = vec![
                name(),
                integer("Desired"),
                integer("Current"),
                integer("Ready"),
                age_col(),
                wide("Containers"),
                wide("Images"),
                wide("Selector"),
            ];
            (
                cols,
                Box::new(move |o| {
                    let (names, images) = containers(o, "/spec/template/spec/containers");
                    vec![
                        nm(o),
                        json!(replicas(o)),
                        json!(i(o, "/status/replicas")),
                        json!(i(o, "/status/readyReplicas")),
                        age_of(o),
                        names,
                        images,
                        json!(format_labels(o.pointer("/spec/selector"))),
                    ]
                }),
            )
        }
        ("", "PodTemplate") => (
            vec![name(), string("Containers"), string("Images"), string("Pod Labels")],
            Box::new(move |o| {
                let (names, images) = containers(o, "/template/spec/containers");
                vec![nm(o), names, images, json!(format_labels(o.pointer("/template/metadata/labels")))]
            }),
        ),
        ("batch", "CronJob") => {
            let cols = vec![
                name(),
                string("Schedule"),
                string("Timezone"),
                boolean("Suspend"),
                integer("Active"),
                string("Last Schedule"),
                age_col(),
                wide("Containers"),
                wide("Images"),
                wide("Selector"),
            ];
            (
                cols,
                Box::new(move |o| {
                    let (names, images) = containers(o, "/spec/jobTemplate/spec/template/spec/containers");
                    let suspend = match o.pointer("/spec/suspend").and_then(Value::as_bool) {
                        Some(true) => "True",
                        Some(false) => "False",
                        None => "<unset>",
                    };
                    let active = o.pointer("/status/active").and_then(Value::as_array).map_or(0, Vec::len);
                    vec![
                        nm(o),
                        json!(s(o, "/spec/schedule")),
                        json!(or(s(o, "/spec/timeZone"), "<none>")),
                        json!(suspend),
                        json!(active),
                        json!(since(o, "/status/lastScheduleTime")),
                        age_of(o),
                        names,
                        images,
                        json!(format_selector(o.pointer("/spec/jobTemplate/spec/selector"))),
                    ]
                }),
            )
        }
        ("networking.k8s.io", "Ingress") => (
            vec![name(), string("Class"), string("Hosts"), string("Address"), string("Ports"), age_col()],
            Box::new(move |o| {
                let ports = if items(o, "/spec/tls").is_empty() { "80" } else { "80, 443" };
                vec![
                    nm(o),
                    json!(or(s(o, "/spec/ingressClassName"), "<none>")),
                    json!(ingress_hosts(o)),
                    json!(load_balancer(o)),
                    json!(ports),
                    age_of(o),
                ]
            }),
        ),
        ("networking.k8s.io", "IngressClass") => (
            vec![name(), string("Controller"), string("Parameters"), age_col()],
            Box::new(move |o| {
                let parameters = match o.pointer("/spec/parameters") {
                    Some(p) if !p.is_null() => {
                        let group = p.get("apiGroup").and_then(Value::as_str).map(|g| format!(".{g}")).unwrap_or_default();
                        format!("{}{group}/{}", s(p, "/kind"), s(p, "/name"))
                    }
                    _ => "<none>".into(),
                };
                vec![nm(o), json!(s(o, "/spec/controller")), json!(parameters), age_of(o)]
            }),
        ),
        ("networking.k8s.io", "NetworkPolicy") => (
            vec![name(), string("Pod-Selector"), age_col()],
            Box::new(move |o| vec![nm(o), json!(format_selector(o.pointer("/spec/podSelector"))), age_of(o)]),
        ),
        ("", "Endpoints") => (vec![name(), string("Endpoints"), age_col()], Box::new(move |o| vec![nm(o), json!(format_endpoints(o)), age_of(o)])),
        ("discovery.k8s.io", "EndpointSlice") => (
            vec![name(), string("AddressType"), string("Ports"), string("Endpoints"), age_col()],
            Box::new(move |o| {
                let ports: Vec<String> = items(o, "/ports")
                    .iter()
                    .map(|p| {
                        p.get("port")
                            .and_then(Value::as_i64)
                            .map(|n| n.to_string())
                            .or_else(|| p.get("name").and_then(Value::as_str).map(String::from))
                            .unwrap_or("*".into())
                    })
                    .collect();
                let addresses: Vec<String> = items(o, "/endpoints").iter().flat_map(|e| items(e, "/addresses")).map(|a| cell_string(&a)).collect();
                vec![nm(o), json!(s(o, "/addressType")), json!(list_with_more(&ports)), json!(list_with_more(&addresses)), age_of(o)]
            }),
        ),
        ("", "PersistentVolume") => {
            let cols = vec![
                name(),
                string("Capacity"),
                string("Access Modes"),
                string("Reclaim Policy"),
                string("Status"),
                string("Claim"),
                string("StorageClass"),
                string("VolumeAttributesClass"),
                string("Reason"),
                age_col(),
                wide("VolumeMode"),
            ];
            (
                cols,
                Box::new(move |o| {
                    let claim = o
                        .pointer("/spec/claimRef")
                        .filter(|c| !c.is_null())
                        .map(|c| format!("{}/{}", s(c, "/namespace"), s(c, "/name")))
                        .unwrap_or_default();
                    vec![
                        nm(o),
                        json!(s(o, "/spec/capacity/storage")),
                        json!(access_modes(o, "/spec/accessModes")),
                        json!(s(o, "/spec/persistentVolumeReclaimPolicy")),
                        json!(phase(o)),
                        json!(claim),
                        json!(storage_class(o)),
                        json!(or(s(o, "/spec/volumeAttributesClassName"), "<unset>")),
                        json!(s(o, "/status/reason")),
                        age_of(o),
                        json!(or(s(o, "/spec/volumeMode"), "<unset>")),
                    ]
                }),
            )
        }
        ("", "PersistentVolumeClaim") => {
            let cols = vec![
                name(),
                string("Status"),
                string("Volume"),
                string("Capacity"),
                string("Access Modes"),
                string("StorageClass"),
                string("VolumeAttributesClass"),
                age_col(),
                wide("VolumeMode"),
            ];
            (
                cols,
                Box::new(move |o| {
                    // Capacity and modes are the bound volume's, shown once bound.
                    let bound = !s(o, "/spec/volumeName").is_empty();
                    let (capacity, modes) =
                        if bound { (s(o, "/status/capacity/storage"), access_modes(o, "/status/accessModes")) } else { Default::default() };
                    vec![
                        nm(o),
                        json!(phase(o)),
                        json!(s(o, "/spec/volumeName")),
                        json!(capacity),
                        json!(modes),
                        json!(storage_class(o)),
                        json!(or(s(o, "/spec/volumeAttributesClassName"), "<unset>")),
                        age_of(o),
                        json!(or(s(o, "/spec/volumeMode"), "<unset>")),
                    ]
                }),
            )
        }
        ("storage.k8s.io", "StorageClass") => {
            let cols =
                vec![name(), string("Provisioner"), string("ReclaimPolicy"), string("VolumeBindingMode"), string("AllowVolumeExpansion"), age_col()];
            (
                cols,
                Box::new(move |o| {
                    let default = ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"]
                        .iter()
                        .any(|a| o.pointer("/metadata/annotations").and_then(|m| m.get(*a)).and_then(Value::as_str) == Some("true"));
                    let shown = if default { format!("{} (default)", s(o, "/metadata/name")) } else { s(o, "/metadata/name") };
                    vec![
                        json!(shown),
                        json!(s(o, "/provisioner")),
                        json!(or(s(o, "/reclaimPolicy"), "Delete")),
                        json!(or(s(o, "/volumeBindingMode"), "Immediate")),
                        json!(o.get("allowVolumeExpansion").and_then(Value::as_bool).unwrap_or(false)),
                        age_of(o),
                    ]
                }),
            )
        }
        ("storage.k8s.io", "CSIDriver") => {
            let cols = vec![
                name(),
                boolean("AttachRequired"),
                boolean("PodInfoOnMount"),
                boolean("StorageCapacity"),
                string("TokenRequests"),
                boolean("RequiresRepublish"),
                string("Modes"),
                age_col(),
            ];
            (
                cols,
                Box::new(move |o| {
                    let flag = |p: &str, default: bool| json!(o.pointer(p).and_then(Value::as_bool).unwrap_or(default));
                    let tokens = o
                        .pointer("/spec/tokenRequests")
                        .and_then(Value::as_array)
                        .map_or("<unset>".to_string(), |t| t.iter().map(|r| s(r, "/audience")).collect::<Vec<_>>().join(","));
                    let modes: Vec<String> = items(o, "/spec/volumeLifecycleModes").iter().map(cell_string).collect();
                    vec![
                        nm(o),
                        flag("/spec/attachRequired", true),
                        flag("/spec/podInfoOnMount", false),
                        flag("/spec/storageCapacity", false),
                        json!(tokens),
                        flag("/spec/requiresRepublish", false),
                        json!(or(modes.join(","), "<none>")),
                        age_of(o),
                    ]
                }),
            )
        }
        ("storage.k8s.io", "CSINode") => {
            (vec![name(), integer("Drivers"), age_col()], Box::new(move |o| vec![nm(o), json!(items(o, "/spec/drivers").len()), age_of(o)]))
        }
        ("storage.k8s.io", "CSIStorageCapacity") => (
            vec![name(), string("StorageClassName"), string("Capacity")],
            Box::new(move |o| vec![nm(o), json!(s(o, "/storageClassName")), json!(or(s(o, "/capacity"), "<unset>"))]),
        ),
        ("storage.k8s.io", "VolumeAttachment") => {
            let cols = vec![name(), col("Attacher", "string", "name", 0), string("PV"), string("Node"), boolean("Attached"), age_col()];
            (
                cols,
                Box::new(move |o| {
                    vec![
                        nm(o),
                        json!(s(o, "/spec/attacher")),
                        json!(s(o, "/spec/source/persistentVolumeName")),
                        json!(s(o, "/spec/nodeName")),
                        json!(o.pointer("/status/attached").and_then(Value::as_bool).unwrap_or(false)),
                        age_of(o),
                    ]
                }),
            )
        }
        ("autoscaling", "HorizontalPodAutoscaler") => {
            let cols = ["Reference", "Targets", "MinPods", "MaxPods", "Replicas"].map(string);
            (
                [vec![name()], cols.to_vec(), vec![age_col()]].concat(),
                Box::new(move |o| {
                    let reference = format!("{}/{}", s(o, "/spec/scaleTargetRef/kind"), s(o, "/spec/scaleTargetRef/name"));
                    let min = o.pointer("/spec/minReplicas").and_then(Value::as_i64).map_or("<unset>".to_string(), |m| m.to_string());
                    vec![
                        nm(o),
                        json!(reference),
                        json!(hpa_targets(o)),
                        json!(min),
                        json!(i(o, "/spec/maxReplicas")),
                        json!(i(o, "/status/currentReplicas")),
                        age_of(o),
                    ]
                }),
            )
        }
        ("policy", "PodDisruptionBudget") => {
            let cols = vec![name(), string("Min Available"), string("Max Unavailable"), integer("Allowed Disruptions"), age_col()];
            (
                cols,
                Box::new(move |o| {
                    let int_or_string = |p: &str| o.pointer(p).filter(|v| !v.is_null()).map_or("N/A".to_string(), cell_string);
                    vec![
                        nm(o),
                        json!(int_or_string("/spec/minAvailable")),
                        json!(int_or_string("/spec/maxUnavailable")),
                        json!(i(o, "/status/disruptionsAllowed")),
                        age_of(o),
                    ]
                }),
            )
        }
        ("scheduling.k8s.io", "PriorityClass") => (
            vec![name(), integer("Value"), boolean("Global-Default"), age_col(), string("PreemptionPolicy")],
            Box::new(move |o| {
                vec![
                    nm(o),
                    json!(i(o, "/value")),
                    json!(o.get("globalDefault").and_then(Value::as_bool).unwrap_or(false)),
                    age_of(o),
                    json!(s(o, "/preemptionPolicy")),
                ]
            }),
        ),
        ("", "ResourceQuota") => (
            vec![name(), string("Request"), string("Limit"), age_col()],
            Box::new(move |o| {
                let (request, limit) = quota_columns(o);
                vec![nm(o), json!(request), json!(limit), age_of(o)]
            }),
        ),
        ("node.k8s.io", "RuntimeClass") => {
            (vec![name(), string("Handler"), age_col()], Box::new(move |o| vec![nm(o), json!(s(o, "/handler")), age_of(o)]))
        }
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            let cols = vec![name(), age_col(), string("SignerName"), string("Requestor"), string("RequestedDuration"), string("Condition")];
            (
                cols,
                Box::new(move |o| {
                    let duration = o.pointer("/spec/expirationSeconds").and_then(Value::as_i64).map_or("<none>".to_string(), human_duration);
                    vec![
                        nm(o),
                        age_of(o),
                        json!(or(s(o, "/spec/signerName"), "<none>")),
                        json!(s(o, "/spec/username")),
                        json!(duration),
                        json!(csr_condition(o)),
                    ]
                }),
            )
        }
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration") => {
            (vec![name(), integer("Webhooks"), age_col()], Box::new(move |o| vec![nm(o), json!(items(o, "/webhooks").len()), age_of(o)]))
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => (
            vec![name(), integer("Validations"), string("ParamKind"), age_col()],
            Box::new(move |o| {
                let param = o
                    .pointer("/spec/paramKind")
                    .filter(|p| !p.is_null())
                    .map_or("<unset>".to_string(), |p| format!("{}/{}", s(p, "/apiVersion"), s(p, "/kind")));
                vec![nm(o), json!(items(o, "/spec/validations").len()), json!(param), age_of(o)]
            }),
        ),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => (
            vec![name(), string("PolicyName"), string("ParamRef"), age_col()],
            Box::new(move |o| {
                let param = match o.pointer("/spec/paramRef").filter(|p| !p.is_null()) {
                    Some(p) if !s(p, "/name").is_empty() => format!("{}/{}", or(s(p, "/namespace"), "*"), s(p, "/name")),
                    Some(p) if p.get("selector").is_some() => format_selector(p.get("selector")),
                    _ => "<unset>".into(),
                };
                vec![nm(o), json!(s(o, "/spec/policyName")), json!(param), age_of(o)]
            }),
        ),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => {
            let cols =
                vec![name(), string("PriorityLevel"), string("MatchingPrecedence"), string("DistinguisherMethod"), age_col(), string("MissingPL")];
            (
                cols,
                Box::new(move |o| {
                    let dangling = items(o, "/status/conditions")
                        .into_iter()
                        .find(|c| s(c, "/type") == "Dangling")
                        .map_or("?".to_string(), |c| s(&c, "/status"));
                    vec![
                        nm(o),
                        json!(s(o, "/spec/priorityLevelConfiguration/name")),
                        json!(i(o, "/spec/matchingPrecedence").to_string()),
                        json!(or(s(o, "/spec/distinguisherMethod/type"), "*")),
                        age_of(o),
                        json!(dangling),
                    ]
                }),
            )
        }
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => {
            let cols = ["Type", "NominalConcurrencyShares", "Queues", "HandSize", "QueueLengthLimit"].map(string);
            (
                [vec![name()], cols.to_vec(), vec![age_col()]].concat(),
                Box::new(move |o| {
                    let none = || json!("<none>");
                    let limited = o.pointer("/spec/limited").filter(|l| !l.is_null());
                    let shares = limited.and_then(|l| l.get("nominalConcurrencyShares")).map_or_else(none, |v| json!(cell_string(v)));
                    let queuing = limited.and_then(|l| l.pointer("/limitResponse/queuing")).filter(|q| !q.is_null());
                    let q = |f: &str| queuing.and_then(|q| q.get(f)).map_or_else(none, |v| json!(cell_string(v)));
                    vec![nm(o), json!(s(o, "/spec/type")), shares, q("queues"), q("handSize"), q("queueLengthLimit"), age_of(o)]
                }),
            )
        }
        ("apiregistration.k8s.io", "APIService") => (
            vec![name(), string("Service"), string("Available"), age_col()],
            Box::new(move |o| {
                let service = o
                    .pointer("/spec/service")
                    .filter(|v| !v.is_null())
                    .map_or("Local".to_string(), |v| format!("{}/{}", s(v, "/namespace"), s(v, "/name")));
                let available =
                    items(o, "/status/conditions").into_iter().find(|c| s(c, "/type") == "Available").map_or("Unknown".to_string(), |c| {
                        if s(&c, "/status") == "True" { "True".to_string() } else { format!("{} ({})", s(&c, "/status"), s(&c, "/reason")) }
                    });
                vec![nm(o), json!(service), json!(available), age_of(o)]
            }),
        ),
        _ => return None,
    })
}

/// The default table of a kind without a printer (upstream's `DefaultTableConvertor`).
pub(super) fn default_columns() -> Vec<PrinterColumn> {
    vec![col("Name", "string", "name", 0), col("Created At", "date", "", 0)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells(group: &str, kind: &str, o: Value) -> Vec<Value> {
        let (_, row) = columns(group, kind, Utc::now()).unwrap();
        row(&o)
    }

    #[test]
    fn cells_follow_upstreams_printers() {
        let ep = json!({"metadata": {"name": "e"}, "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]}]});
        assert_eq!(cells("", "Endpoints", ep)[1], "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more...");
        let hpa = json!({"metadata": {"name": "h"}, "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}});
        let row = cells("autoscaling", "HorizontalPodAutoscaler", hpa);
        assert_eq!(row[1..6], [json!("Deployment/web"), json!("cpu: <unknown>/80%"), json!("<unset>"), json!(3), json!(0)]);
        let quota = json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "2", "limits.cpu": "1", "cpu": "1"}}, "status": {"used": {"pods": "1"}, "hard": {"pods": "2"}}});
        assert_eq!(cells("", "ResourceQuota", quota)[1..3], [json!("cpu: 0/0, pods: 1/2"), json!("limits.cpu: 0/0")]);
        let pvc = json!({"metadata": {"name": "c"}, "spec": {"volumeName": "pv1", "storageClassName": "fast"},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"]}});
        assert_eq!(cells("", "PersistentVolumeClaim", pvc)[1..6], [json!("Bound"), json!("pv1"), json!("1Gi"), json!("RWO,RWX"), json!("fast")]);
        let csr = json!({"metadata": {"name": "c"}, "spec": {"signerName": "example.com/s", "username": "alice"}, "status": {"conditions": [{"type": "Approved"}]}});
        assert_eq!(
            cells("certificates.k8s.io", "CertificateSigningRequest", csr)[2..],
            [json!("example.com/s"), json!("alice"), json!("<none>"), json!("Approved")]
        );
    }
}
