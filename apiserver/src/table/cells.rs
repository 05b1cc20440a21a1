//! Cell formatting of upstream's printers (`pkg/printers/internalversion/printers.go`, v1.32)
//! shared by the kinds of `table::kinds`: label and selector strings, access modes, endpoint
//! and port lists, Ingress hosts and addresses, HPA targets, quota usage, CSR conditions.

use super::{cell_string, i, s};
use serde_json::{Value, json};

pub(super) fn or(v: String, default: &str) -> String {
    if v.is_empty() { default.to_string() } else { v }
}

pub(super) fn items(o: &Value, p: &str) -> Vec<Value> {
    o.pointer(p).and_then(Value::as_array).cloned().unwrap_or_default()
}

pub(super) fn replicas(o: &Value) -> i64 {
    o.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)
}

pub(super) fn phase(o: &Value) -> String {
    if o.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) { "Terminating".into() } else { s(o, "/status/phase") }
}

/// `layoutContainerCells`: names and images, comma-separated.
pub(super) fn containers(o: &Value, p: &str) -> (Value, Value) {
    let cs = items(o, p);
    (json!(cs.iter().map(|c| s(c, "/name")).collect::<Vec<_>>().join(",")), json!(cs.iter().map(|c| s(c, "/image")).collect::<Vec<_>>().join(",")))
}

/// `labels.FormatLabels`: `k=v,...` sorted, `<none>` when empty.
pub(super) fn format_labels(map: Option<&Value>) -> String {
    let pairs: Vec<String> =
        map.and_then(Value::as_object).map(|m| m.iter().map(|(k, v)| format!("{k}={}", cell_string(v))).collect()).unwrap_or_default();
    if pairs.is_empty() { "<none>".into() } else { pairs.join(",") }
}

/// `metav1.FormatLabelSelector`: the selector's string, `<none>` when it selects everything.
pub(super) fn format_selector(sel: Option<&Value>) -> String {
    let text = sel.filter(|v| !v.is_null()).map(|v| crate::selector::LabelSelector::from_object(v).to_string()).unwrap_or_default();
    or(text, "<none>")
}

/// `GetPersistentVolume(Claim)Class`: the field, else the beta annotation.
pub(super) fn storage_class(o: &Value) -> String {
    let class = s(o, "/spec/storageClassName");
    if class.is_empty() { s(o, "/metadata/annotations/volume.beta.kubernetes.io~1storage-class") } else { class }
}

/// `GetAccessModesAsString`: RWO, ROX, RWX, RWOP in that order, each once.
pub(super) fn access_modes(o: &Value, p: &str) -> String {
    let modes: Vec<String> = items(o, p).iter().map(cell_string).collect();
    [("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")]
        .iter()
        .filter(|(m, _)| modes.iter().any(|x| x == m))
        .map(|(_, short)| *short)
        .collect::<Vec<_>>()
        .join(",")
}

/// `listWithMoreString` with at most 3 shown: `a,b,c + 2 more...`, `<unset>` when empty.
pub(super) fn list_with_more(list: &[String]) -> String {
    match list.len() {
        0 => "<unset>".into(),
        n if n > 3 => format!("{} + {} more...", list[..3].join(","), n - 3),
        _ => list.join(","),
    }
}

/// `formatEndpoints`: `ip:port` per address and port (IPs alone without ports), at most 3.
pub(super) fn format_endpoints(o: &Value) -> String {
    let subsets = items(o, "/subsets");
    if subsets.is_empty() {
        return "<none>".into();
    }
    let mut all = vec![];
    for ss in &subsets {
        let addresses: Vec<String> = items(ss, "/addresses").iter().map(|a| s(a, "/ip")).collect();
        let ports = items(ss, "/ports");
        if ports.is_empty() {
            all.extend(addresses);
            continue;
        }
        for p in &ports {
            all.extend(
                addresses.iter().map(|ip| if ip.contains(':') { format!("[{ip}]:{}", i(p, "/port")) } else { format!("{ip}:{}", i(p, "/port")) }),
            );
        }
    }
    if all.len() > 3 { format!("{} + {} more...", all[..3].join(","), all.len() - 3) } else { all.join(",") }
}

/// `formatHosts`: the first 3 rule hosts, `*` when none is set.
pub(super) fn ingress_hosts(o: &Value) -> String {
    let rules = items(o, "/spec/rules");
    let hosts: Vec<String> = rules.iter().take(3).map(|r| s(r, "/host")).filter(|h| !h.is_empty()).collect();
    match (hosts.is_empty(), rules.len() > 3) {
        (true, _) => "*".into(),
        (false, true) => format!("{} + {} more...", hosts.join(","), rules.len() - 3),
        (false, false) => hosts.join(","),
    }
}

/// `ingressLoadBalancerStatusStringer` (not wide): IPs or hostnames, sorted, clipped to 16.
pub(super) fn load_balancer(o: &Value) -> String {
    let mut seen: Vec<String> =
        items(o, "/status/loadBalancer/ingress").iter().map(|i| or(s(i, "/ip"), &s(i, "/hostname"))).filter(|v| !v.is_empty()).collect();
    seen.sort();
    seen.dedup();
    let r = seen.join(",");
    if r.len() > 16 { format!("{}...", &r[..13]) } else { r }
}

/// `formatHPAMetrics`: each target as `cpu: 50%/80%` (`<unknown>` before a measurement), at
/// most 2. An autoscaling/v1 object carries its one CPU target in its own fields.
pub(super) fn hpa_targets(o: &Value) -> String {
    if let Some(target) = o.pointer("/spec/targetCPUUtilizationPercentage").and_then(Value::as_i64) {
        let current =
            o.pointer("/status/currentCPUUtilizationPercentage").and_then(Value::as_i64).map_or("<unknown>".to_string(), |c| format!("{c}%"));
        return format!("cpu: {current}/{target}%");
    }
    let specs = items(o, "/spec/metrics");
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = items(o, "/status/currentMetrics");
    let list: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(n, spec)| {
            let status = statuses.get(n);
            let current = |p: &str| status.and_then(|st| st.pointer(p)).filter(|v| !v.is_null()).map_or("<unknown>".to_string(), cell_string);
            match s(spec, "/type").as_str() {
                t @ ("Resource" | "ContainerResource") => {
                    let key = if t == "Resource" { "resource" } else { "containerResource" };
                    let source = &spec[key];
                    let metric = s(source, "/name");
                    if let Some(avg) = source.pointer("/target/averageValue").filter(|v| !v.is_null()) {
                        format!("{metric}: {}/{}", current(&format!("/{key}/current/averageValue")), cell_string(avg))
                    } else {
                        let now = status.and_then(|st| st.pointer(&format!("/{key}/current/averageUtilization"))).and_then(Value::as_i64);
                        let target =
                            source.pointer("/target/averageUtilization").and_then(Value::as_i64).map_or("<auto>".to_string(), |t| format!("{t}%"));
                        format!("{metric}: {}/{target}", now.map_or("<unknown>".to_string(), |c| format!("{c}%")))
                    }
                }
                "Pods" => format!("{}/{}", current("/pods/current/averageValue"), s(spec, "/pods/target/averageValue")),
                t @ ("Object" | "External") => {
                    let key = if t == "Object" { "object" } else { "external" };
                    match spec.pointer(&format!("/{key}/target/averageValue")).filter(|v| !v.is_null()) {
                        Some(avg) => format!("{}/{} (avg)", current(&format!("/{key}/current/averageValue")), cell_string(avg)),
                        None => format!("{}/{}", current(&format!("/{key}/current/value")), s(spec, &format!("/{key}/target/value"))),
                    }
                }
                _ => "<unknown type>".into(),
            }
        })
        .collect();
    if list.len() > 2 { format!("{} + {} more...", list[..2].join(", "), list.len() - 2) } else { list.join(", ") }
}

/// `printResourceQuota`: `resource: used/hard` for each `spec.hard` resource, sorted, the
/// `limits.*` ones in the Limit column.
pub(super) fn quota_columns(o: &Value) -> (String, String) {
    let mut names: Vec<String> = o.pointer("/spec/hard").and_then(Value::as_object).map(|m| m.keys().cloned().collect()).unwrap_or_default();
    names.sort();
    let (mut request, mut limit) = (vec![], vec![]);
    for r in names {
        let quantity = |p: &str| o.pointer(p).and_then(|m| m.get(&r)).map_or("0".to_string(), cell_string);
        let cell = format!("{r}: {}/{}", quantity("/status/used"), quantity("/status/hard"));
        if r.split('.').next() == Some("limits") && r.contains('.') { limit.push(cell) } else { request.push(cell) }
    }
    (request.join(", "), limit.join(", "))
}

/// `extractCSRStatus`: Denied, Approved or Pending, then `,Failed` and `,Issued`.
pub(super) fn csr_condition(o: &Value) -> String {
    let types: Vec<String> = items(o, "/status/conditions").iter().map(|c| s(c, "/type")).collect();
    let has = |t: &str| types.iter().any(|x| x == t);
    let mut status = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        status.push_str(",Failed");
    }
    if !s(o, "/status/certificate").is_empty() {
        status.push_str(",Issued");
    }
    status
}
