//! The tap on the controller's plugin call: one line in the reconcile driver
//! calls the plugin through [`Tap::reconcile`], which, when recording or
//! when a candidate is staged for the plugin's parent kind, keeps a copy of
//! the inputs, and after the call hands inputs and answer to the
//! [`Recorder`] and to the [`Shadow`](crate::hotswap::shadow::Shadow). With
//! neither, it is the plain call (no copy).

use std::sync::Arc;

use operator_plugin_sdk::Action;

use super::{Answer, Call, Inputs, Recorder};
use crate::hotswap::shadow::Shadows;
use crate::sandbox::{CallError, LoadedPlugin};

/// What watches the plugin calls of every controller. Cheap to clone.
#[derive(Clone, Default)]
pub struct Tap {
    recorder: Option<Arc<Recorder>>,
    shadows: Option<Shadows>,
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tap").field("recorder", &self.recorder).field("shadows", &self.shadows.is_some()).finish()
    }
}

impl Tap {
    /// Also writes every call to `recorder`.
    #[must_use]
    pub fn recording(mut self, recorder: Arc<Recorder>) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Also runs every call on the candidate staged for its parent kind, if any.
    #[must_use]
    pub fn shadowing(mut self, shadows: Shadows) -> Self {
        self.shadows = Some(shadows);
        self
    }

    pub fn recorder(&self) -> Option<&Arc<Recorder>> {
        self.recorder.as_ref()
    }

    /// `plugin.reconcile(parent, children, related, now_ms)`, observed.
    pub async fn reconcile(
        &self,
        plugin: &LoadedPlugin,
        parent: Arc<str>,
        children: Arc<[Arc<str>]>,
        related: Arc<[Arc<str>]>,
        now_ms: i64,
    ) -> Result<Vec<Action>, CallError> {
        let shadow = self.shadows.as_ref().and_then(|s| s.for_active(plugin));
        if self.recorder.is_none() && shadow.is_none() {
            return plugin.reconcile_related(parent, children, related, now_ms).await;
        }
        let inputs = Inputs {
            parent: parent.to_string(),
            children: children.iter().map(|c| c.to_string()).collect(),
            related: related.iter().map(|c| c.to_string()).collect(),
            now: now_ms,
        };
        let result = plugin.reconcile_related(parent, children, related, now_ms).await;
        let answer = Answer::of(&result);
        if let Some(r) = &self.recorder {
            let keep = r.config().keep_secrets;
            r.record(Call::new(plugin, inputs.clone(), answer.clone(), keep));
        }
        if let Some(s) = shadow {
            s.observe(inputs, answer);
        }
        result
    }
}
