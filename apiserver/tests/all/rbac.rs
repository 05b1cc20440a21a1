//! RBAC: a user with a bearer token or impersonated with kubectl `--as` can do exactly what the
//! Roles bound to it allow, is refused the rest with upstream's 403 wording, and kubectl's
//! `auth can-i` / `auth whoami` answer for that identity.

use crate::common::kubectl::Cluster;
use apiserver::UserInfo;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, PostParams};
use serde_json::json;

const NS: &str = "team-a";

/// A server with namespace `team-a`, a Role there that may read ConfigMaps and create them,
/// bound to the service account `team-a/reader`, and a token for that account.
async fn team_cluster() -> Cluster {
    let c = Cluster::start().await;
    apply(&c, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).await;
    apply(
        &c,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "cm", "namespace": NS},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create"]}]}),
    )
    .await;
    apply(
        &c,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "cm", "namespace": NS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": NS}]}),
    )
    .await;
    c.server.access().add_token("reader-token", UserInfo::service_account(NS, "reader"));
    c
}

async fn apply(c: &Cluster, obj: &serde_json::Value) {
    c.apply("obj.json", &obj.to_string()).await;
}

/// kubectl's outcome and everything it printed.
async fn run(c: &Cluster, args: &[&str]) -> (bool, String) {
    let o = c.kubectl(args).await;
    (o.ok(), o.text())
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

fn status_of(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test]
async fn a_token_user_may_do_what_its_role_allows_and_nothing_else() {
    let c = team_cluster().await;
    let client = c.client_with_token("reader-token").await;
    let mine: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    mine.create(&PostParams::default(), &config_map("allowed")).await.expect("create is in the Role");
    let listed: Vec<String> = mine.list(&Default::default()).await.unwrap().items.into_iter().filter_map(|c| c.metadata.name).collect();
    assert_eq!(listed, ["allowed", "kube-root-ca.crt"]);
    assert_eq!(c.server.access().refused_total(), 0);

    let e = status_of(mine.delete("allowed", &Default::default()).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        e.message,
        r#"configmaps "allowed" is forbidden: User "system:serviceaccount:team-a:reader" cannot delete resource "configmaps" in API group "" in the namespace "team-a""#
    );
    let e = status_of(Api::<ConfigMap>::namespaced(client.clone(), "default").list(&Default::default()).await.unwrap_err());
    assert_eq!(e.code, 403, "a RoleBinding grants nothing outside its namespace: {}", e.message);
    let e = status_of(Api::<Secret>::namespaced(client.clone(), NS).list(&Default::default()).await.unwrap_err());
    assert!(e.message.starts_with("secrets is forbidden: "), "{}", e.message);
    let e = status_of(Api::<ConfigMap>::all(client.clone()).list(&Default::default()).await.unwrap_err());
    assert!(e.message.ends_with("at the cluster scope"), "{}", e.message);

    let refusals = c.server.access().refusals();
    assert_eq!(refusals.len(), 4);
    assert!(refusals.iter().all(|r| r.user == "system:serviceaccount:team-a:reader"));
    // Discovery is every authenticated user's (upstream's system:discovery binding).
    client.apiserver_version().await.expect("/version");
    assert_eq!(c.server.access().refused_total(), 4);
}

#[tokio::test]
async fn an_unknown_token_is_unauthorized() {
    let c = team_cluster().await;
    let client = c.client_with_token("not-a-token").await;
    let e = status_of(Api::<ConfigMap>::namespaced(client, NS).list(&Default::default()).await.unwrap_err());
    assert_eq!((e.code, e.reason.as_str()), (401, "Unauthorized"));
}

#[tokio::test]
async fn a_cluster_role_binding_to_a_group_applies_in_every_namespace() {
    let c = team_cluster().await;
    apply(
        &c,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "secret-reader"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}]}),
    )
    .await;
    apply(
        &c,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "secret-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "secret-reader"},
        "subjects": [{"kind": "Group", "name": "system:serviceaccounts:team-a", "apiGroup": "rbac.authorization.k8s.io"}]}),
    )
    .await;
    let client = c.client_with_token("reader-token").await;
    Api::<Secret>::namespaced(client.clone(), "default").list(&Default::default()).await.expect("the group's ClusterRole");
    Api::<Secret>::all(client).list(&Default::default()).await.expect("cluster-wide too");
}

#[tokio::test]
async fn kubectl_as_a_service_account_is_authorized_as_that_account() {
    let c = team_cluster().await;
    let sa = "--as=system:serviceaccount:team-a:reader";
    let (ok, out) = run(&c, &["auth", "can-i", "create", "configmaps", "-n", NS, sa]).await;
    assert!(ok && out.trim() == "yes", "{out}");
    let (ok, out) = run(&c, &["auth", "can-i", "delete", "configmaps", "-n", NS, sa]).await;
    assert!(!ok && out.starts_with("no"), "{out}");
    let (ok, out) = run(&c, &["auth", "can-i", "get", "secrets", "-n", NS, sa]).await;
    assert!(!ok && out.starts_with("no"), "{out}");
    let (ok, out) = run(&c, &["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}", sa]).await;
    assert!(ok && out.trim() == "system:serviceaccount:team-a:reader", "{out}");

    let (ok, out) = run(&c, &["get", "configmaps", "-n", NS, sa]).await;
    assert!(ok, "{out}");
    let (ok, out) = run(&c, &["get", "secrets", "-n", NS, sa]).await;
    assert!(!ok, "{out}");
    assert!(
        out.contains(r#"Error from server (Forbidden): secrets is forbidden: User "system:serviceaccount:team-a:reader" cannot list resource "secrets" in API group "" in the namespace "team-a""#),
        "{out}"
    );
    // Without --as, the kubeconfig's user is the administrator.
    let (ok, out) = run(&c, &["auth", "can-i", "delete", "secrets", "-A"]).await;
    assert!(ok && out.trim() == "yes", "{out}");
}

#[tokio::test]
async fn only_users_allowed_to_impersonate_may_impersonate() {
    let c = team_cluster().await;
    let mut kubeconfig = kube::config::Kubeconfig::read_from(c.dir.path().join("kubeconfig")).unwrap();
    let auth = kubeconfig.auth_infos[0].auth_info.as_mut().unwrap();
    auth.token = Some("reader-token".to_string().into());
    auth.impersonate = Some("embedded-admin".into());
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let e = status_of(Api::<Secret>::namespaced(client, NS).list(&Default::default()).await.unwrap_err());
    assert_eq!(e.code, 403);
    assert!(e.message.contains(r#"cannot impersonate resource "users""#), "{}", e.message);
}

/// Issue 17: the bootstrap ClusterRoles are upstream's (`bootstrap/cluster-roles-v1.32.txt`,
/// restated from its bootstrappolicy testdata), and the aggregated `view` and `edit` grant what
/// upstream's do, as `kubectl auth can-i` reports for users bound to them.
#[tokio::test]
async fn bootstrap_roles_are_upstreams_and_view_and_edit_aggregate_as_upstream() {
    let c = Cluster::start().await;
    let proxier = c.json(&["get", "clusterrole", "system:node-proxier"]).await;
    // Upstream's testdata/cluster-roles.yaml, system:node-proxier.
    assert_eq!(
        proxier["rules"],
        json!([
            {"verbs": ["list", "watch"], "apiGroups": [""], "resources": ["endpoints", "services"]},
            {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["nodes"]},
            {"verbs": ["create", "patch", "update"], "apiGroups": ["", "events.k8s.io"], "resources": ["events"]},
            {"verbs": ["list", "watch"], "apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"]},
        ])
    );
    assert_eq!(proxier["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"], "true");
    let names = c.ok(&["get", "clusterroles", "-l", "kubernetes.io/bootstrapping=rbac-defaults", "-o", "name"]).await;
    for role in [
        "system:certificates.k8s.io:legacy-unknown-approver",
        "system:kubelet-api-admin",
        "system:monitoring",
        "system:controller:deployment-controller",
    ] {
        assert!(names.lines().any(|l| l == format!("clusterrole.rbac.authorization.k8s.io/{role}")), "{role} in {names}");
    }
    let binding = c.json(&["get", "clusterrolebinding", "system:public-info-viewer"]).await;
    assert_eq!(binding["subjects"].as_array().map(Vec::len), Some(2));

    apply(&c, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).await;
    c.ok(&["create", "rolebinding", "viewers", "--clusterrole=view", "--user=vera", "-n", NS]).await;
    c.ok(&["create", "rolebinding", "editors", "--clusterrole=edit", "--user=ed", "-n", NS]).await;
    let mut wrong = vec![];
    for (user, verb, resource, allowed) in [
        ("vera", "get", "pods", true),
        ("vera", "list", "deployments.apps", true),
        ("vera", "watch", "cronjobs.batch", true),
        ("vera", "get", "pods/log", true),
        ("vera", "get", "secrets", false),
        ("vera", "create", "pods", false),
        ("vera", "get", "roles.rbac.authorization.k8s.io", false),
        ("ed", "create", "deployments.apps", true),
        ("ed", "get", "secrets", true),
        ("ed", "impersonate", "serviceaccounts", true),
        ("ed", "create", "serviceaccounts/token", true),
        ("ed", "create", "roles.rbac.authorization.k8s.io", false),
        ("ed", "delete", "namespaces", false),
    ] {
        let (resource, sub) = resource.split_once('/').map_or((resource, None), |(r, s)| (r, Some(s)));
        let mut args = vec!["auth", "can-i", verb, resource, "-n", NS];
        let sub_flag = sub.map(|s| format!("--subresource={s}"));
        args.extend(sub_flag.as_deref());
        let as_user = format!("--as={user}");
        args.push(&as_user);
        let (ok, out) = run(&c, &args).await;
        let answered = if allowed { out.trim() == "yes" } else { out.trim().starts_with("no") };
        if ok != allowed || !answered {
            wrong.push(format!("{user} {verb} {resource}{}: {}", sub.map(|s| format!("/{s}")).unwrap_or_default(), out.trim()));
        }
    }
    assert!(wrong.is_empty(), "can-i differs from upstream's view/edit: {wrong:?}");
}
