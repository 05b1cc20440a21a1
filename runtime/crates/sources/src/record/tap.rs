//! What `--record` puts on the controller's plugin-call hook ([`Tap`], the
//! controller's `CallHook`): the [`Recorder`] writes every call to the log
//! ([`observer`]). Shadow runs observe the same hook
//! (`crate::hotswap::shadow::Shadows::observer`). Installed when the runtime
//! is assembled; a call no observer watches is the plain call (no copy).

use std::sync::Arc;

use operator_plugin_sdk::Action;

use super::{Answer, Call, Inputs, Recorder};
use crate::controller::hook::{CallInput, CallObserver, Watcher};
use crate::sandbox::{CallError, LoadedPlugin};

/// The controllers' plugin-call hook, by the name its builders below give it.
pub use crate::controller::hook::CallHook as Tap;

/// The observer that writes every call to `recorder`, for
/// [`Tap::observed_by`].
pub fn observer(recorder: Arc<Recorder>) -> Arc<dyn CallObserver> {
    Arc::new(Recording(recorder))
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
