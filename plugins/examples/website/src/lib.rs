//! A static website operator on desired state: each `Website`
//! (`web.example.com/v1alpha1`) wants a ConfigMap with its page, an nginx
//! Deployment of `spec.replicas` serving it and a Service in front, and
//! says so by applying all three every reconcile (contract 0.3). The host
//! applies them server-side with this plugin's field manager, so fields the
//! API server defaults never look like drift, a reconcile with nothing new
//! writes nothing, and a child this plugin stops applying is deleted.
//!
//! Status comes from the Deployment: its replicas and ready replicas, the
//! Pods' selector (for the scale subresource, so `kubectl scale website`
//! works), its `Available` condition and a `Ready` condition of its own.

pub mod api;
pub mod children;

use operator_plugin_sdk::conditions;
use operator_plugin_sdk::k8s_openapi::api::apps::v1::Deployment;
use operator_plugin_sdk::k8s_openapi::api::core::v1::{ConfigMap, Service};
use operator_plugin_sdk::prelude::*;

pub use api::{Website, WebsiteSpec, WebsiteStatus};

/// Condition types of a Website.
pub const AVAILABLE: &str = "Available";
pub const READY: &str = "Ready";
/// The largest page accepted: a ConfigMap holds at most 1 MiB in all.
pub const MAX_CONTENT_BYTES: usize = 512 * 1024;

pub struct WebsiteController;

impl Controller for WebsiteController {
    type Parent = Website;

    fn manifest() -> Manifest {
        Manifest::for_parent_with_crd::<Website>("website", env!("CARGO_PKG_VERSION"), embedded_crd!())
            .child::<ConfigMap>()
            .child::<Deployment>()
            .child::<Service>()
    }

    fn reconcile(website: &Website, children: &Children, now: Time) -> Result<Outcome, ReconcileError> {
        decide(website, &children.of::<Deployment>()?, now)
    }

    fn validate(website: &Website, _old: Option<&Website>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let replicas = website.spec.replicas;
        if !(api::MIN_REPLICAS..=api::MAX_REPLICAS).contains(&replicas) {
            errors.push(FieldError::invalid(
                "spec.replicas",
                replicas.to_string(),
                format!("must be between {} and {}, inclusive", api::MIN_REPLICAS, api::MAX_REPLICAS),
            ));
        }
        if website.spec.image.as_deref().is_some_and(|i| i.trim().is_empty()) {
            errors.push(FieldError::invalid("spec.image", "", "must not be empty when set"));
        }
        if website.spec.content.len() > MAX_CONTENT_BYTES {
            errors.push(FieldError::invalid(
                "spec.content",
                format!("{} bytes", website.spec.content.len()),
                format!("must be at most {MAX_CONTENT_BYTES} bytes"),
            ));
        }
        errors
    }
}

export_plugin!(WebsiteController);

/// One reconcile: the three children as wanted, and the status the
/// Website's Deployment (if the cache has it yet) reports.
pub fn decide(website: &Website, deployments: &[Deployment], now: Time) -> Result<Outcome, ReconcileError> {
    let name = website.name_any();
    let mut out = Outcome::new();
    out.apply(&children::config_map(website))?;
    out.apply(&children::deployment(website))?;
    out.apply(&children::service(website))?;

    let deployment = deployments.iter().find(|d| d.metadata.name.as_deref() == Some(name.as_str()));
    let observed = deployment.and_then(|d| d.status.as_ref());
    let replicas = observed.and_then(|s| s.replicas).unwrap_or(0);
    let ready = observed.and_then(|s| s.ready_replicas).unwrap_or(0);
    let mut conds: Vec<Condition> =
        website.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default().into_iter().filter(|c| c.type_ != "Reconciled").collect();
    let available = observed.and_then(|s| s.conditions.as_ref()).and_then(|cs| cs.iter().find(|c| c.type_.as_deref() == Some("Available")));
    let available = match available {
        Some(c) => Condition {
            status: c.status.clone().unwrap_or_else(|| "Unknown".into()),
            ..Condition::new(AVAILABLE, false, c.reason.as_deref().unwrap_or("Unknown"), c.message.clone().unwrap_or_default())
        },
        None => Condition {
            status: "Unknown".into(),
            ..Condition::new(AVAILABLE, false, "Pending", format!("Deployment {name} reports no Available condition yet"))
        },
    };
    conditions::set(&mut conds, available, now);
    let want = website.spec.replicas;
    let ready_condition = if ready >= want {
        Condition::new(READY, true, "AllReplicasReady", format!("{ready} of {want} replicas are ready"))
    } else {
        Condition::new(READY, false, "ReplicasNotReady", format!("{ready} of {want} replicas are ready"))
    };
    conditions::set(&mut conds, ready_condition, now);
    out.status(&WebsiteStatus { replicas, ready_replicas: ready, selector: children::selector_string(&name), conditions: conds })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use operator_plugin_sdk::Action;

    fn website(replicas: i32) -> Website {
        let mut w = Website::new("site", WebsiteSpec { replicas, image: None, content: "<h1>hello</h1>".into() });
        w.metadata.namespace = Some("default".into());
        w
    }

    #[test]
    fn every_reconcile_applies_the_three_children_without_defaulted_fields() {
        let out = decide(&website(3), &[], Time::from_unix_millis(0)).unwrap();
        let applied: Vec<&operator_plugin_sdk::serde_json::Value> =
            out.actions().iter().filter_map(|a| if let Action::Apply(o) = a { Some(o) } else { None }).collect();
        let kinds: Vec<&str> = applied.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["ConfigMap", "Deployment", "Service"]);
        let service = applied[2];
        assert!(service["spec"]["ports"][0].get("protocol").is_none(), "protocol is the API server's default: {service}");
        assert!(service["spec"].get("sessionAffinity").is_none(), "{service}");
        let volume = &applied[1]["spec"]["template"]["spec"]["volumes"][0];
        assert!(volume["configMap"].get("defaultMode").is_none(), "defaultMode is the API server's default: {volume}");
        assert_eq!(applied[1]["spec"]["replicas"], 3);
    }

    #[test]
    fn replicas_outside_one_to_ten_are_refused() {
        for (replicas, ok) in [(0, false), (1, true), (10, true), (11, false)] {
            assert_eq!(WebsiteController::validate(&website(replicas), None).is_empty(), ok, "replicas {replicas}");
        }
    }

    #[test]
    fn a_changed_page_changes_the_pod_template() {
        let mut w = website(1);
        let before = children::deployment(&w);
        w.spec.content = "<h1>changed</h1>".into();
        let after = children::deployment(&w);
        assert_ne!(before.spec.template.metadata, after.spec.template.metadata);
        assert_eq!(children::content_hash(""), "cbf29ce484222325", "FNV-1a's offset basis for empty input");
    }
}
