//! The plugins running now, by id. Admission (the embedded server's hooks
//! and the HTTPS webhooks) reads it on every request, so a hot swap changes
//! defaulting and validation at the same moment as reconciling.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::LoadedPlugin;

/// Shared, cheap to clone.
#[derive(Clone)]
pub struct Registry {
    plugins: Arc<RwLock<BTreeMap<String, LoadedPlugin>>>,
    /// Counts changes, so a watcher (the webhook configurations) hears of
    /// every insert and remove without polling.
    changes: Arc<tokio::sync::watch::Sender<u64>>,
}

impl Default for Registry {
    fn default() -> Self {
        Self { plugins: Arc::default(), changes: Arc::new(tokio::sync::watch::channel(0).0) }
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.plugins.read().unwrap().keys()).finish()
    }
}

impl Registry {
    pub fn insert(&self, id: &str, plugin: LoadedPlugin) {
        self.plugins.write().unwrap().insert(id.to_string(), plugin);
        self.changes.send_modify(|n| *n += 1);
    }

    pub fn remove(&self, id: &str) -> Option<LoadedPlugin> {
        let removed = self.plugins.write().unwrap().remove(id);
        self.changes.send_modify(|n| *n += 1);
        removed
    }

    /// Changes on every insert and remove (a new version of a plugin too).
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Every plugin, ordered by id.
    pub fn all(&self) -> Vec<LoadedPlugin> {
        self.plugins.read().unwrap().values().cloned().collect()
    }

    /// Every plugin with its id, ordered by id.
    pub fn by_id(&self) -> Vec<(String, LoadedPlugin)> {
        self.plugins.read().unwrap().iter().map(|(id, p)| (id.clone(), p.clone())).collect()
    }

    /// The plugin whose parent is `group`/`kind`, if one runs.
    pub fn for_parent(&self, group: &str, kind: &str) -> Option<LoadedPlugin> {
        self.plugins.read().unwrap().values().find(|p| p.manifest().parent.group == group && p.manifest().parent.kind == kind).cloned()
    }
}
