//! `meta.k8s.io/v1 Table` output (what `kubectl get` asks for): the columns a real cluster prints
//! for the built-in kinds, and Name + `additionalPrinterColumns` (or Name + Age) for CRDs.

mod cells;
mod kinds;

use crate::resources::{PrinterColumn, Resource};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// `duration.HumanDuration` from apimachinery.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    let y = d / 365;
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 { format!("{m}m") } else { format!("{m}m{}s", s % 60) }
    } else if h < 3 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 { format!("{h}h") } else { format!("{h}h{}m", m % 60) }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 192 {
        if h % 24 == 0 { format!("{d}d") } else { format!("{d}d{}h", h % 24) }
    } else if y < 2 {
        format!("{d}d")
    } else if y < 8 {
        if d % 365 == 0 { format!("{y}y") } else { format!("{y}y{}d", d % 365) }
    } else {
        format!("{y}y")
    }
}

fn age(ts: Option<&Value>, now: DateTime<Utc>) -> String {
    match ts.and_then(Value::as_str).and_then(|s| DateTime::parse_from_rfc3339(s).ok()) {
        Some(t) => human_duration((now - t.with_timezone(&Utc)).num_seconds()),
        None => "<unknown>".into(),
    }
}

/// Evaluate a printer-column JSONPath (`.a.b`, `.a[0].b`, `.a[*].b`, `.a[?(@.k=="v")].b`).
pub fn json_path(obj: &Value, path: &str) -> Vec<Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}').trim_start_matches('$');
    let mut current = vec![obj.clone()];
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let field = &r[..end];
            current = current.iter().filter_map(|v| v.get(field).cloned()).collect();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').unwrap_or(r.len());
            let sel = &r[..end];
            rest = r.get(end + 1..).unwrap_or("");
            let mut next = vec![];
            for v in &current {
                let Some(items) = v.as_array() else { continue };
                if sel == "*" {
                    next.extend(items.iter().cloned());
                } else if let Ok(i) = sel.parse::<usize>() {
                    next.extend(items.get(i).cloned());
                } else if let Some(f) = sel.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')'))
                    && let Some((k, want)) = f.split_once("==")
                {
                    let want = want.trim().trim_matches('"').trim_matches('\'');
                    next.extend(
                        items.iter().filter(|i| json_path(i, &format!(".{}", k.trim())).first().map(cell_string).as_deref() == Some(want)).cloned(),
                    );
                }
            }
            current = next;
        } else {
            break;
        }
    }
    current
}

fn cell_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn col(name: &str, type_: &str, format: &str, priority: i64) -> PrinterColumn {
    PrinterColumn { name: name.into(), type_: type_.into(), format: format.into(), description: String::new(), priority, json_path: String::new() }
}

fn s(v: &Value, p: &str) -> String {
    v.pointer(p).map(cell_string).unwrap_or_default()
}

fn i(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(Value::as_i64).unwrap_or(0)
}

/// Column definitions plus the function computing one row's cells.
/// One row's cells of an object, in the order of its kind's columns.
type Cells = Box<dyn Fn(&Value) -> Vec<Value>>;
type Columns = (Vec<PrinterColumn>, Cells);

fn builtin(res: &Resource, now: DateTime<Utc>) -> Option<Columns> {
    let name = col("Name", "string", "name", 0);
    let age_col = col("Age", "string", "", 0);
    let age_of = move |o: &Value| json!(age(o.pointer("/metadata/creationTimestamp"), now));
    let nm = |o: &Value| json!(s(o, "/metadata/name"));
    Some(match (res.group.as_str(), res.kind.as_str()) {
        ("", "Pod") => (
            vec![
                name,
                col("Ready", "string", "", 0),
                col("Status", "string", "", 0),
                col("Restarts", "string", "", 0),
                age_col,
                col("IP", "string", "", 1),
                col("Node", "string", "", 1),
                col("Nominated Node", "string", "", 1),
                col("Readiness Gates", "string", "", 1),
            ],
            Box::new(move |o| {
                let (ready, total, status, restarts) = pod_status(o, now);
                let ip = s(o, "/status/podIP");
                let node = s(o, "/spec/nodeName");
                let nominated = s(o, "/status/nominatedNodeName");
                let gates = o.pointer("/spec/readinessGates").and_then(Value::as_array).map_or(0, Vec::len);
                let gates = if gates == 0 {
                    "<none>".to_string()
                } else {
                    let met = o
                        .pointer("/spec/readinessGates")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                        .iter()
                        .filter(|g| {
                            json_path(o, &format!(".status.conditions[?(@.type==\"{}\")].status", s(g, "/conditionType")))
                                .first()
                                .map(cell_string)
                                .as_deref()
                                == Some("True")
                        })
                        .count();
                    format!("{met}/{gates}")
                };
                vec![
                    nm(o),
                    json!(format!("{ready}/{total}")),
                    json!(status),
                    json!(restarts),
                    age_of(o),
                    json!(if ip.is_empty() { "<none>".into() } else { ip }),
                    json!(if node.is_empty() { "<none>".into() } else { node }),
                    json!(if nominated.is_empty() { "<none>".into() } else { nominated }),
                    json!(gates),
                ]
            }),
        ),
        ("", "ConfigMap") => (
            vec![name, col("Data", "integer", "", 0), age_col],
            Box::new(move |o| {
                let n = o.get("data").and_then(Value::as_object).map_or(0, |m| m.len())
                    + o.get("binaryData").and_then(Value::as_object).map_or(0, |m| m.len());
                vec![nm(o), json!(n), age_of(o)]
            }),
        ),
        ("", "Secret") => (
            vec![name, col("Type", "string", "", 0), col("Data", "integer", "", 0), age_col],
            Box::new(move |o| {
                let n = o.get("data").and_then(Value::as_object).map_or(0, |m| m.len());
                vec![nm(o), json!(s(o, "/type")), json!(n), age_of(o)]
            }),
        ),
        ("", "Namespace") => {
            (vec![name, col("Status", "string", "", 0), age_col], Box::new(move |o| vec![nm(o), json!(s(o, "/status/phase")), age_of(o)]))
        }
        ("", "ServiceAccount") => (
            vec![name, col("Secrets", "string", "", 0), age_col],
            Box::new(move |o| vec![nm(o), json!(o.get("secrets").and_then(Value::as_array).map_or(0, Vec::len)), age_of(o)]),
        ),
        ("", "Node") => (
            vec![
                name,
                col("Status", "string", "", 0),
                col("Roles", "string", "", 0),
                age_col,
                col("Version", "string", "", 0),
                col("Internal-IP", "string", "", 1),
                col("External-IP", "string", "", 1),
                col("OS-Image", "string", "", 1),
                col("Kernel-Version", "string", "", 1),
                col("Container-Runtime", "string", "", 1),
            ],
            Box::new(move |o| {
                let ready = json_path(o, ".status.conditions[?(@.type==\"Ready\")].status").first().map(cell_string);
                let mut status = match ready.as_deref() {
                    Some("True") => "Ready",
                    Some(_) => "NotReady",
                    None => "Unknown",
                }
                .to_string();
                if o.pointer("/spec/unschedulable") == Some(&json!(true)) {
                    status.push_str(",SchedulingDisabled");
                }
                let mut roles: Vec<String> = o
                    .pointer("/metadata/labels")
                    .and_then(Value::as_object)
                    .map(|l| {
                        l.iter()
                            .filter_map(|(k, v)| {
                                k.strip_prefix("node-role.kubernetes.io/")
                                    .map(String::from)
                                    .or_else(|| (k == "kubernetes.io/role").then(|| cell_string(v)))
                            })
                            .filter(|r| !r.is_empty())
                            .collect()
                    })
                    .unwrap_or_default();
                roles.sort();
                let roles = if roles.is_empty() { "<none>".to_string() } else { roles.join(",") };
                let addr = |t: &str| {
                    json_path(o, &format!(".status.addresses[?(@.type==\"{t}\")].address")).first().map(cell_string).unwrap_or("<none>".into())
                };
                let info = |f: &str| {
                    let v = s(o, &format!("/status/nodeInfo/{f}"));
                    if v.is_empty() { "<unknown>".to_string() } else { v }
                };
                vec![
                    nm(o),
                    json!(status),
                    json!(roles),
                    age_of(o),
                    json!(s(o, "/status/nodeInfo/kubeletVersion")),
                    json!(addr("InternalIP")),
                    json!(addr("ExternalIP")),
                    json!(info("osImage")),
                    json!(info("kernelVersion")),
                    json!(info("containerRuntimeVersion")),
                ]
            }),
        ),
        ("", "Service") => (
            vec![
                name,
                col("Type", "string", "", 0),
                col("Cluster-IP", "string", "", 0),
                col("External-IP", "string", "", 0),
                col("Port(s)", "string", "", 0),
                age_col,
                col("Selector", "string", "", 1),
            ],
            Box::new(move |o| {
                // printService: the first of clusterIPs, ports with their node ports, the
                // external IP by type (a LoadBalancer without an address is <pending>).
                let t = s(o, "/spec/type");
                let ports: Vec<String> = o
                    .pointer("/spec/ports")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .map(|p| {
                        let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                        match p.get("nodePort").and_then(Value::as_i64).filter(|n| *n > 0) {
                            Some(node) => format!("{}:{node}/{protocol}", p["port"]),
                            None => format!("{}/{protocol}", p["port"]),
                        }
                    })
                    .collect();
                let ip = {
                    let ip = s(o, "/spec/clusterIPs/0");
                    if ip.is_empty() { "<none>".to_string() } else { ip }
                };
                let external: Vec<String> =
                    o.pointer("/spec/externalIPs").and_then(Value::as_array).map(|a| a.iter().map(cell_string).collect()).unwrap_or_default();
                let mut lb: Vec<String> = o
                    .pointer("/status/loadBalancer/ingress")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
                    .iter()
                    .map(|i| {
                        let ip = s(i, "/ip");
                        if ip.is_empty() { s(i, "/hostname") } else { ip }
                    })
                    .filter(|v| !v.is_empty())
                    .collect();
                lb.sort();
                lb.dedup();
                let external = match t.as_str() {
                    "ClusterIP" | "NodePort" if !external.is_empty() => external.join(","),
                    "ClusterIP" | "NodePort" => "<none>".to_string(),
                    "LoadBalancer" if !external.is_empty() => [lb, external].concat().join(","),
                    "LoadBalancer" => {
                        let l = lb.join(",");
                        if l.is_empty() {
                            "<pending>".to_string()
                        } else if l.len() > 16 {
                            format!("{}...", &l[..13])
                        } else {
                            l
                        }
                    }
                    "ExternalName" => s(o, "/spec/externalName"),
                    _ => "<unknown>".to_string(),
                };
                let sel: Vec<String> = o
                    .pointer("/spec/selector")
                    .and_then(Value::as_object)
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={}", cell_string(v))).collect())
                    .unwrap_or_default();
                let sel = if sel.is_empty() { "<none>".to_string() } else { sel.join(",") };
                vec![
                    nm(o),
                    json!(t),
                    json!(ip),
                    json!(external),
                    json!(if ports.is_empty() { "<none>".to_string() } else { ports.join(",") }),
                    age_of(o),
                    json!(sel),
                ]
            }),
        ),
        ("", "Event") | ("events.k8s.io", "Event") => (
            vec![
                col("Last Seen", "string", "", 0),
                col("Type", "string", "", 0),
                col("Reason", "string", "", 0),
                col("Object", "string", "", 0),
                col("Subobject", "string", "", 1),
                col("Source", "string", "", 1),
                col("Message", "string", "", 0),
                col("First Seen", "string", "", 1),
                col("Count", "string", "", 1),
                col("Name", "string", "name", 1),
            ],
            Box::new(move |o| {
                let core = res_is_core(o);
                let last = if core {
                    o.get("lastTimestamp")
                        .filter(|v| !v.is_null())
                        .or_else(|| o.get("eventTime"))
                        .or_else(|| o.pointer("/metadata/creationTimestamp"))
                        .cloned()
                } else {
                    o.get("deprecatedLastTimestamp")
                        .filter(|v| !v.is_null())
                        .or_else(|| o.get("eventTime"))
                        .or_else(|| o.pointer("/metadata/creationTimestamp"))
                        .cloned()
                };
                let obj_ref = if core { o.get("involvedObject") } else { o.get("regarding") }.cloned().unwrap_or_default();
                let object = format!("{}/{}", s(&obj_ref, "/kind").to_lowercase(), s(&obj_ref, "/name"));
                let msg = if core { s(o, "/message") } else { s(o, "/note") };
                // printEvent's wide cells: the field path, `component, host` (else the
                // reporting controller and instance), the first time and the count.
                let (field_path, first, count) = if core {
                    (
                        s(o, "/involvedObject/fieldPath"),
                        o.get("firstTimestamp").filter(|v| !v.is_null()).or_else(|| o.get("eventTime")).cloned(),
                        i(o, "/count"),
                    )
                } else {
                    (
                        s(o, "/regarding/fieldPath"),
                        o.get("deprecatedFirstTimestamp").filter(|v| !v.is_null()).or_else(|| o.get("eventTime")).cloned(),
                        i(o, "/deprecatedCount"),
                    )
                };
                let (component, host) = if core {
                    (s(o, "/source/component"), s(o, "/source/host"))
                } else {
                    (s(o, "/deprecatedSource/component"), s(o, "/deprecatedSource/host"))
                };
                let component =
                    if component.is_empty() { s(o, if core { "/reportingComponent" } else { "/reportingController" }) } else { component };
                let host = if host.is_empty() { s(o, "/reportingInstance") } else { host };
                let source = match (component.is_empty(), host.is_empty()) {
                    (true, _) => "<unknown>".to_string(),
                    (false, true) => component,
                    (false, false) => format!("{component}, {host}"),
                };
                vec![
                    json!(age(last.as_ref(), now)),
                    json!(s(o, "/type")),
                    json!(s(o, "/reason")),
                    json!(object),
                    json!(field_path),
                    json!(source),
                    json!(msg),
                    json!(age(first.as_ref(), now)),
                    json!(count.to_string()),
                    nm(o),
                ]
            }),
        ),
        ("batch", "Job") => (
            [
                vec![name, col("Status", "string", "", 0), col("Completions", "string", "", 0), col("Duration", "string", "", 0), age_col],
                wide_cols().to_vec(),
            ]
            .concat(),
            Box::new(move |o| {
                let completions = o.pointer("/spec/completions").and_then(Value::as_i64);
                let succeeded = i(o, "/status/succeeded");
                let comp = match completions {
                    Some(c) => format!("{succeeded}/{c}"),
                    None => format!("{succeeded}/1 of {}", o.pointer("/spec/parallelism").and_then(Value::as_i64).unwrap_or(1)),
                };
                let cond =
                    |t: &str| json_path(o, &format!(".status.conditions[?(@.type==\"{t}\")].status")).first().map(cell_string) == Some("True".into());
                let status = if cond("Complete") {
                    "Complete"
                } else if cond("Failed") {
                    "Failed"
                } else if o.pointer("/metadata/deletionTimestamp").is_some() {
                    "Terminating"
                } else if cond("Suspended") {
                    "Suspended"
                } else if cond("FailureTarget") {
                    "FailureTarget"
                } else {
                    "Running"
                };
                let start = o.pointer("/status/startTime").and_then(Value::as_str).and_then(|s| DateTime::parse_from_rfc3339(s).ok());
                let end = o.pointer("/status/completionTime").and_then(Value::as_str).and_then(|s| DateTime::parse_from_rfc3339(s).ok());
                let duration = match (start, end) {
                    (Some(a), Some(b)) => human_duration((b - a).num_seconds()),
                    (Some(a), None) => human_duration((now - a.with_timezone(&Utc)).num_seconds()),
                    _ => String::new(),
                };
                [vec![nm(o), json!(status), json!(comp), json!(duration), age_of(o)], workload_wide(o).to_vec()].concat()
            }),
        ),
        ("apps", "Deployment") => (
            [
                vec![name, col("Ready", "string", "", 0), col("Up-to-date", "integer", "", 0), col("Available", "integer", "", 0), age_col],
                wide_cols().to_vec(),
            ]
            .concat(),
            Box::new(move |o| {
                let cells = vec![
                    nm(o),
                    json!(format!("{}/{}", i(o, "/status/readyReplicas"), o.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1))),
                    json!(i(o, "/status/updatedReplicas")),
                    json!(i(o, "/status/availableReplicas")),
                    age_of(o),
                ];
                [cells, workload_wide(o).to_vec()].concat()
            }),
        ),
        ("apps", "ReplicaSet") => (
            [
                vec![name, col("Desired", "integer", "", 0), col("Current", "integer", "", 0), col("Ready", "integer", "", 0), age_col],
                wide_cols().to_vec(),
            ]
            .concat(),
            Box::new(move |o| {
                let cells = vec![
                    nm(o),
                    json!(o.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)),
                    json!(i(o, "/status/replicas")),
                    json!(i(o, "/status/readyReplicas")),
                    age_of(o),
                ];
                [cells, workload_wide(o).to_vec()].concat()
            }),
        ),
        ("apps", "ControllerRevision") => (
            vec![name, col("Controller", "string", "", 0), col("Revision", "integer", "", 0), age_col],
            Box::new(move |o| {
                let owner = json_path(o, ".metadata.ownerReferences[?(@.controller==true)]")
                    .first()
                    .map(|r| format!("{}/{}", s(r, "/kind").to_lowercase(), s(r, "/name")))
                    .unwrap_or("<none>".into());
                vec![nm(o), json!(owner), json!(i(o, "/revision")), age_of(o)]
            }),
        ),
        ("coordination.k8s.io", "Lease") => {
            (vec![name, col("Holder", "string", "", 0), age_col], Box::new(move |o| vec![nm(o), json!(s(o, "/spec/holderIdentity")), age_of(o)]))
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            (vec![name, col("Created At", "date", "", 0)], Box::new(move |o| vec![nm(o), json!(s(o, "/metadata/creationTimestamp"))]))
        }
        ("rbac.authorization.k8s.io", "Role") | ("rbac.authorization.k8s.io", "ClusterRole") => {
            (vec![name, col("Created At", "string", "", 0)], Box::new(move |o| vec![nm(o), json!(s(o, "/metadata/creationTimestamp"))]))
        }
        ("rbac.authorization.k8s.io", "RoleBinding") | ("rbac.authorization.k8s.io", "ClusterRoleBinding") => (
            vec![
                name,
                col("Role", "string", "", 0),
                age_col,
                col("Users", "string", "", 1),
                col("Groups", "string", "", 1),
                col("ServiceAccounts", "string", "", 1),
            ],
            Box::new(move |o| {
                // rbac.SubjectsStrings: users, groups and `namespace/name` service accounts.
                let subjects = o.get("subjects").and_then(Value::as_array).cloned().unwrap_or_default();
                let of = |kind: &str| {
                    subjects
                        .iter()
                        .filter(|x| s(x, "/kind") == kind)
                        .map(|x| if kind == "ServiceAccount" { format!("{}/{}", s(x, "/namespace"), s(x, "/name")) } else { s(x, "/name") })
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                vec![
                    nm(o),
                    json!(format!("{}/{}", s(o, "/roleRef/kind"), s(o, "/roleRef/name"))),
                    age_of(o),
                    json!(of("User")),
                    json!(of("Group")),
                    json!(of("ServiceAccount")),
                ]
            }),
        ),
        _ => return None,
    })
}

/// kubectl's pod READY, STATUS and RESTARTS cells (`printPod` upstream): waiting/terminated
/// reasons, `Completed` pods that still run are `Running`/`NotReady`, `Init:i/n`, `Terminating`,
/// and restarts with `(5m ago)` of the last termination.
fn pod_status(o: &Value, now: DateTime<Utc>) -> (usize, usize, String, String) {
    let total = o.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
    let mut reason = s(o, "/status/reason");
    if reason.is_empty() {
        reason = s(o, "/status/phase");
    }
    let mut restarts = 0i64;
    let mut last_restart: Option<DateTime<Utc>> = None;
    let mut note_restart = |c: &Value| {
        restarts += c["restartCount"].as_i64().unwrap_or(0);
        if let Some(t) = c.pointer("/lastState/terminated/finishedAt").and_then(Value::as_str).and_then(|t| DateTime::parse_from_rfc3339(t).ok()) {
            let t = t.with_timezone(&Utc);
            if last_restart.is_none_or(|l| t > l) {
                last_restart = Some(t);
            }
        }
    };
    let init = o.pointer("/status/initContainerStatuses").and_then(Value::as_array).cloned().unwrap_or_default();
    let init_total = o.pointer("/spec/initContainers").and_then(Value::as_array).map_or(0, Vec::len);
    let mut initializing = false;
    for (i, c) in init.iter().enumerate() {
        note_restart(c);
        if c.pointer("/state/terminated/exitCode").and_then(Value::as_i64) == Some(0) {
            continue;
        }
        initializing = true;
        reason = if let Some(r) = c.pointer("/state/terminated/reason").and_then(Value::as_str) {
            format!("Init:{r}")
        } else if let Some(r) = c.pointer("/state/waiting/reason").and_then(Value::as_str).filter(|r| *r != "PodInitializing") {
            format!("Init:{r}")
        } else {
            format!("Init:{i}/{init_total}")
        };
        break;
    }
    let statuses = o.pointer("/status/containerStatuses").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut ready = 0;
    if !initializing {
        let mut has_running = false;
        for c in statuses.iter().rev() {
            note_restart(c);
            if let Some(r) = c.pointer("/state/waiting/reason").and_then(Value::as_str).filter(|r| !r.is_empty()) {
                reason = r.to_string();
            } else if let Some(t) = c.pointer("/state/terminated") {
                reason = match t.get("reason").and_then(Value::as_str).filter(|r| !r.is_empty()) {
                    Some(r) => r.to_string(),
                    None => match t.get("signal").and_then(Value::as_i64).filter(|s| *s != 0) {
                        Some(sig) => format!("Signal:{sig}"),
                        None => format!("ExitCode:{}", t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)),
                    },
                };
            } else if c.pointer("/state/running").is_some() && c["ready"] == json!(true) {
                has_running = true;
            }
            if c["ready"] == json!(true) {
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = json_path(o, ".status.conditions[?(@.type==\"Ready\")].status").first().map(cell_string);
            reason = if pod_ready.as_deref() == Some("True") { "Running".into() } else { "NotReady".into() };
        }
    } else {
        for c in &statuses {
            note_restart(c);
        }
    }
    if o.pointer("/metadata/deletionTimestamp").is_some() {
        reason = if s(o, "/status/reason") == "NodeLost" { "Unknown".into() } else { "Terminating".into() };
    }
    let restarts = match last_restart {
        Some(t) if restarts > 0 => format!("{restarts} ({} ago)", human_duration((now - t).num_seconds())),
        _ => restarts.to_string(),
    };
    (ready, total, reason, restarts)
}

/// The `-o wide` Containers, Images and Selector cells of a workload.
fn workload_wide(o: &Value) -> [Value; 3] {
    let cs = o.pointer("/spec/template/spec/containers").and_then(Value::as_array).cloned().unwrap_or_default();
    let names: Vec<String> = cs.iter().map(|c| s(c, "/name")).collect();
    let images: Vec<String> = cs.iter().map(|c| s(c, "/image")).collect();
    let selector = o.pointer("/spec/selector").map(|sel| crate::selector::LabelSelector::from_object(sel).to_string()).unwrap_or_default();
    [json!(names.join(",")), json!(images.join(",")), json!(if selector.is_empty() { "<none>".to_string() } else { selector })]
}

fn wide_cols() -> [PrinterColumn; 3] {
    [col("Containers", "string", "", 1), col("Images", "string", "", 1), col("Selector", "string", "", 1)]
}

fn res_is_core(o: &Value) -> bool {
    o.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

/// A custom resource column's description, as apiextensions' table convertor words it when the
/// CRD gives none.
fn crd_column_description(json_path: &str) -> String {
    format!("Custom resource definition column (in JSONPath format): {json_path}")
}

fn custom(res: &Resource, now: DateTime<Utc>) -> Columns {
    // Upstream's Name column takes ObjectMeta's `name` field doc.
    let name_doc = crate::surface::components()
        .get("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
        .and_then(|m| m.pointer("/properties/name/description"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut cols = vec![PrinterColumn { description: name_doc.to_string(), ..col("Name", "string", "name", 0) }];
    let user: Vec<PrinterColumn> = res
        .printer_columns
        .iter()
        .cloned()
        .map(|c| if c.description.is_empty() { PrinterColumn { description: crd_column_description(&c.json_path), ..c } } else { c })
        .collect();
    if user.is_empty() {
        cols.push(PrinterColumn { description: crd_column_description(".metadata.creationTimestamp"), ..col("Age", "date", "", 0) });
        return (cols, Box::new(move |o| vec![json!(s(o, "/metadata/name")), json!(age(o.pointer("/metadata/creationTimestamp"), now))]));
    }
    cols.extend(user.iter().cloned());
    (
        cols,
        Box::new(move |o| {
            let mut cells = vec![json!(s(o, "/metadata/name"))];
            for c in &user {
                let vals = json_path(o, &c.json_path);
                let cell = match vals.first() {
                    None => Value::Null,
                    Some(v) if c.type_ == "date" => json!(age(Some(v), now)),
                    Some(_) if vals.len() > 1 => json!(vals.iter().map(cell_string).collect::<Vec<_>>().join(",")),
                    Some(v) => match c.type_.as_str() {
                        "integer" | "number" | "boolean" => v.clone(),
                        _ => json!(cell_string(v)),
                    },
                };
                cells.push(cell);
            }
            cells
        }),
    )
}

/// Render objects as a Table. `include` is `includeObject`: None, Metadata (default) or Object.
pub fn to_table(res: &Resource, objects: &[Value], list_meta: Value, include: &str, now: DateTime<Utc>) -> Value {
    let (cols, cells) = if res.custom {
        custom(res, now)
    } else {
        builtin(res, now).or_else(|| kinds::columns(&res.group, &res.kind, now)).unwrap_or_else(|| {
            let cells: Cells = Box::new(|o| vec![json!(s(o, "/metadata/name")), json!(s(o, "/metadata/creationTimestamp"))]);
            (kinds::default_columns(), cells)
        })
    };
    // A built-in column is defined as upstream's printer defines it (type, format, the
    // description it takes from the field docs, priority), from the real server's answer.
    let upstream = if res.custom { None } else { crate::surface::table_columns(&res.group, &res.plural) };
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| {
            if let Some(def) = upstream.and_then(|u| u.iter().find(|d| d["name"] == c.name.as_str())) {
                return def.clone();
            }
            let t = if c.type_ == "date" && !res.custom { "string".to_string() } else { c.type_.clone() };
            json!({"name": c.name, "type": t, "format": c.format, "description": c.description, "priority": c.priority})
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(o)});
            match include {
                "None" => {}
                "Object" => row["object"] = o.clone(),
                _ => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]});
                }
            }
            row
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_matches_apimachinery() {
        for (s, want) in [
            (5, "5s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (9 * 3600, "9h"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
        ] {
            assert_eq!(human_duration(s), want);
        }
    }

    #[test]
    fn pod_status_cells_follow_kubectl() {
        let now = Utc::now();
        let earlier = crate::clock::timestamp(now - chrono::Duration::seconds(300));
        let pod = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}, "status": {"phase": "Running", "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 1, "finishedAt": earlier}}},
            {"name": "b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
        ]}});
        let (ready, total, status, restarts) = pod_status(&pod, now);
        assert_eq!((ready, total, status.as_str(), restarts.as_str()), (1, 2, "CrashLoopBackOff", "2 (5m ago)"));
        let done = json!({"spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Succeeded", "containerStatuses": [
            {"name": "a", "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ]}});
        assert_eq!(pod_status(&done, now).2, "Completed");
    }

    #[test]
    fn json_path_filters_conditions() {
        let o = json!({"status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(json_path(&o, ".status.conditions[?(@.type==\"Ready\")].status"), vec![json!("True")]);
        assert_eq!(json_path(&o, ".status.conditions[0].type"), vec![json!("A")]);
    }
}
