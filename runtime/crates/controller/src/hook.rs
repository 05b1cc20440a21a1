//! The hook around the driver's one plugin call. Observers installed when
//! the runtime is assembled (the call log of `--record`, shadow runs of a
//! staged candidate) see each call's inputs and answer; the controller
//! knows them only through [`CallObserver`], so it depends on neither. A
//! call no observer watches is the plain call: nothing is copied.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use operator_plugin_sdk::Action;

use crate::sandbox::{CallError, LoadedPlugin};

/// What one `reconcile` call of a plugin is given. The texts are the
/// cache's own (shared, not copied), so whatever else looks at a call (a
/// recording, a second plugin version) can hold them cheaply.
#[derive(Clone, Debug)]
pub struct CallInput {
    pub parent: Arc<str>,
    /// The parent's controlled children of every declared kind.
    pub children: Arc<[Arc<str>]>,
    /// The objects of the related kinds that attach to the parent (0.2).
    pub related: Arc<[Arc<str>]>,
    pub now: DateTime<Utc>,
}

/// Given the inputs and the answer of one watched call, once it returned.
pub type Watcher = Box<dyn FnOnce(&CallInput, &Result<Vec<Action>, CallError>) + Send>;

/// Something that watches plugin calls.
pub trait CallObserver: Send + Sync {
    /// Asked before each call `plugin` is to answer: `Some` watches this
    /// call (decided before it, so a candidate staged or promoted while the
    /// call runs does not change who sees it).
    fn watch(&self, plugin: &LoadedPlugin) -> Option<Watcher>;
}

/// The observers of every controller's plugin calls; none by default.
/// Cheap to clone.
#[derive(Clone, Default)]
pub struct CallHook {
    observers: Vec<Arc<dyn CallObserver>>,
}

impl std::fmt::Debug for CallHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallHook").field("observers", &self.observers.len()).finish()
    }
}

impl CallHook {
    /// Also shows every call to `observer`.
    #[must_use]
    pub fn observed_by(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// `plugin.reconcile(input)`, shown to the observers that watch it.
    pub async fn reconcile(&self, plugin: &LoadedPlugin, input: &CallInput) -> Result<Vec<Action>, CallError> {
        let watching: Vec<Watcher> = self.observers.iter().filter_map(|o| o.watch(plugin)).collect();
        let result =
            plugin.reconcile_related(input.parent.clone(), input.children.clone(), input.related.clone(), input.now.timestamp_millis()).await;
        for watcher in watching {
            watcher(input, &result);
        }
        result
    }
}
