//! Discovery: `/version`, `/api`, `/apis`, `/apis/G`, `/api/v1` and `/apis/G/V` (legacy
//! `APIResourceList`s), and aggregated discovery (`apidiscovery.k8s.io/v2`
//! `APIGroupDiscoveryList`) which kubectl 1.32 asks for first.

use crate::resources::{Registry, Resource};
use serde_json::{Value, json};

/// The version we claim to be.
pub const GIT_VERSION: &str = "v1.32.0";

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "32", "gitVersion": GIT_VERSION, "gitCommit": "embedded",
        "gitTreeState": "clean", "buildDate": "2024-12-11T00:00:00Z", "goVersion": "go1.23.3",
        "compiler": "gc", "platform": "linux/amd64"
    })
}

/// API groups with their versions, most preferred version first.
pub fn groups(reg: &Registry) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = vec![];
    for r in reg.all() {
        if r.group.is_empty() {
            continue;
        }
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, vs)) => {
                if !vs.contains(&r.version) {
                    vs.push(r.version.clone());
                }
            }
            None => out.push((r.group.clone(), vec![r.version.clone()])),
        }
    }
    for (_, vs) in out.iter_mut() {
        vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    out
}

/// Kubernetes version ordering: GA > beta > alpha, higher numbers first.
fn version_priority(v: &str) -> (u8, u32, u32) {
    let rest = v.trim_start_matches('v');
    let (major, tail) = rest.split_at(rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len()));
    let major: u32 = major.parse().unwrap_or(0);
    if tail.is_empty() {
        (3, major, 0)
    } else if let Some(b) = tail.strip_prefix("beta") {
        (2, major, b.parse().unwrap_or(0))
    } else if let Some(a) = tail.strip_prefix("alpha") {
        (1, major, a.parse().unwrap_or(0))
    } else {
        (0, major, 0)
    }
}

fn group_json(g: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions.iter().map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v})).collect();
    json!({"name": g, "versions": vs, "preferredVersion": vs[0]})
}

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]})
}

/// `/apis`.
pub fn group_list(reg: &Registry) -> Value {
    let groups: Vec<Value> = groups(reg).iter().map(|(g, vs)| group_json(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/G`.
pub fn group(reg: &Registry, g: &str) -> Option<Value> {
    groups(reg).into_iter().find(|(name, _)| name == g).map(|(name, vs)| {
        let mut v = group_json(&name, &vs);
        v["kind"] = json!("APIGroup");
        v["apiVersion"] = json!("v1");
        v
    })
}

/// Upstream's `discovery.StorageVersionHash`: base64 of the first 8 bytes of the SHA-256 of
/// `group/version/kind` of the version the resource is stored as (a view's storage is the
/// resource it shares; HorizontalPodAutoscalers are stored as autoscaling/v2).
fn storage_version_hash(r: &Resource) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let (group, version) = match (&r.alias_of, r.group.as_str(), r.kind.as_str()) {
        (Some(storage), _, _) => (storage.group.as_str(), "v1"),
        (None, "autoscaling", "HorizontalPodAutoscaler") => ("autoscaling", "v2"),
        (None, group, _) => (group, r.version.as_str()),
    };
    let digest = sha2::Sha256::digest(format!("{group}/{version}/{}", r.kind).as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

fn resource_entries(r: &Resource) -> Vec<Value> {
    let mut main = json!({
        "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind, "verbs": r.verbs(),
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    if !r.custom && !r.ephemeral {
        main["storageVersionHash"] = json!(storage_version_hash(r));
    }
    let mut out = vec![main];
    if r.status {
        out.push(json!({"name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": ["get", "patch", "update"]}));
    }
    if r.scale.is_some() {
        out.push(json!({"name": format!("{}/scale", r.plural), "singularName": "", "namespaced": r.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
    }
    for s in r.subresources {
        let mut e =
            json!({"name": format!("{}/{}", r.plural, s.name), "singularName": "", "namespaced": r.namespaced, "kind": s.kind, "verbs": s.verbs});
        if !s.group.is_empty() || !s.version.is_empty() {
            e["group"] = json!(s.group);
            e["version"] = json!(s.version);
        }
        out.push(e);
    }
    // Upstream lists built-ins by name; the apiextensions server lists a CRD's status, then scale.
    if !r.custom {
        out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    }
    out
}

/// `/api/v1` or `/apis/G/V`.
pub fn resource_list(reg: &Registry, g: &str, v: &str) -> Option<Value> {
    let rs: Vec<Resource> = reg.all().into_iter().filter(|r| r.group == g && r.version == v).collect();
    if rs.is_empty() {
        return None;
    }
    let gv = if g.is_empty() { v.to_string() } else { format!("{g}/{v}") };
    let resources: Vec<Value> = rs.iter().flat_map(resource_entries).collect();
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}

fn aggregated_resources(rs: &[Resource]) -> Vec<Value> {
    rs.iter()
        .map(|r| {
            let mut e = json!({
                "resource": r.plural, "responseKind": {"group": "", "version": "", "kind": r.kind},
                "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": r.singular, "verbs": r.verbs(),
            });
            if !r.short_names.is_empty() {
                e["shortNames"] = json!(r.short_names);
            }
            if !r.categories.is_empty() {
                e["categories"] = json!(r.categories);
            }
            let mut subs = vec![];
            if r.status {
                subs.push(json!({"subresource": "status", "responseKind": {"group": "", "version": "", "kind": r.kind}, "verbs": ["get", "patch", "update"]}));
            }
            if r.scale.is_some() {
                subs.push(json!({"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}, "verbs": ["get", "patch", "update"]}));
            }
            for s in r.subresources {
                subs.push(json!({"subresource": s.name, "responseKind": {"group": s.group, "version": s.version, "kind": s.kind}, "verbs": s.verbs}));
            }
            if !r.custom {
                subs.sort_by(|a, b| a["subresource"].as_str().cmp(&b["subresource"].as_str()));
            }
            if !subs.is_empty() {
                e["subresources"] = json!(subs);
            }
            e
        })
        .collect()
}

/// Aggregated discovery for `/api` (legacy = true) or `/apis`.
pub fn aggregated(reg: &Registry, legacy: bool) -> Value {
    let all = reg.all();
    let items: Vec<Value> = if legacy {
        let rs: Vec<Resource> = all.iter().filter(|r| r.group.is_empty()).cloned().collect();
        vec![json!({"metadata": {}, "versions": [{"version": "v1", "resources": aggregated_resources(&rs), "freshness": "Current"}]})]
    } else {
        groups(reg)
            .into_iter()
            .map(|(g, vs)| {
                let versions: Vec<Value> = vs
                    .iter()
                    .map(|v| {
                        let rs: Vec<Resource> = all.iter().filter(|r| r.group == g && &r.version == v).cloned().collect();
                        json!({"version": v, "resources": aggregated_resources(&rs), "freshness": "Current"})
                    })
                    .collect();
                json!({"metadata": {"name": g}, "versions": versions})
            })
            .collect()
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
}
