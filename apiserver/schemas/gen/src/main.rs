//! Dumps the OpenAPI v3 schemas of the built-in kinds the embedded API server serves, from
//! k8s-openapi's schemars support, as `{"roots": {"<apiVersion>/<Kind>": $ref}, "schemas": {name: schema}}`.
//! The list below is the one in `apiserver/src/resources/builtin.rs` (every kind a 1.32 server
//! serves by default); a unit test there checks that every served kind has a root here.

use k8s_openapi::api::{
    admissionregistration::v1 as admission, apps::v1 as apps, authentication::v1 as authn, authorization::v1 as authz,
    autoscaling::v1 as autoscaling1, autoscaling::v2 as autoscaling2, batch::v1 as batch, certificates::v1 as certificates,
    coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery, events::v1 as events, flowcontrol::v1 as flowcontrol,
    networking::v1 as networking, node::v1 as node, policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling,
    storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
use schemars::generate::SchemaSettings;

fn main() {
    let mut g = SchemaSettings::openapi3().into_generator();
    let mut roots = serde_json::Map::new();
    macro_rules! add {
        ($($t:ty),* $(,)?) => {$(
            let s = g.subschema_for::<$t>();
            let key = format!("{}/{}", <$t as k8s_openapi::Resource>::API_VERSION, <$t as k8s_openapi::Resource>::KIND);
            roots.insert(key, serde_json::to_value(&s).unwrap());
        )*};
    }
    add!(
        core::Binding, core::ComponentStatus, core::ConfigMap, core::Endpoints, core::Event, core::LimitRange, core::Namespace,
        core::Node, core::PersistentVolumeClaim, core::PersistentVolume, core::Pod, core::PodTemplate, core::ReplicationController,
        core::ResourceQuota, core::Secret, core::ServiceAccount, core::Service,
        apiregistration::APIService,
        apps::ControllerRevision, apps::DaemonSet, apps::Deployment, apps::ReplicaSet, apps::StatefulSet,
        events::Event,
        authn::SelfSubjectReview, authn::TokenReview, authn::TokenRequest,
        authz::LocalSubjectAccessReview, authz::SelfSubjectAccessReview, authz::SelfSubjectRulesReview, authz::SubjectAccessReview,
        autoscaling2::HorizontalPodAutoscaler, autoscaling1::HorizontalPodAutoscaler, autoscaling1::Scale,
        batch::CronJob, batch::Job,
        certificates::CertificateSigningRequest,
        networking::IngressClass, networking::Ingress, networking::NetworkPolicy,
        policy::PodDisruptionBudget, policy::Eviction,
        rbac::ClusterRoleBinding, rbac::ClusterRole, rbac::RoleBinding, rbac::Role,
        storage::CSIDriver, storage::CSINode, storage::CSIStorageCapacity, storage::StorageClass, storage::VolumeAttachment,
        admission::MutatingWebhookConfiguration, admission::ValidatingAdmissionPolicy, admission::ValidatingAdmissionPolicyBinding,
        admission::ValidatingWebhookConfiguration,
        apiextensions::CustomResourceDefinition,
        scheduling::PriorityClass, coordination::Lease, node::RuntimeClass, discovery::EndpointSlice,
        flowcontrol::FlowSchema, flowcontrol::PriorityLevelConfiguration,
    );
    let defs = g.take_definitions(true);
    let out = serde_json::json!({"roots": roots, "schemas": defs});
    println!("{}", serde_json::to_string(&out).unwrap());
}
