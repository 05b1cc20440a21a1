//! Service cluster IPs and node ports, as upstream's service REST storage allocates them
//! (pkg/registry/core/service/storage/alloc.go, ipallocator, portallocator): a cluster IP from
//! the service CIDR for every type but ExternalName (`None` stays headless), a node port per
//! port for NodePort and LoadBalancer services, a taken or out-of-range value refused with
//! upstream's wording. What is taken is read from the stored Services, so a delete releases
//! its values and a restart with a data dir keeps them.

use crate::status::Cause;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::net::Ipv4Addr;

/// The service CIDR (kube-apiserver's `--service-cluster-ip-range` default).
pub const SERVICE_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 96, 0, 0), 12);
/// The node port range (`--service-node-port-range` default).
pub const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;

/// The first address of the service CIDR, which the `default/kubernetes` Service holds.
pub fn kubernetes_service_ip() -> Ipv4Addr {
    Ipv4Addr::from(u32::from(SERVICE_CIDR.0) + 1)
}

/// What the stored Services hold.
#[derive(Debug, Default)]
pub struct Taken {
    ips: HashSet<Ipv4Addr>,
    ports: HashSet<i64>,
}

impl Taken {
    /// The IPs and node ports of `services`, leaving out the one with uid `except` (an update
    /// may keep its own values).
    pub fn of(services: &[Value], except: Option<&str>) -> Self {
        let mut taken = Taken::default();
        for svc in services.iter().filter(|s| except.is_none_or(|uid| s.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid))) {
            for ip in strings(svc.pointer("/spec/clusterIPs")).iter().chain(strings(svc.pointer("/spec/clusterIP")).iter()) {
                if let Ok(ip) = ip.parse() {
                    taken.ips.insert(ip);
                }
            }
            for p in svc.pointer("/spec/ports").and_then(Value::as_array).into_iter().flatten() {
                if let Some(n) = p.get("nodePort").and_then(Value::as_i64).filter(|n| *n != 0) {
                    taken.ports.insert(n);
                }
            }
        }
        taken
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
        Some(Value::Array(a)) => a.iter().filter_map(|s| s.as_str().map(String::from)).collect(),
        _ => vec![],
    }
}

fn service_type(svc: &Value) -> &str {
    svc.pointer("/spec/type").and_then(Value::as_str).unwrap_or("ClusterIP")
}

fn needs_node_ports(svc: &Value) -> bool {
    match service_type(svc) {
        "NodePort" => true,
        "LoadBalancer" => svc.pointer("/spec/allocateLoadBalancerNodePorts").and_then(Value::as_bool).unwrap_or(true),
        _ => false,
    }
}

fn cidr_text() -> String {
    format!("{}/{}", SERVICE_CIDR.0, SERVICE_CIDR.1)
}

fn in_cidr(ip: Ipv4Addr) -> bool {
    let mask = u32::MAX << (32 - SERVICE_CIDR.1);
    u32::from(ip) & mask == u32::from(SERVICE_CIDR.0)
}

/// Go's `%#v` of a `[]string`, as `field.Invalid` prints a slice value.
fn go_strings(v: &[String]) -> String {
    let quoted: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// Keep what an update leaves out (upstream's `patchAllocatedValues`): the cluster IPs, and
/// node ports of ports with the same name, so `kubectl apply` of a manifest without them keeps
/// the allocated values.
pub fn keep_allocated(new: &mut Value, old: &Value) {
    let Some(spec) = new.get_mut("spec").filter(|s| s.is_object()) else { return };
    if service_type(old) != "ExternalName" && spec.get("type").and_then(Value::as_str) != Some("ExternalName") {
        if spec.get("clusterIP").and_then(Value::as_str).is_none_or(str::is_empty)
            && let Some(ip) = old.pointer("/spec/clusterIP")
        {
            spec["clusterIP"] = ip.clone();
        }
        if spec.get("clusterIPs").and_then(Value::as_array).is_none_or(Vec::is_empty)
            && let Some(ips) = old.pointer("/spec/clusterIPs")
        {
            spec["clusterIPs"] = ips.clone();
        }
    }
    let old_ports: Vec<(String, i64)> = old
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p.get("name").and_then(Value::as_str).unwrap_or_default().to_string(), p.get("nodePort")?.as_i64()?)))
        .collect();
    let used: HashSet<i64> =
        spec.get("ports").and_then(Value::as_array).into_iter().flatten().filter_map(|p| p.get("nodePort").and_then(Value::as_i64)).collect();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter(|p| p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) == 0) {
            let name = p.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
            if let Some((_, n)) = old_ports.iter().find(|(old_name, n)| *old_name == name && !used.contains(n)) {
                p["nodePort"] = json!(n);
            }
        }
    }
}

/// Fill in and check a Service's cluster IPs, IP families and node ports against what
/// `taken` holds. Errors are the causes of a 422 Invalid.
pub fn allocate(svc: &mut Value, taken: &Taken) -> Result<(), Vec<Cause>> {
    if !svc.get("spec").is_some_and(Value::is_object) {
        return Ok(());
    }
    // Upstream allocates IPs, then node ports, and stops at the first failure.
    let mut causes = vec![];
    let kind = service_type(svc).to_string();
    if kind != "ExternalName" {
        allocate_ips(svc, taken, &mut causes);
        if !causes.is_empty() {
            return Err(causes);
        }
    }
    if kind == "ClusterIP" {
        for (i, p) in svc.pointer("/spec/ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
            if p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0 {
                causes.push(Cause::new(
                    "FieldValueForbidden",
                    "Forbidden: may not be used when `type` is 'ClusterIP'",
                    format!("spec.ports[{i}].nodePort"),
                ));
            }
        }
    }
    if needs_node_ports(svc) {
        allocate_node_ports(svc, taken, &mut causes);
    }
    if causes.is_empty() { Ok(()) } else { Err(causes) }
}

fn allocate_ips(svc: &mut Value, taken: &Taken, causes: &mut Vec<Cause>) {
    let spec = &mut svc["spec"];
    let mut ips = strings(spec.get("clusterIPs"));
    if ips.is_empty() {
        ips = strings(spec.get("clusterIP"));
    }
    let headless = ips.first().is_some_and(|ip| ip == "None");
    if headless {
        // Headless: no address; without a selector upstream requires every family the
        // cluster has (one here).
        let selector = spec.get("selector").and_then(Value::as_object).is_some_and(|s| !s.is_empty());
        spec["clusterIP"] = json!("None");
        spec["clusterIPs"] = json!(["None"]);
        set_default(spec, "ipFamilyPolicy", json!(if selector { "SingleStack" } else { "RequireDualStack" }));
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        return;
    }
    let ip = match ips.first() {
        None => match free_ip(taken) {
            Some(ip) => ip,
            None => {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "Invalid value: []string(nil): failed to allocate a serviceIP: range is full",
                    "spec.clusterIPs",
                ));
                return;
            }
        },
        Some(text) => {
            let Ok(ip) = text.parse::<Ipv4Addr>() else {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: {text:?}: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"),
                    "spec.clusterIPs[0]",
                ));
                return;
            };
            let why = if !in_cidr(ip) {
                Some(format!("the provided IP ({ip}) is not in the valid range. The range of valid IPs is {}", cidr_text()))
            } else if taken.ips.contains(&ip) {
                Some("provided IP is already allocated".to_string())
            } else {
                None
            };
            if let Some(why) = why {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: {}: failed to allocate IP {ip}: {why}", go_strings(&ips)),
                    "spec.clusterIPs",
                ));
                return;
            }
            ip
        }
    };
    spec["clusterIP"] = json!(ip.to_string());
    spec["clusterIPs"] = json!([ip.to_string()]);
    set_default(spec, "ipFamilies", json!(["IPv4"]));
    set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
}

fn set_default(obj: &mut Value, key: &str, v: Value) {
    if let Some(m) = obj.as_object_mut() {
        m.entry(key.to_string()).or_insert(v);
    }
}

/// A free address from the dynamic band (upstream keeps the first
/// min(max(16, size/16), 256) addresses for static assignment and picks at random above it).
fn free_ip(taken: &Taken) -> Option<Ipv4Addr> {
    use rand::RngExt;
    let base = u32::from(SERVICE_CIDR.0);
    let size = 1u32 << (32 - SERVICE_CIDR.1);
    let static_band = (size / 16).clamp(16, 256);
    let usable = |off: u32| off >= 1 && off < size - 1 && !taken.ips.contains(&Ipv4Addr::from(base + off));
    let mut rng = rand::rng();
    for _ in 0..64 {
        let off = rng.random_range(static_band..size - 1);
        if usable(off) {
            return Some(Ipv4Addr::from(base + off));
        }
    }
    (static_band..size - 1).chain(1..static_band).find(|off| usable(*off)).map(|off| Ipv4Addr::from(base + off))
}

fn allocate_node_ports(svc: &mut Value, taken: &Taken, causes: &mut Vec<Cause>) {
    let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) else { return };
    let mut mine: HashSet<i64> = HashSet::new();
    for (i, p) in ports.iter_mut().enumerate() {
        let field = format!("spec.ports[{i}].nodePort");
        match p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) {
            0 => match free_port(taken, &mine) {
                Some(n) => {
                    p["nodePort"] = json!(n);
                    mine.insert(n);
                }
                None => causes.push(Cause::new("FieldValueInvalid", "Invalid value: 0: range is full", field)),
            },
            n if !NODE_PORTS.contains(&n) => causes.push(Cause::new(
                "FieldValueInvalid",
                format!(
                    "Invalid value: {n}: provided port is not in the valid range. The range of valid ports is {}-{}",
                    NODE_PORTS.start(),
                    NODE_PORTS.end()
                ),
                field,
            )),
            n if taken.ports.contains(&n) || mine.contains(&n) => {
                causes.push(Cause::new("FieldValueInvalid", format!("Invalid value: {n}: provided port is already allocated"), field))
            }
            n => {
                mine.insert(n);
            }
        }
        if !causes.is_empty() {
            return;
        }
    }
}

/// A free node port, at random above upstream's static band (min(max(16, size/32), 128)).
fn free_port(taken: &Taken, mine: &HashSet<i64>) -> Option<i64> {
    use rand::RngExt;
    let (start, end) = (*NODE_PORTS.start(), *NODE_PORTS.end());
    let static_band = ((end - start + 1) / 32).clamp(16, 128);
    let free = |n: i64| !taken.ports.contains(&n) && !mine.contains(&n);
    let mut rng = rand::rng();
    for _ in 0..64 {
        let n = rng.random_range(start + static_band..=end);
        if free(n) {
            return Some(n);
        }
    }
    (start..=end).find(|n| free(*n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_ip_is_refused_with_upstreams_wording() {
        let other = json!({"metadata": {"uid": "a"}, "spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"]}});
        let taken = Taken::of(&[other], None);
        let mut svc = json!({"spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}});
        let causes = allocate(&mut svc, &taken).unwrap_err();
        assert_eq!(causes[0].field, "spec.clusterIPs");
        assert_eq!(causes[0].message, "Invalid value: []string{\"10.96.0.10\"}: failed to allocate IP 10.96.0.10: provided IP is already allocated");
    }

    #[test]
    fn node_ports_are_allocated_in_range_and_kept_on_update() {
        let mut svc = json!({"metadata": {"uid": "b"}, "spec": {"type": "NodePort", "ports": [{"name": "http", "port": 80}]}});
        allocate(&mut svc, &Taken::default()).unwrap();
        let n = svc["spec"]["ports"][0]["nodePort"].as_i64().unwrap();
        assert!(NODE_PORTS.contains(&n));
        assert!(in_cidr(svc["spec"]["clusterIP"].as_str().unwrap().parse().unwrap()));
        let mut update = json!({"spec": {"type": "NodePort", "ports": [{"name": "http", "port": 80}]}});
        keep_allocated(&mut update, &svc);
        assert_eq!(update["spec"]["ports"][0]["nodePort"], n);
        assert_eq!(update["spec"]["clusterIP"], svc["spec"]["clusterIP"]);
    }
}
