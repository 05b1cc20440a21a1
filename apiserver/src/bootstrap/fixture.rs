//! The bootstrap ClusterRoles and ClusterRoleBindings as upstream records them
//! (`cluster-roles-v1.32.txt`, restated from upstream's bootstrappolicy testdata; its header says
//! where from and its format), turned into the objects the server creates at start.

use serde_json::{Map, Value, json};

const TEXT: &str = include_str!("cluster-roles-v1.32.txt");
const RBAC_V1: &str = "rbac.authorization.k8s.io/v1";

/// Every object of the fixture as (plural, object), in the fixture's order.
pub fn objects() -> Vec<(&'static str, Value)> {
    parse(TEXT).unwrap_or_else(|e| panic!("bootstrap/cluster-roles-v1.32.txt: {e}"))
}

fn list(field: &str) -> Vec<String> {
    field.split(',').map(|s| if s == "\"\"" { String::new() } else { s.to_string() }).collect()
}

fn metadata(name: &str, labels: &[&str]) -> Result<Value, String> {
    let mut l = Map::new();
    l.insert("kubernetes.io/bootstrapping".into(), json!("rbac-defaults"));
    for pair in labels {
        let (k, v) = pair.split_once('=').ok_or_else(|| format!("label `{pair}` is not KEY=VALUE"))?;
        l.insert(k.into(), json!(v));
    }
    Ok(json!({"name": name, "labels": l, "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}}))
}

fn subject(spec: &str) -> Result<Value, String> {
    let (kind, name) = spec.split_once(':').ok_or_else(|| format!("subject `{spec}` is not KIND:NAME"))?;
    Ok(match kind {
        "ServiceAccount" => json!({"kind": kind, "name": name, "namespace": "kube-system"}),
        "User" | "Group" => json!({"kind": kind, "apiGroup": "rbac.authorization.k8s.io", "name": name}),
        other => return Err(format!("unknown subject kind `{other}`")),
    })
}

/// The ClusterRole being read: the last object, if it is one.
fn last_role<'a>(out: &'a mut [(&'static str, Value)]) -> Option<&'a mut Value> {
    out.last_mut().filter(|(plural, _)| *plural == "clusterroles").map(|(_, o)| o)
}

fn parse(text: &str) -> Result<Vec<(&'static str, Value)>, String> {
    let mut out: Vec<(&'static str, Value)> = vec![];
    for (n, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}", n + 1);
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] => {}
            [first, ..] if first.starts_with('#') => {}
            ["clusterrole", name, labels @ ..] => {
                let meta = metadata(name, labels).map_err(at)?;
                out.push(("clusterroles", json!({"apiVersion": RBAC_V1, "kind": "ClusterRole", "metadata": meta, "rules": []})));
            }
            ["aggregate", selector] => {
                let (k, v) = selector.split_once('=').ok_or_else(|| at(format!("`{selector}` is not KEY=VALUE")))?;
                let r = last_role(&mut out).ok_or_else(|| at("aggregate outside a clusterrole".into()))?;
                let mut selectors = r["aggregationRule"]["clusterRoleSelectors"].as_array().cloned().unwrap_or_default();
                selectors.push(json!({"matchLabels": {k: v}}));
                r["aggregationRule"] = json!({"clusterRoleSelectors": selectors});
            }
            ["rule", groups, resources, verbs, names @ ..] if names.len() <= 1 => {
                let mut rule = json!({"verbs": list(verbs), "apiGroups": list(groups), "resources": list(resources)});
                if let [names] = names {
                    rule["resourceNames"] = json!(list(names));
                }
                let r = last_role(&mut out).ok_or_else(|| at("rule outside a clusterrole".into()))?;
                r["rules"].as_array_mut().expect("rules is a list").push(rule);
            }
            ["urls", paths, verbs] => {
                let r = last_role(&mut out).ok_or_else(|| at("urls outside a clusterrole".into()))?;
                r["rules"].as_array_mut().expect("rules is a list").push(json!({"verbs": list(verbs), "nonResourceURLs": list(paths)}));
            }
            ["clusterrolebinding", name, role_name, subjects @ ..] => {
                let subjects = subjects.iter().map(|s| subject(s)).collect::<Result<Vec<_>, _>>().map_err(at)?;
                let mut b = json!({"apiVersion": RBAC_V1, "kind": "ClusterRoleBinding", "metadata": metadata(name, &[]).map_err(at)?,
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name}});
                if !subjects.is_empty() {
                    b["subjects"] = json!(subjects);
                }
                out.push(("clusterrolebindings", b));
            }
            _ => return Err(at(format!("cannot read `{}`", line.trim()))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named<'a>(objects: &'a [(&str, Value)], plural: &str, name: &str) -> &'a Value {
        &objects.iter().find(|(p, o)| *p == plural && o["metadata"]["name"] == name).unwrap_or_else(|| panic!("{plural}/{name}")).1
    }

    /// Spot checks against upstream's testdata, rule for rule.
    #[test]
    fn the_fixture_reads_as_upstreams_objects() {
        let objects = objects();
        assert_eq!(objects.iter().filter(|(p, _)| *p == "clusterroles").count(), 31);
        assert_eq!(objects.iter().filter(|(p, _)| *p == "clusterrolebindings").count(), 12);
        let proxier = named(&objects, "clusterroles", "system:node-proxier");
        assert_eq!(
            proxier["rules"],
            json!([
                {"verbs": ["list", "watch"], "apiGroups": [""], "resources": ["endpoints", "services"]},
                {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["nodes"]},
                {"verbs": ["create", "patch", "update"], "apiGroups": ["", "events.k8s.io"], "resources": ["events"]},
                {"verbs": ["list", "watch"], "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"]},
            ])
        );
        let view = named(&objects, "clusterroles", "view");
        assert_eq!(view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"], "true");
        assert_eq!(
            view["aggregationRule"],
            json!({"clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}]})
        );
        let approver = named(&objects, "clusterroles", "system:certificates.k8s.io:legacy-unknown-approver");
        assert_eq!(approver["rules"][0]["resourceNames"], json!(["kubernetes.io/legacy-unknown"]));
        let viewer = named(&objects, "clusterrolebindings", "system:public-info-viewer");
        assert_eq!(viewer["subjects"][1], json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:unauthenticated"}));
        assert!(named(&objects, "clusterrolebindings", "system:node").get("subjects").is_none(), "upstream binds system:node to nobody");
    }

    #[test]
    fn a_malformed_line_is_named() {
        assert_eq!(parse("clusterrole x\n  rule a b\n").unwrap_err(), "line 2: cannot read `rule a b`");
        assert_eq!(parse("  urls /x get\n").unwrap_err(), "line 1: urls outside a clusterrole");
    }
}
