//! The built-in kinds a 1.32 kube-apiserver serves by default (GA groups, plus autoscaling/v1).
//!
//! Group, version, kind, plural and scope come from k8s-openapi's `Resource` impls (the types
//! generated from upstream's OpenAPI), so a row cannot misspell them; what OpenAPI does not
//! carry (short names, categories, verbs, subresources) is written beside each row as upstream's
//! discovery documents list it (`api/discovery/*.json` in kubernetes/kubernetes). The test
//! `apiserver/tests/all/kinds.rs` compares the result with the fixture
//! `apiserver/tests/all/fixtures/api-resources-v1.32.txt`.

use super::{ALL_VERBS, GroupResource, Resource, ScaleSpec, Subresource};
use k8s_openapi::api::{
    admissionregistration::v1 as admission, apps::v1 as apps, authentication::v1 as authn, authorization::v1 as authz,
    autoscaling::v1 as autoscaling1, autoscaling::v2 as autoscaling2, batch::v1 as batch, certificates::v1 as certificates,
    coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery, events::v1 as events, flowcontrol::v1 as flowcontrol,
    networking::v1 as networking, node::v1 as node, policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
use std::any::TypeId;

/// One row: a k8s-openapi type plus what discovery says about it.
struct Row(Resource);

fn kind<K: k8s_openapi::Resource + 'static>() -> Row {
    let namespaced = TypeId::of::<K::Scope>() == TypeId::of::<k8s_openapi::NamespaceResourceScope>();
    Row(Resource {
        group: K::GROUP.into(),
        version: K::VERSION.into(),
        plural: K::URL_PATH_SEGMENT.into(),
        // Upstream's singularName is the lower-cased kind (`endpoints` for Endpoints).
        singular: K::KIND.to_ascii_lowercase(),
        kind: K::KIND.into(),
        list_kind: format!("{}List", K::KIND),
        namespaced,
        short_names: vec![],
        categories: vec![],
        status: false,
        scale: None,
        generation: false,
        keep_status_on_create: false,
        storage: true,
        schema: None,
        printer_columns: vec![],
        custom: false,
        alias_of: None,
        ephemeral: false,
        verbs: ALL_VERBS,
        subresources: &[],
    })
}

impl Row {
    fn short(mut self, names: &[&str]) -> Self {
        self.0.short_names = names.iter().map(|s| s.to_string()).collect();
        self
    }
    /// In the `all` category (`kubectl get all`).
    fn all(mut self) -> Self {
        self.0.categories = vec!["all".into()];
        self
    }
    fn api_extensions(mut self) -> Self {
        self.0.categories = vec!["api-extensions".into()];
        self
    }
    /// Has `/status`: main-resource writes keep the stored status.
    fn status(mut self) -> Self {
        self.0.status = true;
        self
    }
    /// Has `/scale` at `.spec.replicas` / `.status.replicas` / `.spec.selector`.
    fn scale(mut self) -> Self {
        self.0.scale = Some(ScaleSpec {
            spec_replicas_path: ".spec.replicas".into(),
            status_replicas_path: ".status.replicas".into(),
            label_selector_path: Some(".spec.selector".into()),
        });
        self
    }
    /// `metadata.generation` is bumped when the spec changes.
    fn generation(mut self) -> Self {
        self.0.generation = true;
        self
    }
    fn verbs(mut self, verbs: &'static [&'static str]) -> Self {
        self.0.verbs = verbs;
        self
    }
    /// Create-only, answered and never stored (reviews).
    fn review(mut self) -> Self {
        self.0.ephemeral = true;
        self.0.verbs = &["create"];
        self
    }
    fn subresources(mut self, subs: &'static [Subresource]) -> Self {
        self.0.subresources = subs;
        self
    }
    /// Served at this version, stored at another (autoscaling/v1 HPAs are stored as v2).
    fn not_storage(mut self) -> Self {
        self.0.storage = false;
        self
    }
}

const fn sub(name: &'static str, group: &'static str, version: &'static str, kind: &'static str, verbs: &'static [&'static str]) -> Subresource {
    Subresource { name, group, version, kind, verbs }
}

const GET_PATCH_UPDATE: &[&str] = &["get", "patch", "update"];

const POD_SUBRESOURCES: &[Subresource] = &[
    sub("binding", "", "", "Binding", &["create"]),
    sub("ephemeralcontainers", "", "", "Pod", GET_PATCH_UPDATE),
    sub("eviction", "policy", "v1", "Eviction", &["create"]),
    sub("log", "", "", "Pod", &["get"]),
];
const SERVICE_ACCOUNT_SUBRESOURCES: &[Subresource] = &[sub("token", "authentication.k8s.io", "v1", "TokenRequest", &["create"])];
const CSR_SUBRESOURCES: &[Subresource] = &[sub("approval", "", "", "CertificateSigningRequest", GET_PATCH_UPDATE)];
const NAMESPACE_SUBRESOURCES: &[Subresource] = &[sub("finalize", "", "", "Namespace", &["update"])];

fn rows() -> Vec<Row> {
    vec![
        // core/v1, in upstream's discovery order.
        kind::<core::Binding>().verbs(&["create"]),
        kind::<core::ComponentStatus>().short(&["cs"]).verbs(&["get", "list"]),
        kind::<core::ConfigMap>().short(&["cm"]),
        kind::<core::Endpoints>().short(&["ep"]),
        kind::<core::Event>().short(&["ev"]),
        kind::<core::LimitRange>().short(&["limits"]),
        kind::<core::Namespace>()
            .short(&["ns"])
            .status()
            .verbs(&["create", "delete", "get", "list", "patch", "update", "watch"])
            .subresources(NAMESPACE_SUBRESOURCES),
        kind::<core::Node>().short(&["no"]).status(),
        kind::<core::PersistentVolumeClaim>().short(&["pvc"]).status(),
        kind::<core::PersistentVolume>().short(&["pv"]).status(),
        kind::<core::Pod>().short(&["po"]).all().status().subresources(POD_SUBRESOURCES),
        kind::<core::PodTemplate>(),
        kind::<core::ReplicationController>().short(&["rc"]).all().status().scale().generation(),
        kind::<core::ResourceQuota>().short(&["quota"]).status(),
        kind::<core::Secret>(),
        kind::<core::ServiceAccount>().short(&["sa"]).subresources(SERVICE_ACCOUNT_SUBRESOURCES),
        kind::<core::Service>().short(&["svc"]).all().status(),
        // The groups, in upstream's /apis order.
        kind::<apiregistration::APIService>().api_extensions().status(),
        kind::<apps::ControllerRevision>(),
        kind::<apps::DaemonSet>().short(&["ds"]).all().status().generation(),
        kind::<apps::Deployment>().short(&["deploy"]).all().status().scale().generation(),
        kind::<apps::ReplicaSet>().short(&["rs"]).all().status().scale().generation(),
        kind::<apps::StatefulSet>().short(&["sts"]).all().status().scale().generation(),
        kind::<events::Event>().short(&["ev"]),
        kind::<authn::SelfSubjectReview>().review(),
        kind::<authn::TokenReview>().review(),
        kind::<authz::LocalSubjectAccessReview>().review(),
        kind::<authz::SelfSubjectAccessReview>().review(),
        kind::<authz::SelfSubjectRulesReview>().review(),
        kind::<authz::SubjectAccessReview>().review(),
        kind::<autoscaling2::HorizontalPodAutoscaler>().short(&["hpa"]).all().status(),
        kind::<autoscaling1::HorizontalPodAutoscaler>().short(&["hpa"]).all().status().not_storage(),
        kind::<batch::CronJob>().short(&["cj"]).all().status().generation(),
        kind::<batch::Job>().all().status().generation(),
        kind::<certificates::CertificateSigningRequest>().short(&["csr"]).status().subresources(CSR_SUBRESOURCES),
        kind::<networking::IngressClass>().generation(),
        kind::<networking::Ingress>().short(&["ing"]).status().generation(),
        kind::<networking::NetworkPolicy>().short(&["netpol"]).generation(),
        kind::<policy::PodDisruptionBudget>().short(&["pdb"]).status().generation(),
        kind::<rbac::ClusterRoleBinding>(),
        kind::<rbac::ClusterRole>(),
        kind::<rbac::RoleBinding>(),
        kind::<rbac::Role>(),
        kind::<storage::CSIDriver>(),
        kind::<storage::CSINode>(),
        kind::<storage::CSIStorageCapacity>(),
        kind::<storage::StorageClass>().short(&["sc"]),
        kind::<storage::VolumeAttachment>().status(),
        kind::<admission::MutatingWebhookConfiguration>().api_extensions().generation(),
        kind::<admission::ValidatingAdmissionPolicy>().api_extensions().status().generation(),
        kind::<admission::ValidatingAdmissionPolicyBinding>().api_extensions().generation(),
        kind::<admission::ValidatingWebhookConfiguration>().api_extensions().generation(),
        kind::<apiextensions::CustomResourceDefinition>().short(&["crd", "crds"]).api_extensions().status().generation(),
        kind::<scheduling::PriorityClass>().short(&["pc"]),
        kind::<coordination::Lease>(),
        kind::<node::RuntimeClass>(),
        kind::<discovery::EndpointSlice>(),
        kind::<flowcontrol::FlowSchema>().status().generation(),
        kind::<flowcontrol::PriorityLevelConfiguration>().status().generation(),
    ]
}

/// The built-in resources, in discovery order.
pub fn builtins() -> Vec<Resource> {
    rows()
        .into_iter()
        .map(|Row(mut r)| {
            r.keep_status_on_create = r.kind == "Node" || r.kind == "Namespace";
            // One storage, two views (see `convert`).
            if r.group == "events.k8s.io" {
                r.alias_of = Some(GroupResource { group: String::new(), resource: "events".into() });
            }
            if r.group == "autoscaling" && r.version == "v1" {
                r.alias_of = Some(GroupResource { group: r.group.clone(), resource: r.plural.clone() });
            }
            r
        })
        .collect()
}

/// The preferred-order list of built-in group versions: (group, version).
pub fn builtin_group_versions() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![];
    for r in builtins() {
        let gv = (r.group, r.version);
        if !out.contains(&gv) {
            out.push(gv);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_take_their_names_and_scope_from_k8s_openapi() {
        let all = builtins();
        let find = |g: &str, p: &str| all.iter().find(|r| r.group == g && r.plural == p).unwrap_or_else(|| panic!("{g}/{p}"));
        let sts = find("apps", "statefulsets");
        assert_eq!((sts.kind.as_str(), sts.version.as_str(), sts.namespaced), ("StatefulSet", "v1", true));
        assert!(!find("", "persistentvolumes").namespaced);
        assert!(find("authorization.k8s.io", "localsubjectaccessreviews").namespaced);
        assert_eq!(find("", "endpoints").singular, "endpoints");
        assert_eq!(find("networking.k8s.io", "ingresses").singular, "ingress");
        assert_eq!(find("apiregistration.k8s.io", "apiservices").version, "v1");
    }
}
