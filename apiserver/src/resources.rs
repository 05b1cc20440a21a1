//! What the server serves: one [`Resource`] per (group, version, plural), from a static table of
//! built-in kinds plus whatever CRDs add at run time. Discovery, routing, tables and OpenAPI are
//! all driven from here.

use serde_json::Value;
use std::sync::Arc;

/// Where `/scale` reads and writes replicas (CRD `subresources.scale`, or built-in apps kinds).
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleSpec {
    /// JSON path of the desired replicas, e.g. `.spec.replicas`.
    pub spec_replicas_path: String,
    /// JSON path of the observed replicas, e.g. `.status.replicas`.
    pub status_replicas_path: String,
    /// JSON path of the label selector (string, or a LabelSelector object for built-ins).
    pub label_selector_path: Option<String>,
}

/// One `additionalPrinterColumns` entry (or a built-in column).
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    /// Column header.
    pub name: String,
    /// OpenAPI type: string, integer, number, boolean, date.
    pub type_: String,
    /// Optional format (`name`, `date-time`, ...).
    pub format: String,
    /// Description shown by `kubectl get -o wide` docs.
    pub description: String,
    /// 0 = shown by default, >0 only with `-o wide`.
    pub priority: i64,
    /// JSON path evaluated against the object.
    pub json_path: String,
}

/// A servable resource at one version.
#[derive(Debug, Clone)]
pub struct Resource {
    /// API group ("" for core).
    pub group: String,
    /// Version, e.g. `v1`.
    pub version: String,
    /// Plural resource name, e.g. `pods`.
    pub plural: String,
    /// Singular name, e.g. `pod`.
    pub singular: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
    /// List kind, e.g. `PodList`.
    pub list_kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names, e.g. `po`.
    pub short_names: Vec<String>,
    /// Categories, e.g. `all`.
    pub categories: Vec<String>,
    /// Whether a `/status` subresource exists (and main-resource writes ignore status).
    pub status: bool,
    /// The `/scale` subresource, if any.
    pub scale: Option<ScaleSpec>,
    /// Whether `metadata.generation` is maintained.
    pub generation: bool,
    /// Whether create keeps a client-supplied status (nodes) rather than resetting it.
    pub keep_status_on_create: bool,
    /// Whether this version is the storage version (CRDs) / preferred version.
    pub storage: bool,
    /// Structural schema (CRD `openAPIV3Schema`); `None` for built-ins (no validation).
    pub schema: Option<Arc<Value>>,
    /// Printer columns for CRDs; built-ins use [`crate::table`].
    pub printer_columns: Vec<PrinterColumn>,
    /// True for CRD-defined resources.
    pub custom: bool,
    /// Another resource whose storage this one shares (events.k8s.io Events → core Events).
    pub alias_of: Option<GroupResource>,
    /// Create-only, never stored (access reviews): POST answers with a computed status.
    pub ephemeral: bool,
}

impl Resource {
    /// `group/version` or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The `GroupResource` key this resource is stored under (all versions share storage).
    pub fn group_resource(&self) -> GroupResource {
        self.alias_of.clone().unwrap_or_else(|| GroupResource { group: self.group.clone(), resource: self.plural.clone() })
    }

    /// Verbs advertised in discovery.
    pub fn verbs(&self) -> Vec<&'static str> {
        if self.ephemeral {
            return vec!["create"];
        }
        vec!["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    }
}

/// A (group, plural resource) pair: the storage key prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// API group.
    pub group: String,
    /// Plural resource.
    pub resource: String,
}

struct Def {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    scale: bool,
    generation: bool,
}

#[allow(clippy::too_many_arguments)] // a table row constructor
const fn d(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    scale: bool,
    generation: bool,
) -> Def {
    Def { group, version, plural, singular, kind, namespaced, short, categories, status, scale, generation }
}

const BUILTINS: &[Def] = &[
    d("", "v1", "namespaces", "namespace", "Namespace", false, &["ns"], &[], true, false, false),
    d("", "v1", "pods", "pod", "Pod", true, &["po"], &["all"], true, false, false),
    d("", "v1", "configmaps", "configmap", "ConfigMap", true, &["cm"], &[], false, false, false),
    d("", "v1", "secrets", "secret", "Secret", true, &[], &[], false, false, false),
    d("", "v1", "services", "service", "Service", true, &["svc"], &["all"], true, false, false),
    d("", "v1", "events", "event", "Event", true, &["ev"], &[], false, false, false),
    d("", "v1", "serviceaccounts", "serviceaccount", "ServiceAccount", true, &["sa"], &[], false, false, false),
    d("", "v1", "nodes", "node", "Node", false, &["no"], &[], true, false, false),
    d("", "v1", "endpoints", "endpoints", "Endpoints", true, &["ep"], &[], false, false, false),
    d("events.k8s.io", "v1", "events", "event", "Event", true, &["ev"], &[], false, false, false),
    d("batch", "v1", "jobs", "job", "Job", true, &[], &["all"], true, false, true),
    d("apps", "v1", "controllerrevisions", "controllerrevision", "ControllerRevision", true, &[], &[], false, false, false),
    d("apps", "v1", "deployments", "deployment", "Deployment", true, &["deploy"], &["all"], true, true, true),
    d("apps", "v1", "replicasets", "replicaset", "ReplicaSet", true, &["rs"], &["all"], true, true, true),
    d("coordination.k8s.io", "v1", "leases", "lease", "Lease", true, &[], &[], false, false, false),
    d("discovery.k8s.io", "v1", "endpointslices", "endpointslice", "EndpointSlice", true, &[], &[], false, false, false),
    d("apiextensions.k8s.io", "v1", "customresourcedefinitions", "customresourcedefinition", "CustomResourceDefinition", false, &["crd", "crds"], &["api-extensions"], true, false, true),
    d("rbac.authorization.k8s.io", "v1", "roles", "role", "Role", true, &[], &[], false, false, false),
    d("rbac.authorization.k8s.io", "v1", "rolebindings", "rolebinding", "RoleBinding", true, &[], &[], false, false, false),
    d("rbac.authorization.k8s.io", "v1", "clusterroles", "clusterrole", "ClusterRole", false, &[], &[], false, false, false),
    d("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", false, &[], &[], false, false, false),
];

/// The built-in resources, in discovery order.
pub fn builtins() -> Vec<Resource> {
    BUILTINS
        .iter()
        .map(|b| Resource {
            group: b.group.into(),
            version: b.version.into(),
            plural: b.plural.into(),
            singular: b.singular.into(),
            kind: b.kind.into(),
            list_kind: format!("{}List", b.kind),
            namespaced: b.namespaced,
            short_names: b.short.iter().map(|s| s.to_string()).collect(),
            categories: b.categories.iter().map(|s| s.to_string()).collect(),
            status: b.status,
            scale: b.scale.then(|| ScaleSpec {
                spec_replicas_path: ".spec.replicas".into(),
                status_replicas_path: ".status.replicas".into(),
                label_selector_path: Some(".spec.selector".into()),
            }),
            generation: b.generation,
            keep_status_on_create: b.kind == "Node" || b.kind == "Namespace",
            storage: true,
            schema: None,
            printer_columns: vec![],
            custom: false,
            alias_of: (b.group == "events.k8s.io").then(|| GroupResource { group: String::new(), resource: "events".into() }),
            ephemeral: false,
        })
        .chain(REVIEWS.iter().map(|(group, plural, kind)| Resource {
            group: group.to_string(),
            version: "v1".into(),
            plural: plural.to_string(),
            singular: String::new(),
            kind: kind.to_string(),
            list_kind: format!("{kind}List"),
            namespaced: false,
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
            ephemeral: true,
        }))
        .collect()
}

/// Create-only review resources (answered, never stored): (group, plural, kind).
const REVIEWS: &[(&str, &str, &str)] = &[
    ("authorization.k8s.io", "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
    ("authorization.k8s.io", "selfsubjectrulesreviews", "SelfSubjectRulesReview"),
    ("authentication.k8s.io", "selfsubjectreviews", "SelfSubjectReview"),
];

/// The preferred-order list of built-in group versions: (group, version).
pub fn builtin_group_versions() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![];
    for b in BUILTINS {
        let gv = (b.group.to_string(), b.version.to_string());
        if !out.contains(&gv) {
            out.push(gv);
        }
    }
    out
}

/// The live set of servable resources: built-ins plus CRD-defined ones.
#[derive(Debug)]
pub struct Registry {
    resources: std::sync::RwLock<Vec<Resource>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self { resources: std::sync::RwLock::new(builtins()) }
    }
}

impl Registry {
    /// Look up by group, version and plural.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<Resource> {
        self.resources
            .read()
            .unwrap()
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    /// Look up by group and kind (any version; storage version preferred).
    pub fn find_kind(&self, group: &str, kind: &str) -> Option<Resource> {
        let all = self.resources.read().unwrap();
        let mut matching = all.iter().filter(|r| r.group == group && r.kind == kind);
        let first = matching.clone().find(|r| r.storage).cloned();
        first.or_else(|| matching.next().cloned())
    }

    /// Every resource, built-ins first.
    pub fn all(&self) -> Vec<Resource> {
        self.resources.read().unwrap().clone()
    }

    /// Whether (group, version) is served.
    pub fn has_group_version(&self, group: &str, version: &str) -> bool {
        self.resources.read().unwrap().iter().any(|r| r.group == group && r.version == version)
    }

    /// Replace the resources a CRD defines (all versions of group/plural).
    pub fn set_custom(&self, group: &str, plural: &str, defs: Vec<Resource>) {
        let mut all = self.resources.write().unwrap();
        all.retain(|r| !(r.custom && r.group == group && r.plural == plural));
        all.extend(defs);
    }

    /// Remove the resources a CRD defined.
    pub fn remove_custom(&self, group: &str, plural: &str) {
        self.resources.write().unwrap().retain(|r| !(r.custom && r.group == group && r.plural == plural));
    }
}
