//! Permanent plugin errors. The contract (`wit/plugin.wit`) says a
//! `reconcile-error` with `retryable: false` means only a change of the
//! object can help, so calling again with the same inputs is wasted work and
//! a repeated Warning. The driver reports such an error once
//! (`Reconciled=False` with the plugin's reason, a Warning Event), remembers
//! what the plugin was given, and does not call it again, neither on backoff
//! nor on resync, until those inputs change: the parent (anything but its
//! status and bookkeeping), one of its children, or the plugin version.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use super::cache::{Fingerprint, ObjectKey};

/// A digest of what one reconcile call was given, `now` aside: the contract
/// says a permanent error does not go away with time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inputs([u8; 32]);

impl Inputs {
    /// `parent` is the cache's fingerprint of the parent (everything but its
    /// status and resourceVersion: the host's own status write changes
    /// those); `children` the texts the plugin receives, counted whole,
    /// status included; `plugin` the component's digest.
    pub fn of(parent: &Fingerprint, children: &[Arc<str>], plugin: &str) -> Self {
        let mut hash = Sha256::new();
        hash.update(parent.0);
        let mut children: Vec<&str> = children.iter().map(|c| &**c).collect();
        children.sort_unstable();
        for c in children {
            hash.update([0]);
            hash.update(c);
        }
        hash.update([1]);
        hash.update(plugin);
        Self(hash.finalize().into())
    }
}

/// The parents whose plugin said "not retryable", with the inputs it said so to.
#[derive(Debug, Default)]
pub struct PermanentErrors {
    refused: Mutex<HashMap<ObjectKey, Inputs>>,
}

impl PermanentErrors {
    /// Whether the plugin already refused `key` for good with these inputs.
    pub fn still_refused(&self, key: &ObjectKey, inputs: &Inputs) -> bool {
        self.refused.lock().unwrap().get(key) == Some(inputs)
    }

    pub fn record(&self, key: &ObjectKey, inputs: Inputs) {
        self.refused.lock().unwrap().insert(key.clone(), inputs);
    }

    /// The parent is gone, or the plugin accepted it: nothing to remember.
    pub fn forget(&self, key: &ObjectKey) {
        self.refused.lock().unwrap().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CachedObject;

    fn fingerprint(json: &str) -> Fingerprint {
        CachedObject::new(serde_json::from_str(json).unwrap()).fingerprint
    }

    fn texts(children: &[&str]) -> Vec<Arc<str>> {
        children.iter().map(|c| Arc::from(*c)).collect()
    }

    const PARENT: &str = r#"{"metadata":{"name":"p","resourceVersion":"1","generation":1},"spec":{"x":1}}"#;

    #[test]
    fn the_hosts_status_write_does_not_count_as_a_change() {
        let after = r#"{"metadata":{"name":"p","resourceVersion":"2","generation":1},"spec":{"x":1},"status":{"conditions":[]}}"#;
        assert_eq!(Inputs::of(&fingerprint(PARENT), &[], "d1"), Inputs::of(&fingerprint(after), &[], "d1"));
    }

    #[test]
    fn a_spec_label_child_or_plugin_change_does() {
        let parent = fingerprint(PARENT);
        let base = Inputs::of(&parent, &texts(&["a", "b"]), "d1");
        assert_eq!(base, Inputs::of(&parent, &texts(&["b", "a"]), "d1"), "children in any order");
        let spec = r#"{"metadata":{"name":"p","resourceVersion":"2","generation":2},"spec":{"x":2}}"#;
        let label = r#"{"metadata":{"name":"p","resourceVersion":"2","generation":1,"labels":{"a":"b"}},"spec":{"x":1}}"#;
        assert_ne!(base, Inputs::of(&fingerprint(spec), &texts(&["a", "b"]), "d1"));
        assert_ne!(base, Inputs::of(&fingerprint(label), &texts(&["a", "b"]), "d1"));
        assert_ne!(base, Inputs::of(&parent, &texts(&["a"]), "d1"));
        assert_ne!(base, Inputs::of(&parent, &texts(&["a", "b"]), "d2"));
    }

    #[test]
    fn a_refusal_is_remembered_for_its_inputs_only() {
        let errors = PermanentErrors::default();
        let key = ObjectKey::new("ns", "p");
        let inputs = Inputs::of(&fingerprint(PARENT), &[], "d1");
        errors.record(&key, inputs.clone());
        assert!(errors.still_refused(&key, &inputs));
        assert!(!errors.still_refused(&key, &Inputs::of(&fingerprint(PARENT), &[], "d2")));
        errors.forget(&key);
        assert!(!errors.still_refused(&key, &inputs));
    }
}
