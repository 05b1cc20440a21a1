//! Dumps the OpenAPI v3 schemas of the built-in kinds the embedded API server serves, from
//! k8s-openapi's schemars support, as `{"roots": {kind: $ref}, "schemas": {name: schema}}`.

use k8s_openapi::api::{apps::v1 as apps, batch::v1 as batch, coordination::v1 as coord, core::v1 as core, events::v1 as events, rbac::v1 as rbac};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use schemars::generate::SchemaSettings;

fn main() {
    let mut g = SchemaSettings::openapi3().into_generator();
    let mut roots = serde_json::Map::new();
    macro_rules! add {
        ($($t:ty => $name:expr),* $(,)?) => {$(
            let s = g.subschema_for::<$t>();
            roots.insert($name.to_string(), serde_json::to_value(&s).unwrap());
        )*};
    }
    add!(
        core::Namespace => "Namespace", core::Pod => "Pod", core::ConfigMap => "ConfigMap", core::Secret => "Secret",
        core::Service => "Service", core::Event => "Event", core::ServiceAccount => "ServiceAccount", core::Node => "Node",
        events::Event => "events.k8s.io/Event", batch::Job => "Job", apps::ControllerRevision => "ControllerRevision",
        apps::Deployment => "Deployment", apps::ReplicaSet => "ReplicaSet", coord::Lease => "Lease",
        apiext::CustomResourceDefinition => "CustomResourceDefinition", rbac::Role => "Role", rbac::RoleBinding => "RoleBinding",
        rbac::ClusterRole => "ClusterRole", rbac::ClusterRoleBinding => "ClusterRoleBinding",
    );
    let defs = g.take_definitions(true);
    let out = serde_json::json!({"roots": roots, "schemas": defs});
    println!("{}", serde_json::to_string(&out).unwrap());
}
