//! The Deployment a Memcached runs on, as the tutorial's
//! `deploymentForMemcached` builds it.

use std::collections::BTreeMap;

use operator_plugin_sdk::ResourceExt;
use operator_plugin_sdk::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use operator_plugin_sdk::k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, PodSecurityContext, PodSpec, PodTemplateSpec, SeccompProfile, SecurityContext,
};
use operator_plugin_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::api::Memcached;

/// The tutorial's operand image (its `MEMCACHED_IMAGE`; a plugin has no
/// environment, so it is fixed here).
pub const IMAGE: &str = "memcached:1.6.26-alpine3.19";

/// The labels every memcached Pod carries, whatever its instance.
pub fn shared_labels() -> [(&'static str, &'static str); 2] {
    [("app.kubernetes.io/name", "Memcached"), ("app.kubernetes.io/part-of", "memcached-operator")]
}

/// The tutorial's `labelsForMemcached`: the recommended labels, with the
/// instance name so that each Memcached selects only its own Pods.
pub fn labels(name: &str) -> BTreeMap<String, String> {
    let version = IMAGE.split_once(':').map_or("", |(_, tag)| tag);
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "Memcached".to_string()),
        ("app.kubernetes.io/instance".to_string(), name.to_string()),
        ("app.kubernetes.io/version".to_string(), version.to_string()),
        ("app.kubernetes.io/part-of".to_string(), "memcached-operator".to_string()),
        ("app.kubernetes.io/created-by".to_string(), "controller-manager".to_string()),
    ])
}

/// The Deployment for `memcached`: same name, `size` replicas, one
/// restricted memcached container. The host sets namespace and owner.
pub fn desired(memcached: &Memcached) -> Deployment {
    let name = memcached.name_any();
    let labels = labels(&name);
    let container = Container {
        name: "memcached".into(),
        image: Some(IMAGE.into()),
        image_pull_policy: Some("IfNotPresent".into()),
        // The tutorial's restricted-profile settings (Pod Security Standards).
        security_context: Some(SecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(1001),
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities { drop: Some(vec!["ALL".into()]), ..Default::default() }),
            ..Default::default()
        }),
        ports: Some(vec![ContainerPort { container_port: memcached.spec.port(), name: Some("memcached".into()), ..Default::default() }]),
        command: Some(["memcached", "--memory-limit=64", "-o", "modern", "-v"].map(String::from).to_vec()),
        ..Default::default()
    };
    Deployment {
        metadata: ObjectMeta { name: Some(name), ..Default::default() },
        spec: DeploymentSpec {
            replicas: Some(memcached.spec.size),
            selector: LabelSelector { match_labels: Some(labels.clone()), ..Default::default() },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta { labels: Some(labels), ..Default::default() }),
                spec: Some(PodSpec {
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".into(), ..Default::default() }),
                        ..Default::default()
                    }),
                    containers: vec![container],
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

/// True when every `matchLabels` pair of `selector` is on `labels` (the
/// Deployment's selector has only `matchLabels`, as [`desired`] writes it).
pub fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    selector.match_expressions.as_ref().is_none_or(Vec::is_empty)
        && selector.match_labels.as_ref().is_some_and(|want| !want.is_empty() && want.iter().all(|(k, v)| labels.get(k) == Some(v)))
}
