//! The objects a real cluster always has, kept as kube-apiserver and kube-controller-manager
//! keep them: the `default/kubernetes` Service with its Endpoints and EndpointSlice naming
//! the server (the apiserver's endpoint reconciler), a `default` ServiceAccount and the
//! `kube-root-ca.crt` ConfigMap in every namespace (the service-account controller and the
//! root-CA publisher: created with the namespace, re-created when deleted), the bootstrap RBAC
//! roles and bindings ([`policy`]), and ClusterRole aggregation (the
//! clusterrole-aggregation controller: `aggregationRule` → the union of the selected roles'
//! rules). They are written through [`Core`]'s verbs like any client, so they have
//! resourceVersions, managedFields and watch events.

mod fixture;
pub mod policy;

use crate::resources::Resource;
use crate::rest::{Core, WriteOptions, meta_str};
use crate::selector::LabelSelector;
use crate::status::Result;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

/// The ServiceAccount every namespace has.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// The ConfigMap holding the cluster CA in every namespace, and its key.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
const ROOT_CA_KEY: &str = "ca.crt";

fn as_manager(manager: &str) -> WriteOptions {
    WriteOptions { field_manager: manager.into(), ..Default::default() }
}

/// A self-signed CA certificate (PEM) standing for the cluster CA: the server speaks plain
/// HTTP, so it signs nothing, but pods and clients that read `kube-root-ca.crt` find a
/// well-formed certificate as on a real cluster. One per process.
fn root_ca_pem() -> &'static str {
    static PEM: OnceLock<String> = OnceLock::new();
    PEM.get_or_init(|| {
        let generate = || -> std::result::Result<String, rcgen::Error> {
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
            params.distinguished_name.push(rcgen::DnType::CommonName, "kubernetes");
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let key = rcgen::KeyPair::generate()?;
            Ok(params.self_signed(&key)?.pem())
        };
        generate().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "could not generate the cluster CA certificate; kube-root-ca.crt stays empty");
            String::new()
        })
    })
}

impl Core {
    /// Create what a fresh cluster has beyond its namespaces (each namespace's defaults come
    /// with it, see [`Core::ensure_namespace_defaults`]). Objects that exist (a data dir) are
    /// left as they are.
    pub(crate) fn bootstrap_objects(&self) {
        self.ensure_kubernetes_service(None);
        for (group, plural, ns, obj) in policy::objects() {
            let Some(res) = self.registry.find(group, "v1", plural) else { continue };
            let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
            if self.store.get(&self.key(&res, ns, &name)).is_none()
                && let Err(e) = crate::rest::wait(self.create(&res, ns, obj, &as_manager("kube-apiserver")))
            {
                tracing::warn!(%name, error = %e, "bootstrap RBAC object not created");
            }
        }
        self.aggregate_cluster_roles();
    }

    /// The `default` ServiceAccount and `kube-root-ca.crt` ConfigMap of namespace `ns`,
    /// created if missing (not in a terminating namespace).
    pub(crate) fn ensure_namespace_defaults(&self, ns: &str) {
        if !self.config.controllers || !self.namespace_exists_now(ns) || self.namespace_terminating(ns) {
            return;
        }
        let wanted = [
            ("serviceaccounts", DEFAULT_SERVICE_ACCOUNT, json!({"metadata": {"name": DEFAULT_SERVICE_ACCOUNT}})),
            (
                "configmaps",
                ROOT_CA_CONFIGMAP,
                json!({"metadata": {"name": ROOT_CA_CONFIGMAP, "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
                    "data": {ROOT_CA_KEY: root_ca_pem()}}),
            ),
        ];
        for (plural, name, obj) in wanted {
            let res = self.registry.find("", "v1", plural).expect("built-in");
            if self.store.get(&self.key(&res, ns, name)).is_none() {
                // AlreadyExists from a concurrent write is fine: someone created it.
                let _ = crate::rest::wait(self.create(&res, ns, obj, &as_manager("kube-controller-manager")));
            }
        }
    }

    fn namespace_exists_now(&self, ns: &str) -> bool {
        let nsr = self.registry.find("", "v1", "namespaces").expect("namespaces");
        self.store.get(&self.key(&nsr, "", ns)).is_some()
    }

    /// The `default/kubernetes` Service (ClusterIP 10.96.0.1, `https` 443 → the server's port)
    /// and its Endpoints and EndpointSlice naming the address the server serves on. Before
    /// [`crate::ApiServer::serve`] (in-process only), the port is 443.
    pub fn ensure_kubernetes_service(&self, served_at: Option<SocketAddr>) {
        let (ip, port) = match served_at {
            Some(a) if !a.ip().is_unspecified() => (a.ip().to_string(), a.port()),
            Some(a) => ("127.0.0.1".to_string(), a.port()),
            None => ("127.0.0.1".to_string(), 443),
        };
        let opts = as_manager("kube-apiserver");
        let labels = json!({"component": "apiserver", "provider": "kubernetes"});
        let service = json!({"metadata": {"name": "kubernetes", "labels": labels}, "spec": {
            "type": "ClusterIP", "sessionAffinity": "None",
            "clusterIP": crate::services::kubernetes_service_ip().to_string(),
            "ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": port}]}});
        let endpoints = json!({"metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]});
        let slice = json!({"metadata": {"name": "kubernetes", "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4", "endpoints": [{"addresses": [ip], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]});
        for (group, plural, body, target) in [
            ("", "services", service, "/spec/ports/0/targetPort"),
            ("", "endpoints", endpoints, "/subsets/0/ports/0/port"),
            ("discovery.k8s.io", "endpointslices", slice, "/ports/0/port"),
        ] {
            let Some(res) = self.registry.find(group, "v1", plural) else { continue };
            let result: Result<Value> = match self.store.get(&self.key(&res, "default", "kubernetes")) {
                None => crate::rest::wait(self.create(&res, "default", body, &opts)),
                Some(current) if served_at.is_some() && current.pointer(target) != Some(&json!(port)) => {
                    let mut updated = current.clone();
                    for key in ["subsets", "endpoints", "ports"] {
                        if let Some(v) = body.get(key) {
                            updated[key] = v.clone();
                        }
                    }
                    if let Some(ports) = body.pointer("/spec/ports") {
                        updated["spec"]["ports"] = ports.clone();
                    }
                    crate::rest::wait(self.update(&res, "default", "kubernetes", updated, crate::rest::Sub::Main, &opts))
                }
                Some(current) => Ok(current),
            };
            if let Err(e) = result {
                tracing::warn!(resource = plural, error = %e, "the kubernetes service object was not written");
            }
        }
    }

    /// What the controllers of this module do after a write or delete of `obj` (the write path
    /// calls it): a
    /// namespace gets (back) its default ServiceAccount and root CA ConfigMap, a ClusterRole
    /// change re-runs aggregation.
    pub(crate) fn keep_cluster_objects(&self, res: &Resource, obj: &Value) {
        match (res.group.as_str(), res.plural.as_str()) {
            ("", "namespaces") => self.ensure_namespace_defaults(&meta_str(obj, "name")),
            ("", "serviceaccounts" | "configmaps") => {
                let name = meta_str(obj, "name");
                if name == DEFAULT_SERVICE_ACCOUNT || name == ROOT_CA_CONFIGMAP {
                    self.ensure_namespace_defaults(&meta_str(obj, "namespace"));
                }
            }
            ("rbac.authorization.k8s.io", "clusterroles") => self.aggregate_cluster_roles(),
            _ => {}
        }
    }

    /// Fill every ClusterRole that has an `aggregationRule` with the union of the rules of the
    /// ClusterRoles its selectors match, until nothing changes (edit aggregates into admin).
    pub(crate) fn aggregate_cluster_roles(&self) {
        if !self.config.controllers {
            return; // the clusterrole-aggregation controller is kube-controller-manager's
        }
        if self.aggregating.swap(true, Ordering::SeqCst) {
            return; // our own writes below come back here
        }
        let Some(res) = self.registry.find("rbac.authorization.k8s.io", "v1", "clusterroles") else {
            self.aggregating.store(false, Ordering::SeqCst);
            return;
        };
        for _ in 0..8 {
            let (roles, _) = self.store.list(&res.group_resource(), None);
            let mut changed = false;
            for role in roles.iter().filter(|r| r.get("aggregationRule").is_some_and(Value::is_object)) {
                let selectors: Vec<LabelSelector> = role
                    .pointer("/aggregationRule/clusterRoleSelectors")
                    .and_then(Value::as_array)
                    .map(|s| s.iter().map(LabelSelector::from_object).collect())
                    .unwrap_or_default();
                let name = role["metadata"]["name"].as_str().unwrap_or_default();
                let mut sources: Vec<&Value> = roles
                    .iter()
                    .filter(|r| r["metadata"]["name"].as_str() != Some(name) && selectors.iter().any(|s| !s.0.is_empty() && s.matches(r)))
                    .collect();
                sources.sort_by_key(|r| r["metadata"]["name"].as_str().unwrap_or_default().to_string());
                let mut rules: Vec<Value> = vec![];
                for rule in sources.iter().flat_map(|r| r["rules"].as_array().cloned().unwrap_or_default()) {
                    if !rules.contains(&rule) {
                        rules.push(rule);
                    }
                }
                if role.get("rules") != Some(&json!(rules)) {
                    let mut updated = role.clone();
                    updated["rules"] = json!(rules);
                    match crate::rest::wait(self.update(
                        &res,
                        "",
                        name,
                        updated,
                        crate::rest::Sub::Main,
                        &as_manager("clusterrole-aggregation-controller"),
                    )) {
                        Ok(_) => changed = true,
                        Err(e) => tracing::warn!(%name, error = %e, "aggregated ClusterRole not updated"),
                    }
                }
            }
            if !changed {
                break;
            }
        }
        self.aggregating.store(false, Ordering::SeqCst);
    }
}
