//! The minimal example plugin: each `Hello` (group `example.operator.dev`)
//! keeps one ConfigMap named `<name>-greeting` holding `spec.greeting`, and
//! reports in its status whether the ConfigMap is up to date.

use std::collections::BTreeMap;

use operator_plugin_sdk::json;
use operator_plugin_sdk::k8s_openapi::api::core::v1::ConfigMap;
use operator_plugin_sdk::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use operator_plugin_sdk::prelude::*;

/// The Hello kind's spec; the derive generates `Hello` and its CRD.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "example.operator.dev",
    version = "v1alpha1",
    kind = "Hello",
    namespaced,
    status = "HelloStatus",
    doc = "A Hello keeps one ConfigMap with its greeting."
)]
#[kube(crates(
    kube_core = "::operator_plugin_sdk::kube_core",
    k8s_openapi = "::operator_plugin_sdk::k8s_openapi",
    schemars = "::operator_plugin_sdk::schemars",
    serde_json = "::operator_plugin_sdk::serde_json"
))]
pub struct HelloSpec {
    /// What the ConfigMap says; defaults to `Hello`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub greeting: Option<String>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HelloStatus {
    /// True when the last reconcile found the ConfigMap as desired.
    #[serde(default)]
    pub up_to_date: bool,
    /// The host writes its `Reconciled` condition here; a status schema
    /// without `conditions` would have the API server prune it away.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

pub struct HelloController;

impl Controller for HelloController {
    type Parent = Hello;

    fn manifest() -> Manifest {
        // The CRD generated from the types above, checked in as crd.json
        // (kept fresh by a test): generating it at run time would link
        // schemars into the plugin.
        Manifest::for_parent_with_crd::<Hello>("hello", env!("CARGO_PKG_VERSION"), embedded_crd!()).child::<ConfigMap>()
    }

    fn reconcile(hello: &Hello, children: &Children, _now: Time) -> Result<Outcome, ReconcileError> {
        let greeting = hello.spec.greeting.as_deref().unwrap_or("Hello");
        let name = format!("{}-greeting", hello.name_any());
        let desired = BTreeMap::from([("greeting".to_string(), greeting.to_string())]);
        let mut out = Outcome::new();
        let configmaps = children.of::<ConfigMap>()?;
        match configmaps.iter().find(|c| c.metadata.name.as_deref() == Some(name.as_str())) {
            None => {
                let cm =
                    ConfigMap { metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() }, data: Some(desired), ..Default::default() };
                out.create(&cm)?;
                out.event_normal("Created", format!("created ConfigMap {name}"));
            }
            Some(existing) if existing.data.as_ref() != Some(&desired) => {
                let target = ObjectRef { api_version: "v1".into(), kind: "ConfigMap".into(), namespace: hello.namespace().unwrap_or_default(), name };
                out.patch(target, &json!({"data": desired}))?;
            }
            Some(_) => {}
        }
        let up_to_date = out.is_empty();
        out.status(&json!({"upToDate": up_to_date}))?;
        Ok(out)
    }

    fn validate(hello: &Hello, _old: Option<&Hello>) -> Vec<FieldError> {
        match &hello.spec.greeting {
            Some(g) if g.len() > 64 => vec![FieldError::too_long("spec.greeting", g, 64)],
            _ => vec![],
        }
    }

    fn default(hello: &mut Hello) -> Result<(), ReconcileError> {
        hello.spec.greeting.get_or_insert_with(|| "Hello".into());
        Ok(())
    }
}

export_plugin!(HelloController);

#[cfg(test)]
mod tests {
    use super::*;
    use operator_plugin_sdk::plugin;

    fn hello(greeting: &str) -> String {
        json!({
            "apiVersion": "example.operator.dev/v1alpha1", "kind": "Hello",
            "metadata": {"name": "world", "namespace": "default", "uid": "u1"},
            "spec": {"greeting": greeting}
        })
        .to_string()
    }

    #[test]
    fn a_new_hello_creates_its_configmap() {
        let actions = plugin::reconcile::<HelloController>(&hello("Hi"), &[], 0).unwrap();
        assert!(matches!(&actions[0], Action::Create(cm) if cm["data"]["greeting"] == "Hi" && cm["metadata"]["name"] == "world-greeting"));
    }

    #[test]
    fn an_up_to_date_configmap_is_left_alone() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "world-greeting", "namespace": "default"}, "data": {"greeting": "Hi"}});
        let actions = plugin::reconcile::<HelloController>(&hello("Hi"), &[cm.to_string()], 0).unwrap();
        assert_eq!(actions, vec![Action::SetStatus(json!({"upToDate": true}))]);
    }

    /// `UPDATE_CRD=1 cargo test -p hello` rewrites crd.json.
    #[test]
    fn crd_json_is_the_generated_crd() {
        operator_plugin_sdk::testing::assert_crd_file_matches(
            &operator_plugin_sdk::crd::generated::<Hello>(),
            concat!(env!("CARGO_MANIFEST_DIR"), "/crd.json"),
        );
    }

    #[test]
    fn the_generated_crd_keeps_the_status_conditions_and_the_length_limit() {
        let crd = HelloController::manifest().crds.remove(0);
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
        assert_eq!(schema["spec"]["properties"]["greeting"]["maxLength"], 64);
        assert_eq!(schema["status"]["properties"]["conditions"]["type"], "array");
        assert_eq!(crd["spec"]["versions"][0]["subresources"]["status"], json!({}));
    }
}
