//! The bootstrap RBAC policy kube-apiserver creates at start (upstream's
//! plugin/pkg/auth/authorizer/rbac/bootstrappolicy): the user-facing ClusterRoles
//! `cluster-admin`, `admin`, `edit`, `view` (the last three filled by aggregation from the
//! `system:aggregate-to-*` roles), the `system:` roles of the control-plane components and
//! controllers, their ClusterRoleBindings, and the leader-election Roles in `kube-system`.
//! Every object carries `rbac.authorization.kubernetes.io/autoupdate: "true"` and the label
//! `kubernetes.io/bootstrapping: rbac-defaults`, as upstream's.
//!
//! The ClusterRoles and ClusterRoleBindings of `cluster-roles-v1.32.txt` (upstream's own
//! record of them, read by `fixture`) come first; the `system:controller:` roles of
//! controller_policy.go and the `kube-system` Roles are written here after upstream's
//! source, not taken from its testdata, and may differ in detail (see the README).

use serde_json::{Value, json};

const RBAC: &str = "rbac.authorization.k8s.io";
const READ: &[&str] = &["get", "list", "watch"];
const EVENTS: &[&str] = &["create", "patch", "update"];

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources})
}

fn named(groups: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources, "resourceNames": names})
}

/// Events in both groups, as upstream's `eventsRule()`.
fn events_rule() -> Value {
    rule(&["", "events.k8s.io"], &["events"], EVENTS)
}

fn meta(name: &str, namespace: Option<&str>, extra_labels: &[(&str, &str)]) -> Value {
    let mut labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    for (k, v) in extra_labels {
        labels[*k] = json!(v);
    }
    let mut m = json!({"name": name, "labels": labels, "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}});
    if let Some(ns) = namespace {
        m["namespace"] = json!(ns);
    }
    m
}

fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(name, None, &[]), "rules": rules})
}

fn subject(kind: &str, name: &str) -> Value {
    match kind {
        "ServiceAccount" => json!({"kind": kind, "name": name, "namespace": "kube-system"}),
        _ => json!({"kind": kind, "apiGroup": RBAC, "name": name}),
    }
}

fn binding(kind: &str, name: &str, namespace: Option<&str>, role_kind: &str, role: &str, subjects: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta(name, namespace, &[]),
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role}, "subjects": subjects})
}

fn cluster_binding(role: &str, subjects: Vec<Value>) -> Value {
    binding("ClusterRoleBinding", role, None, "ClusterRole", role, subjects)
}

/// The controllers of kube-controller-manager that run with their own service account in
/// `kube-system` (`--use-service-account-credentials`), each with its role
/// `system:controller:NAME` (events rule included) and a binding of the same name.
fn controller_roles() -> Vec<(&'static str, Vec<Value>)> {
    let status = |groups: &[&str], resources: &[&str]| rule(groups, resources, &["update"]);
    vec![
        (
            "attachdetach-controller",
            vec![
                rule(&[""], &["persistentvolumeclaims", "persistentvolumes"], &["list", "watch"]),
                rule(&[""], &["nodes"], &["get", "list", "watch"]),
                rule(&[""], &["nodes/status"], &["patch", "update"]),
                rule(&[""], &["pods"], &["list", "watch"]),
                rule(&["storage.k8s.io"], &["volumeattachments"], &["create", "delete", "get", "list", "watch"]),
                rule(&["storage.k8s.io"], &["csidrivers"], &["get", "list", "watch"]),
                rule(&["storage.k8s.io"], &["csinodes"], &["get", "list", "watch"]),
            ],
        ),
        ("clusterrole-aggregation-controller", vec![rule(&[RBAC], &["clusterroles"], &["escalate", "get", "list", "patch", "update", "watch"])]),
        (
            "cronjob-controller",
            vec![
                rule(&["batch"], &["cronjobs"], &["get", "list", "update", "watch"]),
                rule(&["batch"], &["jobs"], &["create", "delete", "get", "list", "patch", "update", "watch"]),
                status(&["batch"], &["cronjobs/status"]),
                rule(&["batch"], &["cronjobs/finalizers"], &["update"]),
                rule(&[""], &["pods"], &["delete", "list"]),
            ],
        ),
        (
            "daemon-set-controller",
            vec![
                rule(&["apps", "extensions"], &["daemonsets"], READ),
                status(&["apps", "extensions"], &["daemonsets/status"]),
                rule(&["apps", "extensions"], &["daemonsets/finalizers"], &["update"]),
                rule(&[""], &["nodes"], READ),
                rule(&[""], &["pods"], &["create", "delete", "list", "patch", "watch"]),
                rule(&[""], &["pods/binding"], &["create"]),
                rule(&["apps"], &["controllerrevisions"], &["create", "delete", "get", "list", "patch", "update", "watch"]),
            ],
        ),
        (
            "deployment-controller",
            vec![
                rule(&["apps", "extensions"], &["deployments"], &["get", "list", "update", "watch"]),
                status(&["apps", "extensions"], &["deployments/status"]),
                rule(&["apps", "extensions"], &["deployments/finalizers"], &["update"]),
                rule(&["apps", "extensions"], &["replicasets"], &["create", "delete", "get", "list", "patch", "update", "watch"]),
                rule(&[""], &["pods"], &["get", "list", "update", "watch"]),
            ],
        ),
        (
            "disruption-controller",
            vec![
                rule(&["apps", "extensions"], &["deployments"], &["get", "list", "watch"]),
                rule(&["apps", "extensions"], &["replicasets"], &["get", "list", "watch"]),
                rule(&[""], &["replicationcontrollers"], &["get", "list", "watch"]),
                rule(&["policy"], &["poddisruptionbudgets"], &["get", "list", "watch"]),
                rule(&["apps"], &["statefulsets"], &["get", "list", "watch"]),
                status(&["policy"], &["poddisruptionbudgets/status"]),
                rule(&["*"], &["*/scale"], &["get"]),
                rule(&[""], &["pods/status"], &["patch"]),
            ],
        ),
        (
            "endpoint-controller",
            vec![
                rule(&[""], &["pods", "services"], &["get", "list", "watch"]),
                rule(&[""], &["endpoints"], &["create", "delete", "get", "list", "update"]),
                rule(&[""], &["endpoints/restricted"], &["create"]),
            ],
        ),
        (
            "endpointslice-controller",
            vec![
                rule(&[""], &["nodes", "pods", "services"], &["get", "list", "watch"]),
                rule(&[""], &["services/finalizers"], &["update"]),
                rule(&["discovery.k8s.io"], &["endpointslices"], &["create", "delete", "get", "list", "update"]),
            ],
        ),
        (
            "endpointslicemirroring-controller",
            vec![
                rule(&[""], &["endpoints", "services"], &["get", "list", "watch"]),
                rule(&[""], &["endpoints/finalizers"], &["update"]),
                rule(&["discovery.k8s.io"], &["endpointslices"], &["create", "delete", "get", "list", "update"]),
            ],
        ),
        (
            "ephemeral-volume-controller",
            vec![
                rule(&[""], &["pods"], &["get", "list", "watch"]),
                rule(&[""], &["pods/finalizers"], &["update"]),
                rule(&[""], &["persistentvolumeclaims"], &["create", "get", "list", "watch"]),
            ],
        ),
        (
            "expand-controller",
            vec![
                rule(&[""], &["persistentvolumes"], &["get", "list", "patch", "update", "watch"]),
                rule(&[""], &["persistentvolumeclaims/status"], &["patch", "update"]),
                rule(&[""], &["persistentvolumeclaims"], &["get", "list", "watch"]),
                rule(&["storage.k8s.io"], &["storageclasses"], &["get", "list", "watch"]),
                rule(&[""], &["endpoints", "services"], &["get"]),
                rule(&[""], &["secrets"], &["get"]),
            ],
        ),
        ("generic-garbage-collector", vec![rule(&["*"], &["*"], &["delete", "get", "list", "patch", "update", "watch"])]),
        (
            "horizontal-pod-autoscaler",
            vec![
                rule(&["autoscaling"], &["horizontalpodautoscalers"], &["get", "list", "watch"]),
                status(&["autoscaling"], &["horizontalpodautoscalers/status"]),
                rule(&["*"], &["*/scale"], &["get", "update"]),
                rule(&[""], &["pods"], &["list"]),
                rule(&["metrics.k8s.io"], &["pods"], &["list"]),
                rule(&["custom.metrics.k8s.io"], &["*"], &["get", "list"]),
                rule(&["external.metrics.k8s.io"], &["*"], &["get", "list"]),
            ],
        ),
        (
            "job-controller",
            vec![
                rule(&["batch"], &["jobs"], &["get", "list", "patch", "update", "watch"]),
                status(&["batch"], &["jobs/status"]),
                rule(&["batch"], &["jobs/finalizers"], &["update"]),
                rule(&[""], &["pods"], &["create", "delete", "list", "patch", "watch"]),
            ],
        ),
        (
            "legacy-service-account-token-cleaner",
            vec![
                named(&[""], &["configmaps"], &["kube-apiserver-legacy-service-account-token-tracking"], &["get"]),
                rule(&[""], &["pods"], &["list"]),
                rule(&[""], &["secrets"], &["delete", "patch"]),
            ],
        ),
        (
            "namespace-controller",
            vec![
                rule(&[""], &["namespaces"], &["delete", "get", "list", "watch"]),
                rule(&[""], &["namespaces/finalize", "namespaces/status"], &["update"]),
                rule(&["*"], &["*"], &["delete", "deletecollection", "get", "list"]),
            ],
        ),
        (
            "node-controller",
            vec![
                rule(&[""], &["nodes"], &["delete", "get", "list", "patch", "update"]),
                rule(&[""], &["nodes/status"], &["patch", "update"]),
                rule(&[""], &["pods/status"], &["patch", "update"]),
                rule(&[""], &["pods"], &["delete", "list"]),
            ],
        ),
        (
            "persistent-volume-binder",
            vec![
                rule(&[""], &["persistentvolumes"], &["create", "delete", "get", "list", "update", "watch"]),
                status(&[""], &["persistentvolumes/status"]),
                rule(&[""], &["persistentvolumeclaims"], &["get", "list", "update", "watch"]),
                status(&[""], &["persistentvolumeclaims/status"]),
                rule(&[""], &["pods"], &["create", "delete", "get", "list", "watch"]),
                rule(&["storage.k8s.io"], &["storageclasses"], &["get", "list", "watch"]),
                rule(&[""], &["endpoints"], &["create", "delete", "get", "update"]),
                rule(&[""], &["services"], &["create", "delete", "get"]),
                rule(&[""], &["secrets"], &["get"]),
                rule(&[""], &["nodes"], &["get", "list"]),
                rule(&[""], &["events"], &["watch"]),
            ],
        ),
        (
            "pod-garbage-collector",
            vec![
                rule(&[""], &["pods"], &["delete", "list", "watch"]),
                rule(&[""], &["nodes"], &["get", "list"]),
                rule(&[""], &["pods/status"], &["patch"]),
            ],
        ),
        (
            "replicaset-controller",
            vec![
                rule(&["apps", "extensions"], &["replicasets"], &["get", "list", "update", "watch"]),
                status(&["apps", "extensions"], &["replicasets/status"]),
                rule(&["apps", "extensions"], &["replicasets/finalizers"], &["update"]),
                rule(&[""], &["pods"], &["create", "delete", "list", "patch", "watch"]),
            ],
        ),
        (
            "replication-controller",
            vec![
                rule(&[""], &["replicationcontrollers"], &["get", "list", "update", "watch"]),
                status(&[""], &["replicationcontrollers/status"]),
                rule(&[""], &["replicationcontrollers/finalizers"], &["update"]),
                rule(&[""], &["pods"], &["create", "delete", "list", "patch", "watch"]),
            ],
        ),
        ("resourcequota-controller", vec![rule(&["*"], &["*"], &["list", "watch"]), status(&[""], &["resourcequotas/status"])]),
        ("route-controller", vec![rule(&[""], &["nodes"], &["list"]), rule(&[""], &["nodes/status"], &["patch"])]),
        ("service-account-controller", vec![rule(&[""], &["serviceaccounts"], &["create"])]),
        (
            "service-controller",
            vec![
                rule(&[""], &["services"], &["get", "list", "watch"]),
                rule(&[""], &["services/status"], &["patch", "update"]),
                rule(&[""], &["nodes"], &["list", "watch"]),
            ],
        ),
        (
            "statefulset-controller",
            vec![
                rule(&[""], &["pods"], &["list", "watch"]),
                rule(&["apps"], &["statefulsets"], &["list", "watch"]),
                rule(&["apps"], &["statefulsets"], &["get"]),
                status(&["apps"], &["statefulsets/status"]),
                rule(&["apps"], &["statefulsets/finalizers"], &["update"]),
                rule(&[""], &["pods"], &["create", "delete", "get", "patch", "update"]),
                rule(&["apps"], &["controllerrevisions"], &["create", "delete", "get", "list", "patch", "update", "watch"]),
                rule(&[""], &["persistentvolumeclaims"], &["create", "get"]),
                rule(&[""], &["persistentvolumeclaims"], &["delete", "update"]),
            ],
        ),
        ("ttl-controller", vec![rule(&[""], &["nodes"], &["list", "patch", "update", "watch"])]),
        (
            "certificate-controller",
            vec![
                rule(&["certificates.k8s.io"], &["certificatesigningrequests"], &["delete", "get", "list", "watch"]),
                rule(&["certificates.k8s.io"], &["certificatesigningrequests/approval", "certificatesigningrequests/status"], &["update"]),
                named(&["certificates.k8s.io"], &["signers"], &["kubernetes.io/kube-apiserver-client-kubelet"], &["approve"]),
                named(
                    &["certificates.k8s.io"],
                    &["signers"],
                    &[
                        "kubernetes.io/legacy-unknown",
                        "kubernetes.io/kube-apiserver-client",
                        "kubernetes.io/kube-apiserver-client-kubelet",
                        "kubernetes.io/kubelet-serving",
                    ],
                    &["sign"],
                ),
                rule(&["authorization.k8s.io"], &["subjectaccessreviews"], &["create"]),
            ],
        ),
        (
            "pvc-protection-controller",
            vec![rule(&[""], &["persistentvolumeclaims"], &["get", "list", "update", "watch"]), rule(&[""], &["pods"], &["get", "list", "watch"])],
        ),
        ("pv-protection-controller", vec![rule(&[""], &["persistentvolumes"], &["get", "list", "update", "watch"])]),
        ("ttl-after-finished-controller", vec![rule(&["batch"], &["jobs"], &["delete", "get", "list", "watch"])]),
        ("root-ca-cert-publisher", vec![rule(&[""], &["configmaps"], &["create", "update"])]),
        (
            "validatingadmissionpolicy-status-controller",
            vec![
                rule(&["admissionregistration.k8s.io"], &["validatingadmissionpolicies"], &["get", "list", "watch"]),
                rule(&["admissionregistration.k8s.io"], &["validatingadmissionpolicies/status"], &["get", "patch", "update"]),
            ],
        ),
    ]
}

/// Every bootstrap object as (group, plural, namespace, object), in creation order.
pub fn objects() -> Vec<(&'static str, &'static str, &'static str, Value)> {
    let mut out: Vec<(&str, &str, &str, Value)> = vec![];
    let (roles, bindings): (Vec<_>, Vec<_>) = super::fixture::objects().into_iter().partition(|(plural, _)| *plural == "clusterroles");
    out.extend(roles.into_iter().map(|(plural, role)| (RBAC, plural, "", role)));
    let controllers = controller_roles();
    for (name, mut rules) in controllers.clone() {
        rules.push(events_rule());
        out.push((RBAC, "clusterroles", "", cluster_role(&format!("system:controller:{name}"), rules)));
    }
    let user = |u: &str| subject("User", u);
    out.extend(bindings.into_iter().map(|(plural, binding)| (RBAC, plural, "", binding)));
    for (name, _) in controllers {
        let full = format!("system:controller:{name}");
        out.push((RBAC, "clusterrolebindings", "", cluster_binding(&full, vec![subject("ServiceAccount", name)])));
    }
    // Namespaced roles: reading the authentication ConfigMap, and leader election.
    let role = |name: &str, ns: &str, rules: Vec<Value>| json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(name, Some(ns), &[]), "rules": rules});
    let leases = |holder: &str| {
        vec![named(&["coordination.k8s.io"], &["leases"], &[holder], &["get", "update"]), rule(&["coordination.k8s.io"], &["leases"], &["create"])]
    };
    out.push((
        RBAC,
        "roles",
        "kube-system",
        role(
            "extension-apiserver-authentication-reader",
            "kube-system",
            vec![named(&[""], &["configmaps"], &["extension-apiserver-authentication"], READ)],
        ),
    ));
    out.push((
        RBAC,
        "roles",
        "kube-system",
        role("system::leader-locking-kube-controller-manager", "kube-system", leases("kube-controller-manager")),
    ));
    out.push((RBAC, "roles", "kube-system", role("system::leader-locking-kube-scheduler", "kube-system", leases("kube-scheduler"))));
    let rb = |name: &str, subjects: Vec<Value>| binding("RoleBinding", name, Some("kube-system"), "Role", name, subjects);
    out.push((
        RBAC,
        "rolebindings",
        "kube-system",
        rb(
            "system::leader-locking-kube-controller-manager",
            vec![user("system:kube-controller-manager"), subject("ServiceAccount", "kube-controller-manager")],
        ),
    ));
    out.push((
        RBAC,
        "rolebindings",
        "kube-system",
        rb("system::leader-locking-kube-scheduler", vec![user("system:kube-scheduler"), subject("ServiceAccount", "kube-scheduler")]),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_binding_names_a_role_that_exists() {
        let objects = objects();
        let names = |plural: &str| -> Vec<String> {
            objects.iter().filter(|o| o.1 == plural).map(|o| o.3["metadata"]["name"].as_str().unwrap().to_string()).collect()
        };
        let (cluster, roles) = (names("clusterroles"), names("roles"));
        for (_, plural, _, b) in objects.iter().filter(|o| o.1.ends_with("bindings")) {
            let role = b["roleRef"]["name"].as_str().unwrap().to_string();
            let pool = if *plural == "rolebindings" { &roles } else { &cluster };
            assert!(pool.contains(&role), "{role}");
        }
        for wanted in ["cluster-admin", "admin", "edit", "view", "system:discovery", "system:controller:deployment-controller"] {
            assert!(cluster.contains(&wanted.to_string()), "{wanted}");
        }
    }
}
