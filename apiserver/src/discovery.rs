//! Discovery: `/version`, `/api`, `/apis`, `/apis/G`, `/api/v1` and `/apis/G/V` (legacy
//! `APIResourceList`s), and aggregated discovery (`apidiscovery.k8s.io/v2`
//! `APIGroupDiscoveryList`) which kubectl asks for first. The built-in part of each document is
//! the real v1.36 server's, as captured in [`crate::surface`]; CRDs add theirs, computed from
//! the registry as the apiextensions server lists them.

use crate::resources::{Registry, Resource};
use serde_json::{Value, json};

/// `/version`: the captured server's (v1.36.3, with its emulation and minimum-compatibility
/// versions).
pub fn version() -> Value {
    crate::surface::version().clone()
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

/// `/api/v1` or `/apis/G/V`: upstream's list for a built-in group version, with the resources
/// CRDs add to it after upstream's.
pub fn resource_list(reg: &Registry, g: &str, v: &str) -> Option<Value> {
    let custom: Vec<Resource> = reg.all().into_iter().filter(|r| r.custom && r.group == g && r.version == v).collect();
    let custom_entries = custom.iter().flat_map(resource_entries);
    if let Some(builtin) = crate::surface::resource_list(&crate::openapi::gv_key(g, v)) {
        let mut list = builtin.clone();
        if let Some(items) = list["resources"].as_array_mut() {
            items.extend(custom_entries);
        }
        return Some(list);
    }
    if custom.is_empty() {
        return None;
    }
    let gv = if g.is_empty() { v.to_string() } else { format!("{g}/{v}") };
    let resources: Vec<Value> = custom_entries.collect();
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

/// Aggregated discovery for `/api` (legacy = true) or `/apis`: upstream's built-in groups, then
/// the groups CRDs define.
pub fn aggregated(reg: &Registry, legacy: bool) -> Value {
    let builtin = crate::surface::aggregated(legacy);
    if legacy {
        return builtin.clone();
    }
    let builtin_groups: Vec<&str> = builtin["items"].as_array().into_iter().flatten().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    let all = reg.all();
    let custom: Vec<Value> = groups(reg)
        .into_iter()
        .filter(|(g, _)| !builtin_groups.contains(&g.as_str()))
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
        .collect();
    let mut out = builtin.clone();
    if let Some(items) = out["items"].as_array_mut() {
        items.extend(custom);
    }
    out
}
