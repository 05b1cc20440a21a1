//! The driver's reads: what one pass sees of the world, all from the
//! caches (never from the API server). The call's inputs (the parent's
//! text, its controlled children of every declared kind, the related
//! objects that attach to it, the clock's `now`), the children this plugin
//! applied earlier (for pruning), and the policy's and executor's
//! [`Lookup`] of what exists.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use operator_plugin_sdk::GroupVersionKind;
use serde_json::Value;

use super::cache::{CachedObject, KindCache, ObjectKey};
use super::hook::CallInput;
use super::related;
use crate::actions::{self, Existing, Lookup, status};
use crate::sandbox::LoadedPlugin;

/// The caches one controller reads.
#[derive(Clone, Copy)]
pub struct CacheView<'a> {
    /// The parent kind and every declared child kind.
    pub caches: &'a HashMap<GroupVersionKind, Arc<KindCache>>,
    /// The related kinds, in the manifest's order.
    pub related: &'a [Arc<KindCache>],
    /// The most related objects one call is given ([`super::Config::max_related`]).
    pub max_related: usize,
}

impl CacheView<'_> {
    /// The call's inputs. Refused (never truncated: the plugin would take a
    /// part for the whole) over the related cap, or when the parent's
    /// selector is malformed.
    pub fn inputs(&self, plugin: &LoadedPlugin, parent: &CachedObject, parent_uid: &str, now: DateTime<Utc>) -> Result<CallInput, status::Verdict> {
        let children =
            plugin.manifest().children.iter().flat_map(|gvk| self.caches[gvk].controlled_by(parent_uid)).map(|c| c.shared_json()).collect();
        let related = self.related_to(plugin, parent)?;
        Ok(CallInput { parent: parent.shared_json(), children, related, now })
    }

    fn related_to(&self, plugin: &LoadedPlugin, parent: &CachedObject) -> Result<Arc<[Arc<str>]>, status::Verdict> {
        let kinds = &plugin.manifest().related;
        if kinds.is_empty() {
            return Ok(Arc::from([]));
        }
        let value: Value = serde_json::from_str(parent.json()).unwrap_or_default();
        let references = related::references(kinds, &value, parent.namespace())
            .map_err(|e| status::Verdict::failure("InvalidRelatedSelector", format!("the parent's related-object reference is malformed: {e}")))?;
        let mut seen = HashSet::new();
        let mut found: Vec<Arc<str>> = Vec::new();
        for ((reference, kind), cache) in references.iter().zip(kinds).zip(self.related) {
            let objects = match &reference.refs {
                related::Refs::Names(names) => names.iter().filter_map(|n| cache.get(&ObjectKey::new(reference.scope.clone(), n.clone()))).collect(),
                related::Refs::Selector(_) => cache.in_namespace(&reference.scope).into_iter().filter(|o| reference.covers(o)).collect(),
                related::Refs::Nothing => Vec::new(),
            };
            for o in objects {
                if seen.insert((kind.kind.clone(), o.key())) {
                    found.push(o.shared_json());
                }
            }
        }
        if found.len() > self.max_related {
            return Err(status::Verdict::failure(
                "TooManyRelated",
                format!(
                    "{} related objects attach to this parent; the cap per reconcile is {} (narrow the selector, or raise --max-related)",
                    found.len(),
                    self.max_related
                ),
            ));
        }
        Ok(found.into())
    }

    /// The children of the parent that this plugin applied (they carry
    /// [`actions::APPLIED_BY`] with its name), for [`actions::prune`].
    pub fn applied_earlier(&self, plugin: &LoadedPlugin, parent_uid: &str) -> Vec<actions::AppliedEarlier> {
        let name = plugin.manifest().name.as_str();
        plugin
            .manifest()
            .children
            .iter()
            .flat_map(|gvk| self.caches[gvk].controlled_by(parent_uid).into_iter().map(move |c| (gvk, c)))
            .filter(|(_, c)| c.labels().get(actions::APPLIED_BY) == Some(name))
            .map(|(gvk, c)| actions::AppliedEarlier {
                gvk: gvk.clone(),
                name: c.name().to_owned(),
                existing: Existing {
                    uid: c.uid().unwrap_or_default().to_owned(),
                    resource_version: c.resource_version().unwrap_or_default().to_owned(),
                    controller_uid: c.controller().map(|r| r.uid.to_owned()),
                },
            })
            .collect()
    }
}

/// The executor's and the policy's view of what exists: the caches.
pub struct CacheLookup<'a>(pub &'a HashMap<GroupVersionKind, Arc<KindCache>>);

impl Lookup for CacheLookup<'_> {
    fn find(&self, gvk: &GroupVersionKind, namespace: &str, name: &str) -> Option<Existing> {
        let obj = self.0.get(gvk)?.get(&ObjectKey::new(namespace, name))?;
        Some(Existing {
            uid: obj.uid().unwrap_or_default().to_string(),
            resource_version: obj.resource_version().unwrap_or_default().to_string(),
            controller_uid: obj.controller().map(|c| c.uid.to_string()),
        })
    }

    fn namespaced(&self, gvk: &GroupVersionKind) -> bool {
        self.0.get(gvk).is_none_or(|c| c.namespaced())
    }
}
