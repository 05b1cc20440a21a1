//! What the host reads back from the answer to one of its writes: the
//! written object's uid and resourceVersion (expectations) and, for a
//! parent's status write, its status. The rest of the answer (spec,
//! managedFields, the other metadata) is skipped while parsing.
//!
//! kube's `Api::create`/`patch` parse the whole answer into the `Api`'s type;
//! for a `DynamicObject` that is a `serde_json::Value` tree of the whole
//! object, dropped unread. In a profile of 10,000 CronJobs end to end, parsing
//! the answers to the Job create, the Event create and the status patch was
//! ~4% of the process's CPU. The requests are the ones `Api` builds
//! (`kube::core::Request`), and errors come back as from `Api` (the client's
//! own status handling).

use kube::Resource;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde::Deserialize;
use serde_json::Value;

/// The parts of a written object the host reads.
#[derive(Debug, Default, Deserialize)]
pub struct Written {
    #[serde(default)]
    pub metadata: WrittenMeta,
    /// Kept as it comes (any JSON a CRD's status may hold).
    #[serde(default)]
    status: Value,
}

#[derive(Debug, Default, Deserialize)]
pub struct WrittenMeta {
    #[serde(default)]
    pub uid: Option<String>,
    #[serde(default, rename = "resourceVersion")]
    pub resource_version: Option<String>,
}

impl Written {
    /// Whether `status.conditions` holds a condition of `type_`.
    pub fn has_condition(&self, type_: &str) -> bool {
        self.status.get("conditions").and_then(Value::as_array).is_some_and(|cs| cs.iter().any(|c| c["type"] == type_))
    }
}

/// Where objects of `ar` live: in `namespace`, or cluster-wide when it is empty.
pub struct ResourceEndpoint<'a> {
    pub client: &'a kube::Client,
    pub resource: &'a ApiResource,
    pub namespace: &'a str,
}

impl ResourceEndpoint<'_> {
    fn request(&self) -> kube::core::Request {
        let namespace = (!self.namespace.is_empty()).then_some(self.namespace);
        kube::core::Request::new(DynamicObject::url_path(self.resource, namespace))
    }

    /// POST `object`, as `Api::create`.
    pub async fn create<K: serde::Serialize>(&self, params: &PostParams, object: &K) -> kube::Result<Written> {
        let body = serde_json::to_vec(object).map_err(kube::Error::SerdeError)?;
        let mut req = self.request().create(params, body).map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert("create");
        self.client.request::<Written>(req).await
    }

    /// PATCH object `name`, or its `subresource` (`status`), as `Api::patch` / `Api::patch_subresource`.
    pub async fn patch<P: serde::Serialize + std::fmt::Debug>(
        &self,
        name: &str,
        subresource: Option<&str>,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<Written> {
        let mut req = match subresource {
            Some(sub) => self.request().patch_subresource(sub, name, params, patch),
            None => self.request().patch(name, params, patch),
        }
        .map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert(if subresource.is_some() { "patch_subresource" } else { "patch" });
        self.client.request::<Written>(req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_answer_is_read_for_its_identity_and_conditions_only() {
        let answer = json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "j", "uid": "u-1", "resourceVersion": "42", "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
            "status": {"active": 1, "conditions": [{"type": "Reconciled", "status": "True"}]}});
        let w: Written = serde_json::from_value(answer).unwrap();
        assert_eq!((w.metadata.uid.as_deref(), w.metadata.resource_version.as_deref()), (Some("u-1"), Some("42")));
        assert!(w.has_condition("Reconciled"));
        assert!(!w.has_condition("Ready"));
    }

    #[test]
    fn odd_statuses_read_as_without_conditions() {
        for status in [json!(null), json!({}), json!("x"), json!({"conditions": "x"}), json!({"conditions": [{"reason": "no type"}]})] {
            let w: Written = serde_json::from_value(json!({"metadata": {"uid": "u"}, "status": status})).unwrap();
            assert!(!w.has_condition("Reconciled"), "{status}");
        }
        let w: Written = serde_json::from_value(json!({"kind": "Status"})).unwrap();
        assert_eq!(w.metadata.uid, None);
    }
}
