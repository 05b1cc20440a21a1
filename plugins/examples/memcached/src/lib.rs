//! The operator-sdk Go tutorial's Memcached operator as a typed plugin:
//! each `Memcached` (`cache.example.com/v1alpha1`) runs a Deployment of
//! `spec.size` memcached Pods, reports the Pods' names in `status.nodes`
//! and its state in the `Available` / `Degraded` conditions, and keeps a
//! finalizer whose cleanup records a Warning Event, as the tutorial does.
//!
//! The Pods are not its children (the Deployment's ReplicaSet owns them):
//! they reach reconcile as related objects (contract 0.2), picked by the
//! Deployment's labels.

pub mod api;
pub mod deployment;

use operator_plugin_sdk::conditions;
use operator_plugin_sdk::json;
use operator_plugin_sdk::k8s_openapi::api::apps::v1::Deployment;
use operator_plugin_sdk::k8s_openapi::api::core::v1::Pod;
use operator_plugin_sdk::prelude::*;

pub use api::{Memcached, MemcachedSpec, MemcachedStatus};

/// The tutorial's finalizer.
pub const FINALIZER: &str = "cache.example.com/finalizer";
/// The tutorial's condition types.
pub const AVAILABLE: &str = "Available";
pub const DEGRADED: &str = "Degraded";

pub struct MemcachedController;

impl Controller for MemcachedController {
    type Parent = Memcached;

    fn manifest() -> Manifest {
        Manifest::for_parent_with_crd::<Memcached>("memcached", env!("CARGO_PKG_VERSION"), api::crd())
            .child::<Deployment>()
            .with_finalizer(FINALIZER)
    }

    fn reconcile(memcached: &Memcached, children: &Children, now: Time) -> Result<Outcome, ReconcileError> {
        decide(memcached, &children.of::<Deployment>()?, &[], now)
    }

    fn validate(memcached: &Memcached, _old: Option<&Memcached>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let size = memcached.spec.size;
        if !(api::MIN_SIZE..=api::MAX_SIZE).contains(&size) {
            errors.push(FieldError::invalid(
                "spec.size",
                size.to_string(),
                format!("must be between {} and {}, inclusive", api::MIN_SIZE, api::MAX_SIZE),
            ));
        }
        if let Some(port) = memcached.spec.container_port.filter(|p| !(1..=65535).contains(p)) {
            errors.push(FieldError::invalid("spec.containerPort", port.to_string(), "must be between 1 and 65535, inclusive"));
        }
        errors
    }
}

export_plugin!(MemcachedController);

/// One reconcile over the Memcached's Deployments (children) and the Pods
/// its Deployment selects (related), the tutorial's `Reconcile`.
pub fn decide(memcached: &Memcached, deployments: &[Deployment], pods: &[Pod], now: Time) -> Result<Outcome, ReconcileError> {
    let name = memcached.name_any();
    let mut conditions: Vec<Condition> =
        memcached.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default().into_iter().filter(|c| c.type_ != "Reconciled").collect();
    let mut out = Outcome::new();

    if memcached.metadata.deletion_timestamp.is_some() {
        // The tutorial's doFinalizerOperationsForMemcached: an Event, Degraded=True, then release.
        out.event_warning("Deleting", format!("Custom Resource {name} is being deleted from the namespace {}", memcached.namespace().unwrap_or_default()));
        let done = format!("Finalizer operations for custom resource {name} name were successfully accomplished");
        conditions::set(&mut conditions, Condition::new(DEGRADED, true, "Finalizing", done), now);
        out.status(&MemcachedStatus { nodes: nodes(memcached, deployments, pods), conditions })?;
        return Ok(out.finalized());
    }

    let size = memcached.spec.size;
    match deployments.iter().find(|d| d.metadata.name.as_deref() == Some(name.as_str())) {
        None => {
            out.create(&deployment::desired(memcached))?;
            out.event_normal("Created", format!("created Deployment {name} with {size} replicas"));
            let starting = Condition { status: "Unknown".into(), ..Condition::new(AVAILABLE, false, "Reconciling", "Starting reconciliation") };
            conditions::set(&mut conditions, starting, now);
        }
        Some(found) => {
            if found.spec.replicas != Some(size) {
                let target = ObjectRef { api_version: "apps/v1".into(), kind: "Deployment".into(), namespace: memcached.namespace().unwrap_or_default(), name: name.clone() };
                out.patch(target, &json!({"spec": {"replicas": size}}))?;
                out.event_normal("Scaled", format!("scaled Deployment {name} to {size} replicas"));
            }
            let message = format!("Deployment for custom resource ({name}) with {size} replicas created successfully");
            conditions::set(&mut conditions, Condition::new(AVAILABLE, true, "Reconciling", message), now);
        }
    }
    out.status(&MemcachedStatus { nodes: nodes(memcached, deployments, pods), conditions })?;
    Ok(out)
}

/// The names of the Pods the Memcached's Deployment selects, sorted; Pods
/// being deleted no longer serve and are left out.
pub fn nodes(memcached: &Memcached, deployments: &[Deployment], pods: &[Pod]) -> Vec<String> {
    let name = memcached.name_any();
    let Some(selector) = deployments.iter().find(|d| d.metadata.name.as_deref() == Some(name.as_str())).map(|d| &d.spec.selector)
    else {
        return Vec::new();
    };
    let mut names: Vec<String> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.metadata.labels.as_ref().is_some_and(|labels| deployment::selects(selector, labels)))
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    names
}
