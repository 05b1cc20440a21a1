//! The operator-sdk Go tutorial's Memcached operator as a typed plugin:
//! each `Memcached` (`cache.example.com/v1alpha1`) runs a Deployment of
//! `spec.size` memcached Pods, reports the Pods' names in `status.nodes`
//! and its state in the `Available` / `Degraded` conditions, and keeps a
//! finalizer whose cleanup records a Warning Event, as the tutorial does.
//!
//! The Pods are not its children (the Deployment's ReplicaSet owns them):
//! they reach reconcile as related objects (contract 0.2), picked by the
//! Deployment's labels. The Deployment is applied server-side (contract
//! 0.3): the plugin says what it wants, never how to get there.

pub mod api;
pub mod deployment;

use operator_plugin_sdk::conditions;
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
        Manifest::for_parent_with_crd::<Memcached>("memcached", env!("CARGO_PKG_VERSION"), embedded_crd!())
            .child::<Deployment>()
            // Every memcached Pod of the namespace (the labels all instances
            // share); `nodes` keeps those of this instance's Deployment. A
            // Pod's change then requeues the namespace's Memcacheds, which
            // for the tutorial's few instances costs nothing.
            .related(RelatedKind::labeled::<Pod>(deployment::shared_labels()))
            .with_finalizer(FINALIZER)
    }

    fn reconcile_with_related(memcached: &Memcached, children: &Children, related: &Related, now: Time) -> Result<Outcome, ReconcileError> {
        decide(memcached, &children.of::<Deployment>()?, &related.of::<Pod>()?, now)
    }

    fn validate(memcached: &Memcached, _old: Option<&Memcached>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let size = memcached.spec.size;
        if !(api::MIN_SIZE..=api::MAX_SIZE).contains(&size) {
            errors.push(FieldError::invalid("spec.size", size, format!("must be between {} and {}, inclusive", api::MIN_SIZE, api::MAX_SIZE)));
        }
        if let Some(port) = memcached.spec.container_port.filter(|p| !(1..=65535).contains(p)) {
            errors.push(FieldError::invalid("spec.containerPort", port, "must be between 1 and 65535, inclusive"));
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
        out.event_warning(
            "Deleting",
            format!("Custom Resource {name} is being deleted from the namespace {}", memcached.namespace().unwrap_or_default()),
        );
        let done = format!("Finalizer operations for custom resource {name} name were successfully accomplished");
        conditions::set(&mut conditions, Condition::new(DEGRADED, true, "Finalizing", done), now);
        out.status(&MemcachedStatus { nodes: nodes(memcached, deployments, pods), conditions })?;
        return Ok(out.finalized());
    }

    // The Deployment as wanted, every time (contract 0.3): the host applies
    // it server-side, so an unchanged one is not written and a changed size
    // is, with no comparison here. The Events and conditions still say what
    // happened, as the tutorial's do.
    let size = memcached.spec.size;
    out.apply(&deployment::desired(memcached))?;
    match deployments.iter().find(|d| d.metadata.name.as_deref() == Some(name.as_str())) {
        None => {
            out.event_normal("Created", format!("created Deployment {name} with {size} replicas"));
            let starting = Condition { status: "Unknown".into(), ..Condition::new(AVAILABLE, false, "Reconciling", "Starting reconciliation") };
            conditions::set(&mut conditions, starting, now);
        }
        Some(found) => {
            if found.spec.replicas != Some(size) {
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
    let Some(selector) = deployments.iter().find(|d| d.metadata.name.as_deref() == Some(name.as_str())).map(|d| &d.spec.selector) else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use operator_plugin_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time as MetaTime};

    fn memcached(size: i32) -> Memcached {
        let mut m = Memcached::new("cache", MemcachedSpec { size, container_port: Some(11211) });
        m.metadata.namespace = Some("default".into());
        m
    }

    fn pod(name: &str, instance: &str, deleting: bool) -> Pod {
        let mut labels = deployment::labels(instance);
        labels.insert("pod-template-hash".into(), "5d8f7c9b6".into());
        let deletion_timestamp = deleting.then(|| MetaTime(Default::default()));
        Pod { metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels), deletion_timestamp, ..Default::default() }, ..Default::default() }
    }

    #[test]
    fn nodes_are_the_live_pods_its_deployment_selects_sorted() {
        let m = memcached(3);
        let deployments = vec![deployment::desired(&m)];
        let pods =
            vec![pod("cache-b", "cache", false), pod("other-a", "other", false), pod("cache-a", "cache", false), pod("cache-c", "cache", true)];
        assert_eq!(nodes(&m, &deployments, &pods), ["cache-a", "cache-b"]);
        assert!(nodes(&m, &[], &pods).is_empty(), "no Deployment yet: no selector, no nodes");
    }

    #[test]
    fn size_outside_one_to_five_is_refused_as_the_tutorial_validates() {
        for (size, ok) in [(0, false), (1, true), (5, true), (6, false)] {
            let errors = MemcachedController::validate(&memcached(size), None);
            assert_eq!(errors.is_empty(), ok, "size {size}: {errors:?}");
        }
        let e = &MemcachedController::validate(&memcached(9), None)[0];
        assert_eq!(e.to_string(), r#"spec.size: Invalid value: 9: must be between 1 and 5, inclusive"#);
    }

    #[test]
    fn the_deployment_runs_size_replicas_on_the_container_port() {
        let mut m = memcached(4);
        m.spec.container_port = Some(11300);
        let d = deployment::desired(&m);
        assert_eq!(d.spec.replicas, Some(4));
        let c = &d.spec.template.spec.as_ref().unwrap().containers[0];
        assert_eq!((c.image.as_deref(), c.ports.as_ref().unwrap()[0].container_port), (Some(deployment::IMAGE), 11300));
        assert_eq!(d.spec.selector.match_labels.as_ref(), d.spec.template.metadata.as_ref().unwrap().labels.as_ref());
    }
}
