//! The host's own Mutating/ValidatingWebhookConfiguration (`run
//! --webhook-configure`), as OPA Gatekeeper and Kyverno manage theirs: one
//! object of each kind, named after the host, with a webhook per running
//! plugin and the serving certificate's CA as `caBundle`.
//!
//! Rules:
//! - Each plugin gets a mutating webhook at its `/mutate-...` path and a
//!   validating one at `/validate-...` ([`super::path_for`]), for its
//!   parent's group/version/plural (the validating one also for
//!   `<plural>/scale`: a `kubectl scale` must not go around `validate`),
//!   operations CREATE and UPDATE,
//!   `sideEffects: None`, `admissionReviewVersions: [v1]`, `matchPolicy:
//!   Equivalent` (a request through another version of the same resource is
//!   converted and sent too), the configured failure policy and timeout.
//! - Written by server-side apply with field manager `operator-host`, forced:
//!   these objects belong to the host, and the whole webhook list is applied
//!   every time, so a removed plugin's webhooks go with it.
//! - Applied at start, whenever the plugin set or the CA changes, and every
//!   [`REASSERT_EVERY`] (an object deleted or edited by hand comes back).
//!   With leader election only the leader writes (see [`run`]).
//! - A failed apply is logged with the object and the cause and retried with
//!   a backoff; it never stops the host.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use kube::api::{Api, Patch, PatchParams};
use operator_plugin_sdk::GroupVersionKind;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::actions::FIELD_MANAGER;
use crate::registry::Registry;
use crate::sandbox::LoadedPlugin;

/// How often the configurations are applied again with nothing changed,
/// to repair an object deleted or edited by someone else.
pub const REASSERT_EVERY: Duration = Duration::from_secs(600);

/// The first wait after a failed apply; doubles up to [`MAX_RETRY_DELAY`].
const FIRST_RETRY_DELAY: Duration = Duration::from_secs(1);
const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);

/// The API server's default and largest `timeoutSeconds`.
pub const DEFAULT_TIMEOUT_SECONDS: u8 = 10;
pub const MAX_TIMEOUT_SECONDS: u8 = 30;

/// How the API server reaches the host's webhooks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `clientConfig.url`: `<base><path>`, for a host outside the cluster
    /// (e.g. `https://127.0.0.1:9443`). Always `https://`, no trailing `/`.
    Url(String),
    /// `clientConfig.service`: a Service in front of the host's Pods.
    Service { namespace: String, name: String, port: u16 },
}

/// What the API server does when it cannot get an answer from a webhook.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Refuse the request (kubebuilder's default): nothing is stored unchecked.
    #[default]
    Fail,
    /// Admit the request unchecked.
    Ignore,
}

impl FailurePolicy {
    fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// Everything the configurations say besides the plugins and the CA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The name of both objects (default `operator-host`).
    pub name: String,
    pub endpoint: Endpoint,
    pub failure_policy: FailurePolicy,
    /// 1..=30 (the API's bounds).
    pub timeout_seconds: u8,
}

/// Why a flag value cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum InvalidSetting {
    #[error("{0:?}: the API server calls webhooks over HTTPS only: expected https://HOST[:PORT][/PATH]")]
    NotHttps(String),
    #[error("{0:?}: a webhook URL may not carry user info, a query or a fragment")]
    UrlExtras(String),
    #[error("{0:?}: expected NAMESPACE/NAME[:PORT]")]
    Service(String),
    #[error("{0:?}: not a port from 1 to 65535")]
    Port(String),
    #[error("{0:?}: expected a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)")]
    Name(String),
}

impl Endpoint {
    /// `https://HOST[:PORT][/PATH]`, kept without a trailing `/`.
    pub fn url(text: &str) -> Result<Self, InvalidSetting> {
        let rest = text.strip_prefix("https://").ok_or_else(|| InvalidSetting::NotHttps(text.into()))?;
        let host = rest.split('/').next().unwrap_or_default();
        if host.is_empty() {
            return Err(InvalidSetting::NotHttps(text.into()));
        }
        if host.contains('@') || rest.contains('?') || rest.contains('#') {
            return Err(InvalidSetting::UrlExtras(text.into()));
        }
        Ok(Endpoint::Url(text.trim_end_matches('/').to_string()))
    }

    /// `NAMESPACE/NAME[:PORT]`; the port defaults to 443, as the API's.
    pub fn service(text: &str) -> Result<Self, InvalidSetting> {
        let (namespace, rest) = text.split_once('/').ok_or_else(|| InvalidSetting::Service(text.into()))?;
        let (name, port) = match rest.split_once(':') {
            Some((name, port)) => (name, port.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| InvalidSetting::Port(port.into()))?),
            None => (rest, 443),
        };
        if namespace.is_empty() || name.is_empty() || name.contains('/') {
            return Err(InvalidSetting::Service(text.into()));
        }
        Ok(Endpoint::Service { namespace: namespace.into(), name: name.into(), port })
    }

    /// The name the API server checks the serving certificate against:
    /// the URL's host, or the Service's `NAME.NAMESPACE.svc`.
    pub fn server_name(&self) -> String {
        match self {
            Endpoint::Url(url) => {
                let authority = url.trim_start_matches("https://").split('/').next().unwrap_or_default();
                match authority.strip_prefix('[') {
                    // [::1]:9443
                    Some(v6) => v6.split(']').next().unwrap_or_default().to_string(),
                    None => authority.split(':').next().unwrap_or_default().to_string(),
                }
            }
            Endpoint::Service { namespace, name, .. } => format!("{name}.{namespace}.svc"),
        }
    }

    fn client_config(&self, path: &str, ca_bundle: &str) -> Value {
        match self {
            Endpoint::Url(base) => json!({"url": format!("{base}{path}"), "caBundle": ca_bundle}),
            Endpoint::Service { namespace, name, port } => json!({
                "service": {"namespace": namespace, "name": name, "port": port, "path": path},
                "caBundle": ca_bundle,
            }),
        }
    }
}

/// A DNS subdomain, as object names must be.
pub fn check_name(name: &str) -> Result<(), InvalidSetting> {
    let label_ok = |l: &str| {
        !l.is_empty() && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') && !l.starts_with('-') && !l.ends_with('-')
    };
    if name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(InvalidSetting::Name(name.into()));
    }
    Ok(())
}

/// One plugin's parent as the webhook rules name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AdmittedResource {
    pub group: String,
    pub version: String,
    /// The resource (plural) name, e.g. `cronjobs`.
    pub plural: String,
    pub mutate_path: String,
    pub validate_path: String,
}

/// The webhook's name: unique, and a DNS name of at least three segments
/// (the API refuses fewer). `<plural>.<group>` for a group with a dot (every
/// CRD's group has one); a built-in group (`apps`, or the core group) gets
/// the configuration's name as suffix: `deployments.apps.operator-host`.
/// The embedded cluster names its in-process hooks the same way, so a
/// refusal reads the same on both servers.
pub fn webhook_name(group: &str, plural: &str, configuration: &str) -> String {
    if group.contains('.') {
        format!("{plural}.{group}")
    } else {
        let group = if group.is_empty() { "core" } else { group };
        format!("{plural}.{group}.{configuration}")
    }
}

/// The configuration name the host's webhook flags default to.
pub const DEFAULT_CONFIGURATION_NAME: &str = "operator-host";

/// One webhook for `resources` (the parent's plural, and its subresources
/// the webhook also judges).
fn webhook(config: &Config, target: &AdmittedResource, resources: Vec<String>, path: &str, ca_bundle: &str) -> Value {
    json!({
        "name": webhook_name(&target.group, &target.plural, &config.name),
        "clientConfig": config.endpoint.client_config(path, ca_bundle),
        "rules": [{
            "apiGroups": [target.group],
            "apiVersions": [target.version],
            "resources": resources,
            "operations": ["CREATE", "UPDATE"],
            "scope": "*",
        }],
        "failurePolicy": config.failure_policy.as_str(),
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": config.timeout_seconds,
        "admissionReviewVersions": ["v1"],
    })
}

/// The MutatingWebhookConfiguration and the ValidatingWebhookConfiguration
/// for `targets` (sorted by name, so equal inputs give equal objects), with
/// `ca_pem` (PEM) as every webhook's `caBundle`.
pub fn configurations(config: &Config, targets: &[AdmittedResource], ca_pem: &str) -> (Value, Value) {
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    let mut targets = targets.to_vec();
    targets.sort_by_key(|t| webhook_name(&t.group, &t.plural, &config.name));
    let object = |kind: &str, webhooks: Vec<Value>| {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": config.name, "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}},
            "webhooks": webhooks,
        })
    };
    // Defaulting is for whole objects; validation also judges `/scale`
    // writes (as the parent after scaling, see [`crate::scale`]), which a
    // rule naming only the resource does not match. A parent without a
    // scale subresource never sees a request for it.
    let mutating = targets.iter().map(|t| webhook(config, t, vec![t.plural.clone()], &t.mutate_path, &ca_bundle)).collect();
    let validating =
        targets.iter().map(|t| webhook(config, t, vec![t.plural.clone(), format!("{}/scale", t.plural)], &t.validate_path, &ca_bundle)).collect();
    (object("MutatingWebhookConfiguration", mutating), object("ValidatingWebhookConfiguration", validating))
}

/// Why the configurations could not be written this time (retried).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot find the resource name of {kind} (plugin {plugin})")]
    Discovery {
        plugin: String,
        kind: String,
        #[source]
        source: kube::Error,
    },
    #[error("cannot apply {kind} {name}")]
    Apply {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The plural of the plugin's parent: from the plugin's own CRD, else discovery.
async fn plural(client: &kube::Client, plugin: &LoadedPlugin) -> Result<String, Error> {
    let m = plugin.manifest();
    let from_crd = m.crds.iter().find_map(|crd| {
        let defines_parent = crd.pointer("/spec/group").and_then(Value::as_str) == Some(m.parent.group.as_str())
            && crd.pointer("/spec/names/kind").and_then(Value::as_str) == Some(m.parent.kind.as_str());
        defines_parent.then(|| crd.pointer("/spec/names/plural").and_then(Value::as_str)).flatten()
    });
    if let Some(plural) = from_crd {
        return Ok(plural.to_string());
    }
    let gvk = kube::api::GroupVersionKind::gvk(&m.parent.group, &m.parent.version, &m.parent.kind);
    kube::discovery::pinned_kind(client, &gvk).await.map(|(resource, _)| resource.plural).map_err(|source| Error::Discovery {
        plugin: m.name.clone(),
        kind: format!("{}/{}", m.parent.api_version(), m.parent.kind),
        source,
    })
}

/// The targets of `plugins`; `plurals` remembers what discovery answered.
async fn targets(
    client: &kube::Client,
    plugins: &[LoadedPlugin],
    plurals: &mut HashMap<GroupVersionKind, String>,
) -> Result<Vec<AdmittedResource>, Error> {
    let mut targets = Vec::new();
    for p in plugins {
        let parent = &p.manifest().parent;
        let plural = match plurals.get(parent) {
            Some(known) => known.clone(),
            None => {
                let found = plural(client, p).await?;
                plurals.insert(parent.clone(), found.clone());
                found
            }
        };
        targets.push(AdmittedResource {
            group: parent.group.clone(),
            version: parent.version.clone(),
            plural,
            mutate_path: super::path_for("mutate", p),
            validate_path: super::path_for("validate", p),
        });
    }
    Ok(targets)
}

/// Server-side applies both objects (forced: they are the host's).
pub async fn apply(client: &kube::Client, mutating: &Value, validating: &Value) -> Result<(), Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let name = mutating["metadata"]["name"].as_str().unwrap_or_default().to_string();
    Api::<MutatingWebhookConfiguration>::all(client.clone()).patch(&name, &params, &Patch::Apply(mutating)).await.map_err(|source| Error::Apply {
        kind: "MutatingWebhookConfiguration",
        name: name.clone(),
        source,
    })?;
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .patch(&name, &params, &Patch::Apply(validating))
        .await
        .map_err(|source| Error::Apply { kind: "ValidatingWebhookConfiguration", name: name.clone(), source })?;
    Ok(())
}

/// Keeps both configurations applied for the plugins in `registry` and the
/// CA in `ca_pem`, until the task is dropped.
///
/// Who writes: with `leading` (leader election) only the leader, once it
/// leads. Every replica serves the webhooks, but replicas can disagree about
/// the plugin set for a while (a rolling update that changes `--plugin`
/// files, a ConfigMap change seen a moment apart); with one field manager
/// every replica's apply would replace the others' webhook list, so the
/// object would flap between them. One writer gives one answer, the same
/// one the reconciling replica acts on. The CA is the same on every replica
/// only with a shared certificate (`--webhook-cert-secret` or a mounted
/// pair), which the command line requires with leader election.
pub async fn run(
    client: kube::Client,
    config: Config,
    registry: Registry,
    mut ca_pem: watch::Receiver<Arc<str>>,
    mut leading: Option<watch::Receiver<bool>>,
) {
    let mut plugins_changed = registry.changes();
    let mut plurals = HashMap::new();
    let mut applied: Option<(Value, Value)> = None;
    let mut retry_delay = FIRST_RETRY_DELAY;
    let mut ca_can_change = true;
    let mut reassert = tokio::time::Instant::now() + REASSERT_EVERY;
    loop {
        let standing_by = leading.as_ref().is_some_and(|l| !*l.borrow());
        if standing_by && let Some(leading) = leading.as_mut() {
            tracing::info!(configuration = %config.name, "not leading: the leader writes the webhook configurations");
            if leading.wait_for(|l| *l).await.is_err() {
                return;
            }
            // Another replica may have written while this one stood by.
            applied = None;
        }
        plugins_changed.mark_unchanged();
        let ca = ca_pem.borrow_and_update().clone();
        let outcome = match targets(&client, &registry.all(), &mut plurals).await {
            Ok(targets) => {
                let desired = configurations(&config, &targets, &ca);
                let due = tokio::time::Instant::now() >= reassert;
                if applied.as_ref() == Some(&desired) && !due {
                    Ok(())
                } else {
                    let result = apply(&client, &desired.0, &desired.1).await;
                    if result.is_ok() {
                        let webhooks: Vec<&str> = desired.1["webhooks"].as_array().into_iter().flatten().filter_map(|w| w["name"].as_str()).collect();
                        tracing::info!(configuration = %config.name, ?webhooks, "webhook configurations applied");
                        applied = Some(desired);
                        reassert = tokio::time::Instant::now() + REASSERT_EVERY;
                    }
                    result
                }
            }
            Err(e) => Err(e),
        };
        let wait = match outcome {
            Ok(()) => {
                retry_delay = FIRST_RETRY_DELAY;
                reassert.saturating_duration_since(tokio::time::Instant::now())
            }
            Err(e) => {
                tracing::warn!(configuration = %config.name, error = %crate::error_chain(&e), retry_in = ?retry_delay, "cannot write the webhook configurations; retrying");
                let wait = retry_delay;
                retry_delay = (retry_delay * 2).min(MAX_RETRY_DELAY);
                wait
            }
        };
        tokio::select! {
            changed = plugins_changed.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            // A closed channel means a CA that cannot change (a generated
            // pair, a Secret's), not a reason to stop.
            changed = ca_pem.changed(), if ca_can_change => {
                if changed.is_err() {
                    ca_can_change = false;
                }
            }
            () = tokio::time::sleep(wait) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(group: &str, plural: &str) -> AdmittedResource {
        AdmittedResource {
            group: group.into(),
            version: "v1".into(),
            plural: plural.into(),
            mutate_path: format!("/mutate-{plural}"),
            validate_path: format!("/validate-{plural}"),
        }
    }

    fn config(endpoint: Endpoint) -> Config {
        Config { name: "operator-host".into(), endpoint, failure_policy: FailurePolicy::Fail, timeout_seconds: 10 }
    }

    #[test]
    fn each_target_gets_a_mutating_and_a_validating_webhook_with_the_ca_and_its_path() {
        let (m, v) =
            configurations(&config(Endpoint::url("https://127.0.0.1:9443/").unwrap()), &[target("batch.tutorial.kubebuilder.io", "cronjobs")], "PEM");
        assert_eq!(m["kind"], "MutatingWebhookConfiguration");
        assert_eq!(v["kind"], "ValidatingWebhookConfiguration");
        let (mw, vw) = (&m["webhooks"][0], &v["webhooks"][0]);
        assert_eq!(mw["name"], "cronjobs.batch.tutorial.kubebuilder.io");
        assert_eq!(mw["clientConfig"]["url"], "https://127.0.0.1:9443/mutate-cronjobs");
        assert_eq!(vw["clientConfig"]["url"], "https://127.0.0.1:9443/validate-cronjobs");
        assert_eq!(vw["clientConfig"]["caBundle"], "UEVN", "base64 of the PEM");
        let rule = |resources: Value| json!([{"apiGroups": ["batch.tutorial.kubebuilder.io"], "apiVersions": ["v1"], "resources": resources, "operations": ["CREATE", "UPDATE"], "scope": "*"}]);
        assert_eq!(mw["rules"], rule(json!(["cronjobs"])));
        assert_eq!(vw["rules"], rule(json!(["cronjobs", "cronjobs/scale"])), "validation also judges /scale writes");
        for w in [mw, vw] {
            assert_eq!(w["failurePolicy"], "Fail");
            assert_eq!(w["sideEffects"], "None");
            assert_eq!(w["matchPolicy"], "Equivalent");
            assert_eq!(w["timeoutSeconds"], 10);
            assert_eq!(w["admissionReviewVersions"], json!(["v1"]));
        }
    }

    #[test]
    fn a_service_endpoint_carries_the_path_and_port_in_the_service_reference() {
        let (_, v) = configurations(&config(Endpoint::service("sys/op-webhook:9443").unwrap()), &[target("example.com", "widgets")], "PEM");
        assert_eq!(
            v["webhooks"][0]["clientConfig"]["service"],
            json!({"namespace": "sys", "name": "op-webhook", "port": 9443, "path": "/validate-widgets"})
        );
        assert!(v["webhooks"][0]["clientConfig"].get("url").is_none());
        assert_eq!(Endpoint::service("sys/op").unwrap(), Endpoint::Service { namespace: "sys".into(), name: "op".into(), port: 443 });
    }

    #[test]
    fn webhook_names_have_at_least_three_segments_also_for_built_in_groups() {
        assert_eq!(webhook_name("example.com", "widgets", "operator-host"), "widgets.example.com");
        assert_eq!(webhook_name("apps", "deployments", "operator-host"), "deployments.apps.operator-host");
        assert_eq!(webhook_name("", "configmaps", "operator-host"), "configmaps.core.operator-host");
    }

    #[test]
    fn equal_plugin_sets_give_equal_objects_whatever_their_order() {
        let c = config(Endpoint::url("https://h").unwrap());
        let (a, b) = (target("example.com", "widgets"), target("example.org", "gadgets"));
        assert_eq!(configurations(&c, &[a.clone(), b.clone()], "PEM"), configurations(&c, &[b, a], "PEM"));
    }

    #[test]
    fn endpoint_flags_are_checked() {
        assert!(matches!(Endpoint::url("http://127.0.0.1:9443"), Err(InvalidSetting::NotHttps(_))));
        assert!(matches!(Endpoint::url("https://"), Err(InvalidSetting::NotHttps(_))));
        assert!(matches!(Endpoint::url("https://h/x?y=1"), Err(InvalidSetting::UrlExtras(_))));
        assert!(matches!(Endpoint::service("op"), Err(InvalidSetting::Service(_))));
        assert!(matches!(Endpoint::service("sys/op:0"), Err(InvalidSetting::Port(_))));
        assert!(matches!(Endpoint::service("sys/op:http"), Err(InvalidSetting::Port(_))));
        assert!(check_name("operator-host").is_ok());
        assert!(check_name("Operator_Host").is_err());
    }

    #[test]
    fn the_server_name_is_what_the_api_server_checks_the_certificate_against() {
        assert_eq!(Endpoint::url("https://127.0.0.1:9443").unwrap().server_name(), "127.0.0.1");
        assert_eq!(Endpoint::url("https://webhook.example.com/prefix").unwrap().server_name(), "webhook.example.com");
        assert_eq!(Endpoint::url("https://[::1]:9443").unwrap().server_name(), "::1");
        assert_eq!(Endpoint::service("sys/op:9443").unwrap().server_name(), "op.sys.svc");
    }
}
