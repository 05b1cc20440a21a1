//! Plugins from ConfigMaps: `--plugin-configmap NAMESPACE/NAME` (one
//! ConfigMap) or `--plugin-configmap-selector` (every ConfigMap matching a
//! label selector in a namespace). Each key is one plugin: `binaryData`,
//! where `kubectl create configmap plugins --from-file=cronjob.wasm` puts
//! Wasm, and `data` too (kubectl puts a file that happens to be valid UTF-8
//! there; it is then refused as "not a component" with a clear message
//! instead of its key silently vanishing). A key that disappears, or its
//! ConfigMap, stops that plugin. A key ending in `.sig` is not a plugin but
//! the detached signature of the key it names (`cronjob.wasm.sig` signs
//! `cronjob.wasm`; see [`super::trust`]), sent along with that plugin's bytes.
//! kube-runtime's watcher relists after a broken watch, so no change is
//! missed, only coalesced (the reloader skips bytes it already runs).

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;

use super::{Origin, Update};

/// Which ConfigMaps hold plugins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    Named { namespace: String, name: String },
    Labelled { namespace: String, selector: String },
}

impl std::str::FromStr for Selection {
    type Err = String;

    /// `NAMESPACE/NAME`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(Selection::Named { namespace: ns.into(), name: name.into() })
            }
            _ => Err(format!("expected NAMESPACE/NAME, got {s:?}")),
        }
    }
}

impl std::fmt::Display for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selection::Named { namespace, name } => write!(f, "configmap {namespace}/{name}"),
            Selection::Labelled { namespace, selector } => write!(f, "configmaps in {namespace} matching {selector}"),
        }
    }
}

/// What was last sent per ConfigMap: its uid and plugin keys.
#[derive(Default)]
struct Known(BTreeMap<String, (String, BTreeSet<String>)>);

impl Known {
    fn origin(namespace: &str, name: &str, uid: &str, key: &str) -> Origin {
        Origin::ConfigMap { namespace: namespace.into(), name: name.into(), uid: uid.into(), key: key.into() }
    }

    /// Updates for `cm`'s current plugins and for keys it no longer has.
    fn applied(&mut self, namespace: &str, cm: &ConfigMap) -> Vec<Update> {
        let name = cm.metadata.name.clone().unwrap_or_default();
        let uid = cm.metadata.uid.clone().unwrap_or_default();
        let mut data: BTreeMap<String, Vec<u8>> = cm.binary_data.clone().unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
        for (k, v) in cm.data.clone().unwrap_or_default() {
            data.entry(k).or_insert_with(|| v.into_bytes());
        }
        super::shadow::promote_by_annotation(cm.metadata.annotations.as_ref(), &mut data);
        let (signatures, plugins): (BTreeMap<String, Vec<u8>>, BTreeMap<String, Vec<u8>>) =
            data.into_iter().partition(|(k, _)| k.ends_with(super::trust::SIGNATURE_SUFFIX));
        let keys: BTreeSet<String> = plugins.keys().cloned().collect();
        let mut out: Vec<Update> = plugins
            .into_iter()
            .map(|(key, bytes)| {
                let signature = signatures.get(&format!("{key}{}", super::trust::SIGNATURE_SUFFIX)).cloned();
                Update { origin: Self::origin(namespace, &name, &uid, &key), bytes: Some(bytes), signature, trust: None, cosign: None }
            })
            .collect();
        if let Some((old_uid, old_keys)) = self.0.insert(name.clone(), (uid, keys.clone())) {
            for gone in old_keys.difference(&keys) {
                out.push(Update { origin: Self::origin(namespace, &name, &old_uid, gone), bytes: None, signature: None, trust: None, cosign: None });
            }
        }
        out
    }

    fn deleted(&mut self, namespace: &str, name: &str) -> Vec<Update> {
        let Some((uid, keys)) = self.0.remove(name) else {
            return vec![];
        };
        keys.iter()
            .map(|k| Update { origin: Self::origin(namespace, name, &uid, k), bytes: None, signature: None, trust: None, cosign: None })
            .collect()
    }
}

/// Watches `selection` and sends an [`Update`] per plugin change until the
/// receiver is dropped.
pub async fn watch(client: kube::Client, selection: Selection, tx: mpsc::Sender<Update>) {
    let (namespace, config) = match &selection {
        Selection::Named { namespace, name } => (namespace.clone(), watcher::Config::default().fields(&format!("metadata.name={name}"))),
        Selection::Labelled { namespace, selector } => (namespace.clone(), watcher::Config::default().labels(selector)),
    };
    let api: Api<ConfigMap> = Api::namespaced(client, &namespace);
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut known = Known::default();
    let mut listing: BTreeSet<String> = BTreeSet::new();
    while let Some(event) = stream.next().await {
        let updates = match event {
            Ok(Event::Init) => {
                listing.clear();
                vec![]
            }
            Ok(Event::InitApply(cm)) => {
                listing.insert(cm.metadata.name.clone().unwrap_or_default());
                known.applied(&namespace, &cm)
            }
            Ok(Event::InitDone) => {
                let gone: Vec<String> = known.0.keys().filter(|n| !listing.contains(*n)).cloned().collect();
                gone.iter().flat_map(|n| known.deleted(&namespace, n)).collect()
            }
            Ok(Event::Apply(cm)) => known.applied(&namespace, &cm),
            Ok(Event::Delete(cm)) => known.deleted(&namespace, &cm.metadata.name.clone().unwrap_or_default()),
            Err(e) => {
                tracing::warn!(source = %selection, error = %crate::error_chain(&e), "plugin ConfigMap watch failed; retrying");
                vec![]
            }
        };
        for u in updates {
            if tx.send(u).await.is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn cm(uid: &str, keys: &[(&str, &[u8])]) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some("plugins".into());
        c.metadata.uid = Some(uid.into());
        c.binary_data = Some(keys.iter().map(|(k, v)| (k.to_string(), ByteString(v.to_vec()))).collect());
        c
    }

    fn summary(us: &[Update]) -> Vec<(String, Option<usize>)> {
        us.iter().map(|u| (u.origin.id(), u.bytes.as_ref().map(Vec::len))).collect()
    }

    #[test]
    fn a_removed_key_stops_its_plugin_and_a_deleted_configmap_stops_all() {
        let mut k = Known::default();
        let first = k.applied("ns", &cm("u1", &[("a.wasm", b"aa"), ("b.wasm", b"b")]));
        assert_eq!(summary(&first), [("configmap/ns/plugins/a.wasm".into(), Some(2)), ("configmap/ns/plugins/b.wasm".into(), Some(1))]);
        let second = k.applied("ns", &cm("u1", &[("a.wasm", b"aaa")]));
        assert_eq!(summary(&second), [("configmap/ns/plugins/a.wasm".into(), Some(3)), ("configmap/ns/plugins/b.wasm".into(), None)]);
        let mut text = cm("u1", &[("a.wasm", b"aaa")]);
        text.data = Some([("t.wasm".to_string(), "text".to_string())].into());
        assert_eq!(
            summary(&k.applied("ns", &text)),
            [("configmap/ns/plugins/a.wasm".into(), Some(3)), ("configmap/ns/plugins/t.wasm".into(), Some(4))]
        );
        assert_eq!(
            summary(&k.deleted("ns", "plugins")),
            [("configmap/ns/plugins/a.wasm".into(), None), ("configmap/ns/plugins/t.wasm".into(), None)]
        );
        assert!(k.deleted("ns", "plugins").is_empty());
    }

    #[test]
    fn a_sig_key_is_the_signature_of_the_key_it_names_not_a_plugin() {
        let mut k = Known::default();
        let us = k.applied("ns", &cm("u1", &[("a.wasm", b"aa"), ("a.wasm.sig", b"sig"), ("b.wasm", b"b"), ("orphan.sig", b"x")]));
        assert_eq!(summary(&us), [("configmap/ns/plugins/a.wasm".into(), Some(2)), ("configmap/ns/plugins/b.wasm".into(), Some(1))]);
        assert_eq!(us[0].signature.as_deref(), Some(&b"sig"[..]));
        assert_eq!(us[1].signature, None);
        // Dropping a signature does not stop its plugin (it is sent again, unsigned).
        let again = k.applied("ns", &cm("u1", &[("a.wasm", b"aa"), ("b.wasm", b"b")]));
        assert_eq!(summary(&again), [("configmap/ns/plugins/a.wasm".into(), Some(2)), ("configmap/ns/plugins/b.wasm".into(), Some(1))]);
        assert_eq!(again[0].signature, None);
    }

    #[test]
    fn selections_parse_or_say_what_is_expected() {
        assert_eq!("sys/plugins".parse::<Selection>().unwrap(), Selection::Named { namespace: "sys".into(), name: "plugins".into() });
        for bad in ["plugins", "/x", "x/", "a/b/c"] {
            assert!(bad.parse::<Selection>().unwrap_err().contains("NAMESPACE/NAME"), "{bad}");
        }
    }
}
