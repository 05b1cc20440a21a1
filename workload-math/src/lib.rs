//! Kubernetes workload arithmetic that more than one controller here needs, written once so the
//! simulated cluster's Deployment controller and the MyDeployment plugin cannot drift apart:
//!
//! | module | upstream |
//! | --- | --- |
//! | [`hash`] | `controller.ComputeHash` (the `pod-template-hash` label), `history.HashControllerRevision` (`controller-revision-hash`) and `rand.SafeEncodeString` |
//! | [`scale`] | `intstr.GetScaledValueFromIntOrPercent` and `deploymentutil.ResolveFenceposts` |
//!
//! Plain functions over `serde_json` values and integers: the crate builds for the host and for
//! `wasm32-wasip2` plugins alike and holds no state.

pub mod hash;
pub mod scale;

pub use hash::{SAFE_ALPHABET, canonical_json, controller_revision_hash, go_json, hash_with_collision_count, pod_template_hash, safe_encode};
pub use scale::{IntOrPercent, ScaleError, resolve_fenceposts, scaled_value};
