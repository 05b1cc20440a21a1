//! The hash key of an object: the parent's own, and for a child its
//! controller's, so that children land on their parent's shard.
//!
//! The key is `group/kind/namespace/name`. Neither `uid` nor a generated name
//! can be part of it: both are unset when a mutating webhook assigns an object
//! at creation, and a child's key must be computable from its owner reference
//! alone (which carries apiVersion, kind and name, and shares the child's
//! namespace). A parent created with `generateName` therefore cannot be
//! assigned at admission; the sharder assigns it once it has a name.

use thiserror::Error;

/// Why an object has no hash key.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("the object has no name (a parent created with generateName is assigned after creation)")]
    NoName,
    #[error("the object has no kind")]
    NoKind,
    #[error("the controller reference has an empty {0}")]
    IncompleteOwner(&'static str),
}

/// The key of a parent: `group/kind/namespace/name` (namespace empty when
/// cluster-scoped, group empty for the core group).
pub fn for_parent(group: &str, kind: &str, namespace: &str, name: &str) -> Result<String, KeyError> {
    if kind.is_empty() {
        return Err(KeyError::NoKind);
    }
    if name.is_empty() {
        return Err(KeyError::NoName);
    }
    Ok(format!("{group}/{kind}/{namespace}/{name}"))
}

/// The key of a child: that of its controller (the owner reference with
/// `controller: true`), given the reference's `apiVersion`, `kind` and `name`
/// and the child's own namespace.
pub fn for_child(owner_api_version: &str, owner_kind: &str, owner_name: &str, namespace: &str) -> Result<String, KeyError> {
    if owner_api_version.is_empty() {
        return Err(KeyError::IncompleteOwner("apiVersion"));
    }
    if owner_kind.is_empty() {
        return Err(KeyError::IncompleteOwner("kind"));
    }
    if owner_name.is_empty() {
        return Err(KeyError::IncompleteOwner("name"));
    }
    // "v1" is the core group; "apps/v1" names group "apps".
    let group = owner_api_version.rsplit_once('/').map_or("", |(group, _)| group);
    for_parent(group, owner_kind, namespace, owner_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_hashes_as_its_controller() {
        let parent = for_parent("batch.tutorial.kubebuilder.io", "CronJob", "default", "nightly").unwrap();
        let child = for_child("batch.tutorial.kubebuilder.io/v1", "CronJob", "nightly", "default").unwrap();
        assert_eq!(parent, child);
        assert_eq!(parent, "batch.tutorial.kubebuilder.io/CronJob/default/nightly");
    }

    #[test]
    fn the_core_group_is_empty() {
        assert_eq!(for_child("v1", "ConfigMap", "c", "ns").unwrap(), "/ConfigMap/ns/c");
    }

    #[test]
    fn incomplete_objects_have_no_key() {
        assert_eq!(for_parent("g", "K", "ns", ""), Err(KeyError::NoName));
        assert_eq!(for_parent("g", "", "ns", "n"), Err(KeyError::NoKind));
        assert_eq!(for_child("", "K", "n", "ns"), Err(KeyError::IncompleteOwner("apiVersion")));
        assert_eq!(for_child("g/v1", "K", "", "ns"), Err(KeyError::IncompleteOwner("name")));
    }
}
