//! RBAC authorization, as kube-apiserver's `--authorization-mode=RBAC` decides: a request is
//! allowed when a rule of a Role or ClusterRole bound to the user (by name, group or service
//! account) covers its verb, API group, resource (and subresource), name, or non-resource path.
//! There is no deny rule; what no rule allows is forbidden.
//!
//! The rules come from the stored `rbac.authorization.k8s.io/v1` objects at the time of each
//! request, so `kubectl apply` of a Role changes what is allowed at once. The bootstrap roles
//! and bindings are stored like any (the `bootstrap` module's `policy`), and aggregated ClusterRoles
//! hold the rules the aggregation controller copied into them. Two things are also built in:
//! `system:masters` may do anything (as upstream, before any RBAC check), and every
//! authenticated user gets what the bootstrap roles `system:discovery`,
//! `system:public-info-viewer` and `system:basic-user` give (discovery, `/version`, health, and
//! reviews of their own access) even if those bindings were deleted.

use serde_json::Value;

use crate::resources::GroupResource;
use crate::store::Store;
use crate::user::UserInfo;

/// What a request asks to do, as upstream's `authorizer.Attributes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attributes {
    /// A request on an API resource.
    Resource {
        /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
        verb: String,
        group: String,
        resource: String,
        /// `status`, `scale`, `binding`, ... or empty.
        subresource: String,
        /// Empty for cluster-scoped resources and for lists across namespaces.
        namespace: String,
        /// Empty for collections and creates.
        name: String,
    },
    /// A request on a path that is not a resource (`/version`, `/api`, `/debug/faults`).
    NonResource {
        /// The HTTP method, lowercased (`get`, `post`, ...).
        verb: String,
        path: String,
    },
}

/// The bootstrap policy every authenticated user has (see the module docs).
const AUTHENTICATED_PATHS: &[&str] =
    &["/api", "/api/*", "/apis", "/apis/*", "/version", "/version/", "/openapi", "/openapi/*", "/healthz", "/livez", "/readyz"];
const SELF_REVIEWS: &[(&str, &str)] = &[
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
];

/// Whether `user` may do what `attrs` says, given the RBAC objects in `store`.
pub fn allows(store: &Store, user: &UserInfo, attrs: &Attributes) -> bool {
    if user.groups.iter().any(|g| g == "system:masters") || bootstrap_allows(user, attrs) {
        return true;
    }
    let namespace = match attrs {
        Attributes::Resource { namespace, .. } => namespace.as_str(),
        Attributes::NonResource { .. } => "",
    };
    let cluster_roles = by_name(store, "clusterroles", None);
    let binds = |binding: &Value| binding["subjects"].as_array().is_some_and(|s| s.iter().any(|s| subject_matches(s, user)));
    let rule_allows =
        |role: Option<&Value>| role.and_then(|r| r["rules"].as_array()).is_some_and(|rules| rules.iter().any(|r| rule_matches(r, attrs)));

    let cluster_wide = store.list(&gr("clusterrolebindings"), None).0;
    for b in cluster_wide.iter().filter(|b| binds(b)) {
        if b["roleRef"]["kind"] == "ClusterRole" && rule_allows(cluster_roles.get(b["roleRef"]["name"].as_str().unwrap_or_default())) {
            return true;
        }
    }
    if namespace.is_empty() {
        return false;
    }
    let roles = by_name(store, "roles", Some(namespace));
    for b in store.list(&gr("rolebindings"), Some(namespace)).0.iter().filter(|b| binds(b)) {
        let name = b["roleRef"]["name"].as_str().unwrap_or_default();
        let role = match b["roleRef"]["kind"].as_str() {
            Some("ClusterRole") => cluster_roles.get(name),
            Some("Role") => roles.get(name),
            _ => None,
        };
        if rule_allows(role) {
            return true;
        }
    }
    false
}

/// The message of the 403 upstream answers (`forbiddenMessage` in k8s.io/apiserver).
pub fn forbidden_message(user: &UserInfo, attrs: &Attributes) -> String {
    match attrs {
        Attributes::NonResource { verb, path } => format!("User {:?} cannot {verb} path {path:?}", user.name),
        Attributes::Resource { verb, group, resource, subresource, namespace, .. } => {
            let resource = if subresource.is_empty() { resource.clone() } else { format!("{resource}/{subresource}") };
            if namespace.is_empty() {
                format!("User {:?} cannot {verb} resource {resource:?} in API group {group:?} at the cluster scope", user.name)
            } else {
                format!("User {:?} cannot {verb} resource {resource:?} in API group {group:?} in the namespace {namespace:?}", user.name)
            }
        }
    }
}

fn bootstrap_allows(user: &UserInfo, attrs: &Attributes) -> bool {
    if !user.groups.iter().any(|g| g == "system:authenticated") {
        return false;
    }
    match attrs {
        Attributes::NonResource { verb, path } => verb == "get" && AUTHENTICATED_PATHS.iter().any(|p| path_matches(p, path)),
        Attributes::Resource { verb, group, resource, .. } => verb == "create" && SELF_REVIEWS.iter().any(|(g, r)| g == group && r == resource),
    }
}

fn gr(resource: &str) -> GroupResource {
    GroupResource { group: "rbac.authorization.k8s.io".into(), resource: resource.into() }
}

fn by_name(store: &Store, resource: &str, namespace: Option<&str>) -> std::collections::HashMap<String, Value> {
    store.list(&gr(resource), namespace).0.into_iter().filter_map(|o| Some((o["metadata"]["name"].as_str()?.to_string(), o))).collect()
}

/// upstream `appliesTo`: a User by name, a Group by membership, a ServiceAccount by its user name.
fn subject_matches(subject: &Value, user: &UserInfo) -> bool {
    let name = subject["name"].as_str().unwrap_or_default();
    match subject["kind"].as_str() {
        Some("User") => user.name == name,
        Some("Group") => user.groups.iter().any(|g| g == name),
        Some("ServiceAccount") => {
            let namespace = subject["namespace"].as_str().unwrap_or_default();
            !namespace.is_empty() && user.name == format!("system:serviceaccount:{namespace}:{name}")
        }
        _ => false,
    }
}

/// upstream `RuleAllows` (k8s.io/component-helpers/auth/rbac/validation).
fn rule_matches(rule: &Value, attrs: &Attributes) -> bool {
    let list = |field: &str| -> Vec<&str> { rule[field].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default() };
    let has = |field: &str, want: &str| list(field).iter().any(|v| *v == "*" || *v == want);
    match attrs {
        Attributes::Resource { verb, group, resource, subresource, name, .. } => {
            let combined = if subresource.is_empty() { resource.clone() } else { format!("{resource}/{subresource}") };
            let resource_ok = list("resources")
                .iter()
                .any(|r| *r == "*" || *r == combined || (!subresource.is_empty() && r.strip_prefix("*/") == Some(subresource.as_str())));
            let names = list("resourceNames");
            has("verbs", verb) && has("apiGroups", group) && resource_ok && (names.is_empty() || names.contains(&name.as_str()))
        }
        Attributes::NonResource { verb, path } => has("verbs", verb) && list("nonResourceURLs").iter().any(|p| path_matches(p, path)),
    }
}

/// upstream `NonResourceURLMatches`: exact, `*`, or a prefix ending in `*`.
fn path_matches(rule: &str, path: &str) -> bool {
    rule == "*" || rule == path || rule.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resource(verb: &str, group: &str, resource: &str, subresource: &str, namespace: &str, name: &str) -> Attributes {
        Attributes::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    #[test]
    fn a_rule_covers_its_verbs_groups_and_resources_and_no_others() {
        let rule = json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]});
        assert!(rule_matches(&rule, &resource("get", "", "pods", "", "default", "p")));
        assert!(rule_matches(&rule, &resource("list", "", "pods", "", "", "")));
        assert!(!rule_matches(&rule, &resource("delete", "", "pods", "", "default", "p")));
        assert!(!rule_matches(&rule, &resource("get", "apps", "pods", "", "default", "p")));
        assert!(!rule_matches(&rule, &resource("get", "", "secrets", "", "default", "s")));
    }

    #[test]
    fn a_subresource_needs_its_own_rule_or_a_wildcard_for_it() {
        let main = json!({"verbs": ["update"], "apiGroups": ["batch"], "resources": ["jobs"]});
        assert!(!rule_matches(&main, &resource("update", "batch", "jobs", "status", "default", "j")));
        let status = json!({"verbs": ["update"], "apiGroups": ["batch"], "resources": ["jobs/status"]});
        assert!(rule_matches(&status, &resource("update", "batch", "jobs", "status", "default", "j")));
        assert!(!rule_matches(&status, &resource("update", "batch", "jobs", "", "default", "j")));
        let any_status = json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*/status"]});
        assert!(rule_matches(&any_status, &resource("patch", "apps", "deployments", "status", "default", "d")));
        let all = json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]});
        assert!(rule_matches(&all, &resource("patch", "apps", "deployments", "scale", "default", "d")));
    }

    #[test]
    fn resource_names_limit_a_rule_to_those_objects() {
        let rule = json!({"verbs": ["get", "update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["mine"]});
        assert!(rule_matches(&rule, &resource("get", "coordination.k8s.io", "leases", "", "ns", "mine")));
        assert!(!rule_matches(&rule, &resource("get", "coordination.k8s.io", "leases", "", "ns", "theirs")));
        // A create has no name yet, so resourceNames never allow it (as upstream).
        let create = json!({"verbs": ["create"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["mine"]});
        assert!(!rule_matches(&create, &resource("create", "coordination.k8s.io", "leases", "", "ns", "")));
    }

    #[test]
    fn non_resource_rules_match_exact_paths_and_star_prefixes() {
        let rule = json!({"verbs": ["get"], "nonResourceURLs": ["/metrics", "/debug/*"]});
        let get = |p: &str| Attributes::NonResource { verb: "get".into(), path: p.into() };
        assert!(rule_matches(&rule, &get("/metrics")));
        assert!(rule_matches(&rule, &get("/debug/faults")));
        assert!(!rule_matches(&rule, &get("/metricsx")));
        assert!(!rule_matches(&rule, &Attributes::NonResource { verb: "post".into(), path: "/debug/faults".into() }));
        assert!(!rule_matches(&rule, &resource("get", "", "metrics", "", "", "")));
    }

    #[test]
    fn subjects_match_users_groups_and_service_accounts_by_their_user_names() {
        let sa = UserInfo::service_account("ops", "host");
        assert_eq!(sa.name, "system:serviceaccount:ops:host");
        assert!(subject_matches(&json!({"kind": "ServiceAccount", "name": "host", "namespace": "ops"}), &sa));
        assert!(!subject_matches(&json!({"kind": "ServiceAccount", "name": "host", "namespace": "other"}), &sa));
        assert!(subject_matches(&json!({"kind": "Group", "name": "system:serviceaccounts:ops"}), &sa));
        assert!(subject_matches(&json!({"kind": "User", "name": "system:serviceaccount:ops:host"}), &sa));
        assert!(!subject_matches(&json!({"kind": "User", "name": "host"}), &sa));
    }

    #[test]
    fn forbidden_messages_are_worded_as_upstream() {
        let user = UserInfo::service_account("ops", "host");
        assert_eq!(
            forbidden_message(&user, &resource("list", "", "secrets", "", "default", "")),
            r#"User "system:serviceaccount:ops:host" cannot list resource "secrets" in API group "" in the namespace "default""#
        );
        assert_eq!(
            forbidden_message(&user, &resource("update", "batch", "jobs", "status", "", "j")),
            r#"User "system:serviceaccount:ops:host" cannot update resource "jobs/status" in API group "batch" at the cluster scope"#
        );
        assert_eq!(
            forbidden_message(&user, &Attributes::NonResource { verb: "post".into(), path: "/debug/faults".into() }),
            r#"User "system:serviceaccount:ops:host" cannot post path "/debug/faults""#
        );
    }
}
