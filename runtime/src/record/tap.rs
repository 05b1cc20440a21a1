//! What `--record` and shadow runs put on the controller's plugin-call hook
//! ([`Tap`], the controller's [`CallHook`]): the [`Recorder`] writes every
//! call to the log, and the [`Shadows`] run every call of a plugin with a
//! staged candidate on the candidate too. Installed when the runtime is
//! assembled; a call neither watches is the plain call (no copy).

use std::sync::Arc;

use operator_plugin_sdk::Action;

use super::{Answer, Call, Inputs, Recorder};
use crate::controller::hook::{CallHook, CallInput, CallObserver, Watcher};
use crate::hotswap::shadow::Shadows;
use crate::sandbox::{CallError, LoadedPlugin};

/// The controllers' plugin-call hook, by the name its builders below give it.
pub use crate::controller::hook::CallHook as Tap;

impl CallHook {
    /// Also writes every call to `recorder`.
    #[must_use]
    pub fn recording(self, recorder: Arc<Recorder>) -> Self {
        self.observed_by(Arc::new(Recording(recorder)))
    }

    /// Also runs every call on the candidate staged for its parent kind, if any.
    #[must_use]
    pub fn shadowing(self, shadows: Shadows) -> Self {
        self.observed_by(Arc::new(Shadowing(shadows)))
    }
}

impl Inputs {
    /// The inputs of a call as the log keeps them (texts copied out of the cache).
    pub fn of(input: &CallInput) -> Self {
        Inputs {
            parent: input.parent.to_string(),
            children: input.children.iter().map(|c| c.to_string()).collect(),
            related: input.related.iter().map(|c| c.to_string()).collect(),
            now: input.now.timestamp_millis(),
        }
    }
}

/// Writes every call to the record log.
struct Recording(Arc<Recorder>);

impl CallObserver for Recording {
    fn watch(&self, plugin: &LoadedPlugin) -> Option<Watcher> {
        let (recorder, plugin) = (self.0.clone(), plugin.clone());
        Some(Box::new(move |input: &CallInput, result: &Result<Vec<Action>, CallError>| {
            let keep = recorder.config().keep_secrets;
            recorder.record(Call::new(&plugin, Inputs::of(input), Answer::of(result), keep));
        }))
    }
}

/// Runs every call on the candidate staged for the plugin's parent kind.
struct Shadowing(Shadows);

impl CallObserver for Shadowing {
    fn watch(&self, plugin: &LoadedPlugin) -> Option<Watcher> {
        let shadow = self.0.for_active(plugin)?;
        Some(Box::new(move |input: &CallInput, result: &Result<Vec<Action>, CallError>| shadow.observe(Inputs::of(input), Answer::of(result))))
    }
}
