//! The `MyDeployment` API (`apps.example.com/v1`), shaped after `apps/v1`
//! Deployment: its constants and defaults, the parts of the spec it shares
//! with upstream (label selector, strategy), and the status reconcile
//! writes. The typed object itself is [`crate::crd::MyDeployment`].

use std::collections::BTreeMap;

use operator_plugin_sdk::serde_json::Value;
use serde::{Deserialize, Serialize};

use crate::crd::{MyDeploymentSpec, MyDeploymentStatus};

/// API group. The tutorial used `cloud.alipay.com`, a domain that is not ours to
/// claim; `example.com` is reserved for exactly this kind of use.
pub const GROUP: &str = "apps.example.com";
pub const VERSION: &str = "v1";
pub const KIND: &str = "MyDeployment";
pub const PLURAL: &str = "mydeployments";
pub const SINGULAR: &str = "mydeployment";
pub const SHORT_NAME: &str = "md";

/// The label every Pod and ControllerRevision carries, as upstream.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
/// Earlier revision numbers a reused ControllerRevision had, comma separated
/// (upstream keeps the same list in a ReplicaSet annotation).
pub const REVISION_HISTORY_ANNOTATION: &str = "deployment.kubernetes.io/revision-history";

/// `apps/v1` defaults (`SetDefaults_Deployment`).
pub const DEFAULT_REPLICAS: i32 = 1;
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;
pub const DEFAULT_PROGRESS_DEADLINE_SECONDS: i32 = 600;
pub const DEFAULT_MAX_SURGE: &str = "25%";
pub const DEFAULT_MAX_UNAVAILABLE: &str = "25%";

/// The `apps/v1` defaults of missing fields, so an object the defaulting
/// webhook never saw reconciles the same way.
impl MyDeploymentSpec {
    /// `template`, or null when it is missing (validation's Required value).
    pub fn template(&self) -> &Value {
        self.template.as_ref().unwrap_or(&Value::Null)
    }

    pub fn replicas(&self) -> i32 {
        self.replicas.unwrap_or(DEFAULT_REPLICAS)
    }

    pub fn min_ready_seconds(&self) -> i32 {
        self.min_ready_seconds.unwrap_or(0)
    }

    pub fn revision_history_limit(&self) -> i32 {
        self.revision_history_limit.unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT)
    }

    pub fn progress_deadline_seconds(&self) -> i32 {
        self.progress_deadline_seconds.unwrap_or(DEFAULT_PROGRESS_DEADLINE_SECONDS)
    }

    pub fn paused(&self) -> bool {
        self.paused.unwrap_or(false)
    }

    /// True for `podReplacementPolicy: TerminationComplete`.
    pub fn waits_for_termination(&self) -> bool {
        self.pod_replacement_policy.as_deref() == Some(TERMINATION_COMPLETE)
    }

    /// The strategy with defaults resolved.
    pub fn strategy(&self) -> ResolvedStrategy {
        match &self.strategy {
            Some(Strategy { type_: Some(t), .. }) if t == RECREATE => ResolvedStrategy::Recreate,
            Some(Strategy { rolling_update: Some(ru), .. }) => ResolvedStrategy::RollingUpdate {
                max_surge: ru.max_surge.clone().unwrap_or_else(|| IntOrPercent::Str(DEFAULT_MAX_SURGE.into())),
                max_unavailable: ru.max_unavailable.clone().unwrap_or_else(|| IntOrPercent::Str(DEFAULT_MAX_UNAVAILABLE.into())),
            },
            _ => ResolvedStrategy::RollingUpdate {
                max_surge: IntOrPercent::Str(DEFAULT_MAX_SURGE.into()),
                max_unavailable: IntOrPercent::Str(DEFAULT_MAX_UNAVAILABLE.into()),
            },
        }
    }
}

/// `metav1.LabelSelector`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One `matchExpressions` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Strategy {
    /// `RollingUpdate` or `Recreate`; kept as text so an unknown value is a
    /// field error on `spec.strategy.type`, not an unreadable spec.
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    #[serde(default)]
    pub rolling_update: Option<RollingUpdate>,
}

pub const ROLLING_UPDATE: &str = "RollingUpdate";
/// Replacement Pods are created as soon as a Pod starts terminating.
pub const TERMINATION_STARTED: &str = "TerminationStarted";
/// Replacement Pods wait until terminating Pods are gone, and terminating
/// Pods count against maxSurge.
pub const TERMINATION_COMPLETE: &str = "TerminationComplete";
pub const RECREATE: &str = "Recreate";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdate {
    #[serde(default)]
    pub max_surge: Option<IntOrPercent>,
    #[serde(default)]
    pub max_unavailable: Option<IntOrPercent>,
}

/// `intstr.IntOrString` as used by maxSurge / maxUnavailable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IntOrPercent {
    Int(i64),
    Str(String),
}

impl std::fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IntOrPercent::Int(i) => write!(f, "{i}"),
            IntOrPercent::Str(s) => f.write_str(s),
        }
    }
}

/// The strategy after defaulting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResolvedStrategy {
    RollingUpdate { max_surge: IntOrPercent, max_unavailable: IntOrPercent },
    Recreate,
}

/// `status` of a MyDeployment: `apps/v1` DeploymentStatus plus what the
/// scale subresource and a Pod-owning controller need.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Active (not terminating, not finished) Pods of every revision.
    #[serde(default)]
    pub replicas: i32,
    /// Active Pods of the desired revision.
    #[serde(default)]
    pub updated_replicas: i32,
    #[serde(default)]
    pub ready_replicas: i32,
    #[serde(default)]
    pub available_replicas: i32,
    #[serde(default)]
    pub unavailable_replicas: i32,
    /// Pods with a deletionTimestamp that still exist (upstream 1.33+).
    #[serde(default)]
    pub terminating_replicas: i32,
    /// The label selector in string form, for the scale subresource (HPA).
    #[serde(default)]
    pub selector: String,
    /// ControllerRevision of the last complete rollout.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_revision: String,
    /// ControllerRevision the Pods are being moved to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub update_revision: String,
    /// Revision number of `updateRevision` (upstream's
    /// `deployment.kubernetes.io/revision` annotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collision_count: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<DeploymentCondition>,
}

/// `apps/v1` DeploymentCondition (it has `lastUpdateTime`, unlike
/// `metav1.Condition`; the Progressing deadline is measured from it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_update_time: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_transition_time: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl From<&MyDeploymentStatus> for Status {
    /// The stored status as the previous one; a missing count is 0.
    fn from(s: &MyDeploymentStatus) -> Self {
        let count = |n: Option<i32>| n.unwrap_or(0);
        Status {
            observed_generation: s.observed_generation,
            replicas: count(s.replicas),
            updated_replicas: count(s.updated_replicas),
            ready_replicas: count(s.ready_replicas),
            available_replicas: count(s.available_replicas),
            unavailable_replicas: count(s.unavailable_replicas),
            terminating_replicas: count(s.terminating_replicas),
            selector: s.selector.clone().unwrap_or_default(),
            current_revision: s.current_revision.clone().unwrap_or_default(),
            update_revision: s.update_revision.clone().unwrap_or_default(),
            revision: s.revision,
            collision_count: s.collision_count,
            conditions: s.conditions.clone().unwrap_or_default(),
        }
    }
}
