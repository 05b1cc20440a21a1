//! The `pod-template-hash` and canonical JSON: `workload_math`'s, shared with the simulated
//! cluster's Deployment controller (upstream's `controller.ComputeHash` over the template's
//! canonical JSON, with the collision count mixed in as upstream does).

pub use workload_math::{canonical_json as canonical, pod_template_hash};
