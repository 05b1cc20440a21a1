//! The three children a Website wants, as whole objects for the host to
//! apply: only the fields this plugin decides, nothing the API server
//! defaults (Service `protocol` and `sessionAffinity`, volume `defaultMode`,
//! container `terminationMessagePath`, ...), so applying them again is a
//! no-op and no comparison with the live objects is needed.

use std::collections::BTreeMap;

use operator_plugin_sdk::ResourceExt;
use operator_plugin_sdk::k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use operator_plugin_sdk::k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, PodSpec, PodTemplateSpec, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use operator_plugin_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use operator_plugin_sdk::k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::Website;

/// The Pod annotation that carries a hash of the content: a changed page
/// changes the template, so the Deployment rolls its Pods onto it (nginx
/// would otherwise keep serving the mounted file until kubelet syncs it).
pub const CONTENT_HASH: &str = "web.example.com/content-hash";
const HTML_DIR: &str = "/usr/share/nginx/html";

/// The labels of the Website's Pods, its Deployment's selector.
pub fn selector_labels(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("app.kubernetes.io/name".to_string(), "website".to_string()), ("app.kubernetes.io/instance".to_string(), name.to_string())])
}

/// `selector_labels` in the string form of a label selector (`status.selector`).
pub fn selector_string(name: &str) -> String {
    selector_labels(name).iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
}

/// The ConfigMap holding the page: `<name>-content`.
pub fn content_name(website: &Website) -> String {
    format!("{}-content", website.name_any())
}

fn meta(name: String) -> ObjectMeta {
    ObjectMeta { name: Some(name), ..Default::default() }
}

pub fn config_map(website: &Website) -> ConfigMap {
    ConfigMap {
        metadata: meta(content_name(website)),
        data: Some(BTreeMap::from([("index.html".to_string(), website.spec.content.clone())])),
        ..Default::default()
    }
}

pub fn deployment(website: &Website) -> Deployment {
    let name = website.name_any();
    let labels = selector_labels(&name);
    let container = Container {
        name: "nginx".into(),
        image: Some(website.spec.image().into()),
        ports: Some(vec![ContainerPort { container_port: 80, name: Some("http".into()), ..Default::default() }]),
        volume_mounts: Some(vec![VolumeMount { name: "content".into(), mount_path: HTML_DIR.into(), read_only: Some(true), ..Default::default() }]),
        ..Default::default()
    };
    let volume = Volume {
        name: "content".into(),
        config_map: Some(ConfigMapVolumeSource { name: content_name(website), ..Default::default() }),
        ..Default::default()
    };
    let mut template_meta = ObjectMeta { labels: Some(labels.clone()), ..Default::default() };
    template_meta.annotations = Some(BTreeMap::from([(CONTENT_HASH.to_string(), content_hash(&website.spec.content))]));
    Deployment {
        metadata: meta(name),
        spec: DeploymentSpec {
            replicas: Some(website.spec.replicas),
            selector: LabelSelector { match_labels: Some(labels), ..Default::default() },
            template: PodTemplateSpec {
                metadata: Some(template_meta),
                spec: Some(PodSpec { containers: vec![container], volumes: Some(vec![volume]), ..Default::default() }),
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn service(website: &Website) -> Service {
    let name = website.name_any();
    Service {
        metadata: meta(name.clone()),
        spec: Some(ServiceSpec {
            selector: Some(selector_labels(&name)),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                target_port: Some(IntOrString::String("http".into())),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// FNV-1a (64 bit) of the content, hex: stable across builds and targets,
/// which `std`'s hasher does not promise.
pub fn content_hash(content: &str) -> String {
    let hash = content.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{hash:016x}")
}
