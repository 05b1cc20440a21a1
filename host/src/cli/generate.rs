//! `host generate crds|rbac --plugin P.wasm ...`: the deployment manifests
//! that follow from the plugins' manifests (what controller-gen derives from
//! kubebuilder markers) and the host's own `Plugin` CRD (`run
//! --plugin-resources`), as multi-document YAML on stdout in a stable order,
//! so checked-in copies can be compared with a fresh run. `host generate
//! chart --out DIR` writes the same CRDs and RBAC into a Helm chart
//! (`crds/crds.yaml`, `templates/rbac.yaml`), the names turned into the
//! chart's template expressions ([`chart_rbac`]).
//!
//! RBAC is least privilege for what the host does (see docs/operations.md):
//! - parents: get/list/watch (cache), update/patch (finalizers), status
//!   get/update/patch (the status subresource), finalizers update (the host
//!   sets `blockOwnerDeletion` on children's controller reference, which the
//!   OwnerReferencesPermissionEnforcement admission plugin allows only with
//!   update on the owner's `finalizers` subresource);
//! - children: get/list/watch/create/update/patch/delete;
//! - related kinds (contract 0.2): get/list/watch only (read, never written);
//! - CRDs: get/list/watch/create/patch (installed by server-side apply);
//! - `events.k8s.io` events: create/patch (the recorder creates, then patches `series`);
//! - configmaps: get/list/watch (`--plugin-configmap`, and a Plugin's `configMap` source);
//! - `plugins.operator-host.dev` plugins: get/list/watch (`--plugin-resources`), patch (an
//!   automatic promotion moves `spec.candidate` to `spec.source`), create/patch/delete (the
//!   objects published for plugins given by flag or ConfigMap key, by server-side apply), and
//!   the status subresource update/patch;
//! - a Role in the leader election namespace: create leases, get/update the one named `--leader-election-id`;
//! - with `--sharded` (as `run`'s): in that Role also get/list/update/delete leases of any name (each
//!   replica's shard Lease is named after the process; the sharder lists them, takes expired ones over
//!   and deletes those of shards gone for a minute); parents and children already have patch (labels);
//! - with `--webhook-configure` (as `run`'s): create mutating/validatingwebhookconfigurations,
//!   patch the ones named `--webhook-configuration-name` (server-side apply; `create` is needed
//!   when the apply creates the object, and cannot be limited by name);
//! - with `--webhook-cert-secret NS/NAME`: a Role in NS to create secrets and get the one named NAME.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use operator_plugin_sdk::{GroupVersionKind, Manifest};
use operator_runtime::manager::served_form;
use operator_runtime::plugin_resource;
use serde_json::{Value, json};

use super::{Failure, SandboxArgs};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// The plugins' CustomResourceDefinitions and the host's Plugin CRD, sorted by name.
    Crds(PluginArgs),
    /// ClusterRole + ClusterRoleBinding for the plugins, Role + RoleBinding for leader election.
    Rbac(RbacArgs),
    /// The CRDs and RBAC of the Helm chart: writes DIR/crds/crds.yaml and DIR/templates/rbac.yaml.
    Chart(ChartArgs),
}

#[derive(Debug, clap::Args)]
struct ChartArgs {
    #[command(flatten)]
    plugins: PluginArgs,
    /// The chart's directory (holding Chart.yaml).
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, clap::Args)]
struct PluginArgs {
    /// A plugin component (.wasm); repeat for several.
    #[arg(long = "plugin", required = true)]
    plugins: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct RbacArgs {
    #[command(flatten)]
    plugins: PluginArgs,
    /// The ServiceAccount the host runs as, `NAMESPACE/NAME`.
    #[arg(long, default_value = "operator-host-system/operator-host")]
    service_account: String,
    /// Namespace of the leader election Lease (default: the ServiceAccount's namespace).
    #[arg(long)]
    leader_election_namespace: Option<String>,
    /// Name of the leader election Lease.
    #[arg(long, default_value = "operator-host")]
    leader_election_id: String,
    /// Prefix of the roles' and bindings' names.
    #[arg(long, default_value = "operator-host")]
    name_prefix: String,
    /// Add what `run --webhook-configure` needs: writing the host's own
    /// Mutating/ValidatingWebhookConfiguration.
    #[arg(long)]
    webhook_configure: bool,
    /// The name `run --webhook-configuration-name` gives both configurations.
    #[arg(long, default_value = "operator-host", requires = "webhook_configure")]
    webhook_configuration_name: String,
    /// Add what `run --webhook-cert-secret NAMESPACE/NAME` needs: a Role to
    /// create that Secret and read it.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    webhook_cert_secret: Option<String>,
    /// Add what `run --sharded` needs: the replicas' shard Leases.
    #[arg(long)]
    sharded: bool,
}

/// What keeps a manifest from being generated.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("plugin {plugin}: cannot tell the resource name of {kind}: it is not a built-in kind and no CRD of the plugin defines it")]
    UnknownKind { plugin: String, kind: String },
    #[error("plugin {plugin} declares a CRD without {field}")]
    InvalidCrd { plugin: String, field: &'static str },
    #[error("--service-account {0}: expected NAMESPACE/NAME")]
    ServiceAccount(String),
    #[error("--webhook-cert-secret {0}: expected NAMESPACE/NAME")]
    CertSecret(String),
}

/// `NAMESPACE/NAME`, both non-empty.
fn namespaced(text: &str) -> Option<(String, String)> {
    text.split_once('/').filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/')).map(|(ns, n)| (ns.to_string(), n.to_string()))
}

pub fn run(sandbox: &SandboxArgs, args: &Args) -> Result<(), Failure> {
    let plugins = match &args.what {
        What::Crds(p) => &p.plugins,
        What::Rbac(r) => &r.plugins.plugins,
        What::Chart(c) => &c.plugins.plugins,
    };
    let manifests = load(sandbox, plugins)?;
    let names: Vec<String> = plugins.iter().map(|p| file_name(p)).collect();
    let (docs, regenerate) = match &args.what {
        What::Chart(c) => return write_chart(&manifests, &names, &c.out),
        What::Crds(_) => (crds(&manifests).map_err(|e| Failure::bad_input(e.to_string()))?, "crds".to_string()),
        What::Rbac(r) => {
            let (namespace, name) =
                namespaced(&r.service_account).ok_or_else(|| Failure::bad_input(Error::ServiceAccount(r.service_account.clone()).to_string()))?;
            let webhook_cert_secret = match &r.webhook_cert_secret {
                Some(text) => Some(namespaced(text).ok_or_else(|| Failure::bad_input(Error::CertSecret(text.clone()).to_string()))?),
                None => None,
            };
            let options = RbacOptions {
                lease_namespace: r.leader_election_namespace.clone().unwrap_or_else(|| namespace.clone()),
                service_account: (namespace, name),
                lease_name: r.leader_election_id.clone(),
                prefix: r.name_prefix.clone(),
                webhook_configuration: r.webhook_configure.then(|| r.webhook_configuration_name.clone()),
                webhook_cert_secret,
                sharded: r.sharded,
            };
            // The header names the flags that changed what was generated, so a rerun gives the same.
            let mut command = "rbac".to_string();
            if let Some(name) = &options.webhook_configuration {
                command.push_str(&format!(" --webhook-configure --webhook-configuration-name {name}"));
            }
            if let Some((namespace, name)) = &options.webhook_cert_secret {
                command.push_str(&format!(" --webhook-cert-secret {namespace}/{name}"));
            }
            if options.sharded {
                command.push_str(" --sharded");
            }
            (rbac(&manifests, &options).map_err(|e| Failure::bad_input(e.to_string()))?, command)
        }
    };
    print!("{}", to_yaml(&format!("Generated by `host generate {regenerate}` from {}; do not edit.", names.join(", ")), &docs));
    Ok(())
}

/// Writes the chart's generated files under `out` (which must hold Chart.yaml).
fn write_chart(manifests: &[Manifest], names: &[String], out: &Path) -> Result<(), Failure> {
    if !out.join("Chart.yaml").exists() {
        return Err(Failure::bad_input(format!("--out {}: no Chart.yaml there; give the chart's directory", out.display())));
    }
    let header = format!("Generated by `host generate chart` from {}; do not edit.", names.join(", "));
    let crds = crds(manifests).map_err(|e| Failure::bad_input(e.to_string()))?;
    let rbac = chart_rbac(manifests, &header).map_err(|e| Failure::bad_input(e.to_string()))?;
    for (file, text) in [("crds/crds.yaml", to_yaml(&header, &crds)), ("templates/rbac.yaml", rbac)] {
        let path = out.join(file);
        let written = std::fs::create_dir_all(path.parent().expect("a file under the chart")).and_then(|()| std::fs::write(&path, text));
        written.map_err(|e| Failure::bad_input(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

/// Stand-ins for the names the chart computes: RBAC is generated with these,
/// then each is replaced by its template expression (see `_helpers.tpl`).
const CHART_NAMES: &[(&str, &str)] = &[
    ("chart-placeholder-namespace", "{{ .Release.Namespace }}"),
    ("chart-placeholder-service-account", "{{ include \"operator-host.serviceAccountName\" . }}"),
    ("chart-placeholder-prefix", "{{ include \"operator-host.fullname\" . }}"),
    ("chart-placeholder-lease", "{{ include \"operator-host.leaseName\" . }}"),
    ("chart-placeholder-webhook-configuration", "{{ include \"operator-host.fullname\" . }}"),
    ("chart-placeholder-cert-secret", "{{ include \"operator-host.webhookCertSecret\" . }}"),
];
/// A metadata line standing for the chart's labels.
const CHART_LABELS: (&str, &str) = ("chart-placeholder-labels: here", "{{- include \"operator-host.labels\" . | nindent 4 }}");
/// A rule standing for the ones only `--webhook-configure` needs.
const CHART_WEBHOOK_RULES: &str = "- chart-placeholder-webhook-rules";

/// The chart's `templates/rbac.yaml`: [`rbac`] for the plugins with the
/// chart's names, the webhook's rules and Role under `webhook.enabled`.
pub fn chart_rbac(manifests: &[Manifest], header: &str) -> Result<String, Error> {
    let name = |n: &str| n.to_string();
    let plain = RbacOptions {
        service_account: (name("chart-placeholder-namespace"), name("chart-placeholder-service-account")),
        lease_namespace: name("chart-placeholder-namespace"),
        lease_name: name("chart-placeholder-lease"),
        prefix: name("chart-placeholder-prefix"),
        webhook_configuration: None,
        webhook_cert_secret: None,
        // The chart's replicas use leader election; sharding is a flag the chart does not set.
        sharded: false,
    };
    let webhook = RbacOptions {
        webhook_configuration: Some(name("chart-placeholder-webhook-configuration")),
        webhook_cert_secret: Some((name("chart-placeholder-namespace"), name("chart-placeholder-cert-secret"))),
        ..plain.clone()
    };
    let mut base = rbac(manifests, &plain)?;
    let full = rbac(manifests, &webhook)?;
    let base_rules = base[0]["rules"].as_array().map_or(0, Vec::len);
    let webhook_rules: Vec<Value> = full[0]["rules"].as_array().map(|r| r[base_rules..].to_vec()).unwrap_or_default();
    base[0]["rules"].as_array_mut().expect("a ClusterRole has rules").push(json!("chart-placeholder-webhook-rules"));
    let webhook_docs = &full[base.len()..];
    for doc in base.iter_mut() {
        doc["metadata"]["labels"] = json!({"chart-placeholder-labels": "here"});
    }
    let mut text = to_yaml(header, &base);
    let rules = serde_saphyr::to_string(&webhook_rules).expect("JSON values serialize as YAML");
    text = text.replacen(CHART_WEBHOOK_RULES, &format!("{{{{- if .Values.webhook.enabled }}}}\n{}{{{{- end }}}}", rules), 1);
    let mut extra = String::new();
    for doc in webhook_docs {
        let mut doc = doc.clone();
        doc["metadata"]["labels"] = json!({"chart-placeholder-labels": "here"});
        extra.push_str("---\n");
        extra.push_str(&serde_saphyr::to_string(&doc).expect("JSON values serialize as YAML"));
    }
    text.push_str(&format!("{{{{- if .Values.webhook.enabled }}}}\n{extra}{{{{- end }}}}\n"));
    text = text.replace(CHART_LABELS.0, CHART_LABELS.1);
    for (placeholder, expression) in CHART_NAMES {
        text = text.replace(placeholder, expression);
    }
    Ok(text)
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned())
}

fn load(sandbox: &SandboxArgs, paths: &[PathBuf]) -> Result<Vec<Manifest>, Failure> {
    let sandbox = sandbox.sandbox().map_err(|e| Failure::bad_input(format!("{e:#}")))?;
    let mut plugins = Vec::new();
    for path in paths {
        plugins.push(sandbox.load_file(path).map_err(|e| Failure::plugin(operator_runtime::error_chain(&e)))?);
    }
    operator_runtime::manager::check_parents(&plugins).map_err(|e| Failure { code: e.exit_code(), message: e.to_string() })?;
    Ok(plugins.iter().map(|p| p.manifest().clone()).collect())
}

/// Documents with a comment line on top, `---` between them.
pub fn to_yaml(comment: &str, docs: &[Value]) -> String {
    let mut out = format!("# {comment}\n");
    for (i, d) in docs.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        out.push_str(&serde_saphyr::to_string(d).expect("JSON values serialize as YAML"));
    }
    out
}

fn crd_name(plugin: &str, crd: &Value) -> Result<String, Error> {
    crd.pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or(Error::InvalidCrd { plugin: plugin.into(), field: "metadata.name" })
}

/// Every plugin's CRDs and the host's Plugin CRD as the host installs them
/// (the API server's stored form, see [`served_form`]), sorted by name.
pub fn crds(manifests: &[Manifest]) -> Result<Vec<Value>, Error> {
    let mut all = BTreeMap::new();
    all.insert(plugin_resource::crd::NAME.to_string(), served_form(&plugin_resource::crd::crd()));
    for m in manifests {
        for crd in &m.crds {
            let crd = served_form(crd);
            all.insert(crd_name(&m.name, &crd)?, crd);
        }
    }
    Ok(all.into_values().collect())
}

/// Where the RBAC manifests point.
#[derive(Clone, Debug)]
pub struct RbacOptions {
    /// (namespace, name) of the ServiceAccount.
    pub service_account: (String, String),
    pub lease_namespace: String,
    pub lease_name: String,
    /// Names are `<prefix>-manager-role`, `<prefix>-leader-election-role`, ...
    pub prefix: String,
    /// `run --webhook-configure`: the configurations' name.
    pub webhook_configuration: Option<String>,
    /// `run --webhook-cert-secret`: (namespace, name) of the Secret.
    pub webhook_cert_secret: Option<(String, String)>,
    /// `run --sharded`: the shard Leases.
    pub sharded: bool,
}

/// Verbs in the order Kubernetes documents them, so rules read naturally.
const VERB_ORDER: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete"];
const PARENT_VERBS: &[&str] = &["get", "list", "watch", "update", "patch"];
const STATUS_VERBS: &[&str] = &["get", "update", "patch"];
const CHILD_VERBS: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete"];

/// The plural resource name of `gvk`: from the plugin's CRDs, else the built-in kinds.
fn plural(m: &Manifest, gvk: &GroupVersionKind) -> Result<String, Error> {
    let from_crd = m.crds.iter().find(|c| {
        c.pointer("/spec/group").and_then(Value::as_str) == Some(gvk.group.as_str())
            && c.pointer("/spec/names/kind").and_then(Value::as_str) == Some(gvk.kind.as_str())
    });
    if let Some(crd) = from_crd {
        return crd
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or(Error::InvalidCrd { plugin: m.name.clone(), field: "spec.names.plural" });
    }
    builtin_plural(&gvk.group, &gvk.kind)
        .map(str::to_string)
        .ok_or_else(|| Error::UnknownKind { plugin: m.name.clone(), kind: format!("{}/{}", gvk.api_version(), gvk.kind) })
}

/// The plural of a built-in kind a plugin may own or use, as k8s-openapi
/// (generated from the Kubernetes OpenAPI spec) names it: no cluster needed.
fn builtin_plural(group: &str, kind: &str) -> Option<&'static str> {
    use k8s_openapi::api::{apps, batch, coordination, core, events, networking, policy, rbac};
    macro_rules! table {
        ($($t:ty),* $(,)?) => {
            [$((<$t as k8s_openapi::Resource>::GROUP, <$t as k8s_openapi::Resource>::KIND, <$t as k8s_openapi::Resource>::URL_PATH_SEGMENT)),*]
        };
    }
    let table = table![
        core::v1::ConfigMap,
        core::v1::Endpoints,
        core::v1::Event,
        core::v1::Namespace,
        core::v1::Node,
        core::v1::PersistentVolumeClaim,
        core::v1::Pod,
        core::v1::Secret,
        core::v1::Service,
        core::v1::ServiceAccount,
        apps::v1::ControllerRevision,
        apps::v1::DaemonSet,
        apps::v1::Deployment,
        apps::v1::ReplicaSet,
        apps::v1::StatefulSet,
        batch::v1::CronJob,
        batch::v1::Job,
        coordination::v1::Lease,
        events::v1::Event,
        networking::v1::Ingress,
        networking::v1::NetworkPolicy,
        policy::v1::PodDisruptionBudget,
        rbac::v1::ClusterRole,
        rbac::v1::ClusterRoleBinding,
        rbac::v1::Role,
        rbac::v1::RoleBinding,
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    ];
    table.into_iter().find(|(g, k, _)| *g == group && *k == kind).map(|(_, _, plural)| plural)
}

type Grants = BTreeMap<(String, String), BTreeSet<&'static str>>;

fn grant(grants: &mut Grants, group: &str, resource: &str, verbs: &[&'static str]) {
    grants.entry((group.to_string(), resource.to_string())).or_default().extend(verbs.iter().copied());
}

fn rules(grants: &Grants) -> Vec<Value> {
    grants
        .iter()
        .map(|((group, resource), verbs)| {
            let verbs: Vec<&str> = VERB_ORDER.iter().copied().filter(|v| verbs.contains(v)).collect();
            json!({"apiGroups": [group], "resources": [resource], "verbs": verbs})
        })
        .collect()
}

/// ClusterRole + ClusterRoleBinding for the plugins, Role + RoleBinding for the Lease.
pub fn rbac(manifests: &[Manifest], o: &RbacOptions) -> Result<Vec<Value>, Error> {
    let mut grants = Grants::new();
    for m in manifests {
        let parent = plural(m, &m.parent)?;
        grant(&mut grants, &m.parent.group, &parent, PARENT_VERBS);
        grant(&mut grants, &m.parent.group, &format!("{parent}/status"), STATUS_VERBS);
        grant(&mut grants, &m.parent.group, &format!("{parent}/finalizers"), &["update"]);
        for child in &m.children {
            grant(&mut grants, &child.group, &plural(m, child)?, CHILD_VERBS);
        }
        for related in &m.related {
            grant(&mut grants, &related.kind.group, &plural(m, &related.kind)?, &["get", "list", "watch"]);
        }
    }
    grant(&mut grants, "apiextensions.k8s.io", "customresourcedefinitions", &["get", "list", "watch", "create", "patch"]);
    grant(&mut grants, "events.k8s.io", "events", &["create", "patch"]);
    grant(&mut grants, "", "configmaps", &["get", "list", "watch"]);
    grant(&mut grants, plugin_resource::crd::GROUP, plugin_resource::crd::PLURAL, &["get", "list", "watch", "create", "patch", "delete"]);
    grant(&mut grants, plugin_resource::crd::GROUP, &format!("{}/status", plugin_resource::crd::PLURAL), &["update", "patch"]);

    let mut manager_rules = rules(&grants);
    if let Some(name) = &o.webhook_configuration {
        // Server-side apply is a patch; one that creates the object is also
        // authorized as `create`, which cannot be limited by name.
        let resources = ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"];
        manager_rules.push(json!({"apiGroups": ["admissionregistration.k8s.io"], "resources": resources, "verbs": ["create"]}));
        manager_rules
            .push(json!({"apiGroups": ["admissionregistration.k8s.io"], "resources": resources, "resourceNames": [name], "verbs": ["patch"]}));
    }

    let (sa_namespace, sa_name) = &o.service_account;
    let subject = json!([{"kind": "ServiceAccount", "name": sa_name, "namespace": sa_namespace}]);
    let manager = format!("{}-manager-role", o.prefix);
    let election = format!("{}-leader-election-role", o.prefix);
    let mut docs = vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": manager},
            "rules": manager_rules,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{}-manager-rolebinding", o.prefix)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": manager},
            "subjects": subject,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": election, "namespace": o.lease_namespace},
            // `create` cannot be limited by name (the name is not known when it is authorized).
            "rules": if o.sharded {
                json!([
                    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "create", "update", "delete"]},
                ])
            } else {
                json!([
                    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [o.lease_name], "verbs": ["get", "update"]},
                ])
            },
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": format!("{}-leader-election-rolebinding", o.prefix), "namespace": o.lease_namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": election},
            "subjects": subject,
        }),
    ];
    if let Some((namespace, name)) = &o.webhook_cert_secret {
        let role = format!("{}-webhook-cert-role", o.prefix);
        docs.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": role, "namespace": namespace},
            // The first replica creates the Secret; every replica reads it. Never updated.
            "rules": [
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [name], "verbs": ["get"]},
            ],
        }));
        docs.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": format!("{}-webhook-cert-rolebinding", o.prefix), "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": subject,
        }));
    }
    Ok(docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gvk(g: &str, v: &str, k: &str) -> GroupVersionKind {
        GroupVersionKind::new(g, v, k)
    }

    fn manifest(children: Vec<GroupVersionKind>) -> Manifest {
        Manifest {
            name: "widgets".into(),
            version: "0.1.0".into(),
            parent: gvk("example.com", "v1", "Widget"),
            children,
            related: vec![],
            crds: vec![json!({
                "metadata": {"name": "widgets.example.com"},
                "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}},
            })],
            finalizer: None,
        }
    }

    fn options() -> RbacOptions {
        RbacOptions {
            service_account: ("sys".into(), "op".into()),
            lease_namespace: "sys".into(),
            lease_name: "op".into(),
            sharded: false,
            prefix: "op".into(),
            webhook_configuration: None,
            webhook_cert_secret: None,
        }
    }

    fn rule<'a>(docs: &'a [Value], resource: &str) -> Option<&'a Value> {
        docs[0]["rules"].as_array().unwrap().iter().find(|r| r["resources"][0] == resource)
    }

    #[test]
    fn parents_children_and_the_hosts_own_needs_get_exactly_their_verbs() {
        let docs = rbac(&[manifest(vec![gvk("batch", "v1", "Job"), gvk("", "v1", "ConfigMap")])], &options()).unwrap();
        assert_eq!(rule(&docs, "widgets").unwrap()["verbs"], json!(["get", "list", "watch", "update", "patch"]));
        assert_eq!(rule(&docs, "widgets/status").unwrap()["verbs"], json!(["get", "update", "patch"]));
        assert_eq!(rule(&docs, "widgets/finalizers").unwrap()["verbs"], json!(["update"]));
        assert_eq!(rule(&docs, "jobs").unwrap()["apiGroups"], json!(["batch"]));
        assert_eq!(rule(&docs, "jobs").unwrap()["verbs"], json!(["get", "list", "watch", "create", "update", "patch", "delete"]));
        // A child kind the host also reads for itself gets one rule with the union of verbs.
        assert_eq!(rule(&docs, "configmaps").unwrap()["verbs"], json!(["get", "list", "watch", "create", "update", "patch", "delete"]));
        assert_eq!(rule(&docs, "events").unwrap()["verbs"], json!(["create", "patch"]));
        assert_eq!(rule(&docs, "plugins").unwrap()["verbs"], json!(["get", "list", "watch", "create", "patch", "delete"]));
        assert_eq!(rule(&docs, "plugins/status").unwrap()["verbs"], json!(["update", "patch"]));
        assert_eq!(rule(&docs, "plugins").unwrap()["apiGroups"], json!(["plugins.operator-host.dev"]));
        assert_eq!(docs[0]["rules"].as_array().unwrap().len(), 9);
        assert_eq!(docs[2]["metadata"]["namespace"], "sys");
        assert_eq!(docs[3]["subjects"], json!([{"kind": "ServiceAccount", "name": "op", "namespace": "sys"}]));
    }

    #[test]
    fn webhook_configure_may_create_both_configurations_and_patch_only_its_own() {
        let plain = rbac(&[manifest(vec![])], &options()).unwrap();
        let o = RbacOptions { webhook_configuration: Some("op-hooks".into()), ..options() };
        let docs = rbac(&[manifest(vec![])], &o).unwrap();
        assert_eq!(docs.len(), plain.len(), "no Secret asked for: no extra Role");
        let rules = docs[0]["rules"].as_array().unwrap();
        let admission: Vec<&Value> = rules.iter().filter(|r| r["apiGroups"][0] == "admissionregistration.k8s.io").collect();
        assert_eq!(admission.len(), 2, "{admission:#?}");
        assert_eq!(admission[0]["verbs"], json!(["create"]));
        assert!(admission[0].get("resourceNames").is_none(), "create cannot be limited by name");
        assert_eq!(admission[1]["resources"], json!(["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]));
        assert_eq!(admission[1]["resourceNames"], json!(["op-hooks"]));
        assert_eq!(admission[1]["verbs"], json!(["patch"]));
        assert!(
            plain[0]["rules"].as_array().unwrap().iter().all(|r| r["apiGroups"][0] != "admissionregistration.k8s.io"),
            "nothing without the flag"
        );
    }

    #[test]
    fn a_shared_webhook_cert_secret_gets_a_role_in_its_own_namespace() {
        let o = RbacOptions { webhook_cert_secret: Some(("certs".into(), "op-webhook-cert".into())), ..options() };
        let docs = rbac(&[manifest(vec![])], &o).unwrap();
        let (role, binding) = (&docs[4], &docs[5]);
        assert_eq!(role["kind"], "Role");
        assert_eq!(role["metadata"]["namespace"], "certs");
        assert_eq!(
            role["rules"],
            json!([
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["op-webhook-cert"], "verbs": ["get"]},
            ])
        );
        assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
        assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": "op", "namespace": "sys"}]));
    }

    #[test]
    fn related_kinds_are_only_read() {
        use operator_plugin_sdk::{Attachment, RelatedKind};
        let mut m = manifest(vec![gvk("apps", "v1", "Deployment")]);
        m.related = vec![
            RelatedKind { kind: gvk("", "v1", "Pod"), attach: Attachment::SelectorFrom("spec.selector".into()), cluster_scoped: false },
            RelatedKind { kind: gvk("apps", "v1", "Deployment"), attach: Attachment::NamesFrom(vec!["spec.other".into()]), cluster_scoped: false },
        ];
        let docs = rbac(&[m], &options()).unwrap();
        assert_eq!(rule(&docs, "pods").unwrap()["verbs"], json!(["get", "list", "watch"]));
        // Also a child: the union, one rule.
        assert_eq!(rule(&docs, "deployments").unwrap()["verbs"], json!(["get", "list", "watch", "create", "update", "patch", "delete"]));
    }

    #[test]
    fn a_child_kind_nobody_defines_is_refused_by_name() {
        let e = rbac(&[manifest(vec![gvk("example.com", "v1", "Gadget")])], &options()).unwrap_err().to_string();
        assert!(e.contains("example.com/v1/Gadget"), "{e}");
    }

    #[test]
    fn built_in_plurals_come_from_the_kubernetes_types_without_a_cluster() {
        assert_eq!(builtin_plural("apps", "StatefulSet"), Some("statefulsets"));
        assert_eq!(builtin_plural("", "Endpoints"), Some("endpoints"));
        assert_eq!(builtin_plural("events.k8s.io", "Event"), Some("events"));
        assert_eq!(builtin_plural("apps", "Job"), None, "a kind is looked up in its own group");
    }

    #[test]
    fn the_charts_rbac_names_everything_by_template_and_gates_the_webhooks_rules() {
        let text = chart_rbac(&[manifest(vec![gvk("batch", "v1", "Job")])], "header").unwrap();
        assert!(!text.contains("chart-placeholder"), "{text}");
        assert!(text.contains("name: {{ include \"operator-host.fullname\" . }}-manager-role"), "{text}");
        assert!(text.contains("namespace: {{ .Release.Namespace }}"), "{text}");
        assert!(text.contains("- {{ include \"operator-host.leaseName\" . }}"), "{text}");
        // Both webhook parts sit inside a conditional: the rules in the ClusterRole, the Secret's Role after it.
        assert_eq!(text.matches("{{- if .Values.webhook.enabled }}").count(), 2, "{text}");
        let (plain, gated) = text.split_once("{{- if .Values.webhook.enabled }}").unwrap();
        assert!(!plain.contains("admissionregistration.k8s.io") && gated.contains("admissionregistration.k8s.io"), "{text}");
        assert!(plain.contains("- jobs"), "the plugins' own rules are unconditional: {text}");
        let secret_role = text.rsplit_once("{{- if .Values.webhook.enabled }}").unwrap().1;
        assert!(
            secret_role.contains("- {{ include \"operator-host.webhookCertSecret\" . }}") && secret_role.trim_end().ends_with("{{- end }}"),
            "{text}"
        );
    }

    #[test]
    fn crds_come_out_sorted_with_their_type_set() {
        let mut a = manifest(vec![]);
        a.crds.insert(0, json!({"metadata": {"name": "zebras.example.com"}}));
        let docs = crds(&[a]).unwrap();
        let names: Vec<&str> = docs.iter().map(|d| d["metadata"]["name"].as_str().unwrap()).collect();
        // The host's own Plugin CRD comes with every plugin set.
        assert_eq!(names, ["plugins.plugins.operator-host.dev", "widgets.example.com", "zebras.example.com"]);
        assert!(docs.iter().all(|d| d["kind"] == "CustomResourceDefinition"));
    }
}
