//! Plugin objects the host publishes for the plugins it was given another
//! way (`--plugin FILE`, `--plugin oci://...`, a ConfigMap key), so that
//! `kubectl get plugins` lists every plugin that runs, with the status a
//! user-created Plugin gets and a Warning Event when a new version is
//! refused.
//!
//! Such an object is output only: it carries the label
//! [`PUBLISHED_BY`]`=`[`HOST`] and an annotation naming the flag or key it
//! mirrors ([`SOURCE_ANNOTATION`]), and the host's Plugin watch leaves
//! labelled objects out (a label selector), so editing or deleting one
//! changes nothing that runs. Only the leader writes them (as it writes
//! statuses). A user-created Plugin of the same name wins: nothing is
//! published under that name and a Warning Event on the user's object says
//! why. An object is deleted once its plugin is no longer given (a
//! ConfigMap key removed, a host restarted without the flag): it says what
//! runs now, and a stale one would claim a plugin that does not.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::{crd, status};
use crate::activity::Activity;
use crate::events::{Recorder, Regarding};
use crate::hotswap::shadow::CANDIDATE_SUFFIX;

/// The label that marks a published object.
pub const PUBLISHED_BY: &str = "operator-host.dev/published-by";
/// Its value.
pub const HOST: &str = "host";
/// The flag or key a published object mirrors (`--plugin oci://...`).
pub const SOURCE_ANNOTATION: &str = "operator-host.dev/source";
/// The label selector of the Plugin watch: user-created objects only.
pub const NOT_PUBLISHED: &str = "operator-host.dev/published-by!=host";
/// The field manager of published objects.
const MANAGER: &str = "operator-host";

/// A plugin given by flag or ConfigMap key, as the mirror publishes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Given {
    /// The id it runs under (`hotswap::Origin::id`).
    pub id: String,
    /// What the annotation says (`--plugin FILE`, `configmap NS/NAME key KEY`).
    pub flag: String,
    /// The `spec.source` of the object.
    pub source: Value,
}

/// How a running plugin's id maps back to the flag that gave it: `--plugin`
/// values (files and `oci://` references, as given), and ConfigMap keys
/// (`configmap/NS/NAME/KEY`, as the hot-swap watch names them).
#[derive(Clone, Debug, Default)]
pub struct Flags {
    /// `--plugin` values by id.
    pub plugins: BTreeMap<String, Given>,
}

impl Flags {
    /// `--plugin FILE`.
    pub fn file(&mut self, id: String, path: &str) {
        let given = Given { id: id.clone(), flag: format!("--plugin {path}"), source: json!({"file": {"path": path}}) };
        self.plugins.insert(id, given);
    }

    /// `--plugin oci://...` (`reference` as given, with its scheme).
    pub fn oci(&mut self, id: String, reference: &str) {
        let given = Given { id: id.clone(), flag: format!("--plugin {reference}"), source: json!({"oci": {"reference": reference}}) };
        self.plugins.insert(id, given);
    }

    /// What gave the plugin running as `id`; `None` for a Plugin object's
    /// own plugin, a candidate, or an id this host did not make.
    pub fn given(&self, id: &str) -> Option<Given> {
        if id.starts_with("plugin/") || id.ends_with(CANDIDATE_SUFFIX) {
            return None;
        }
        if let Some(g) = self.plugins.get(id) {
            return Some(g.clone());
        }
        let rest = id.strip_prefix("configmap/")?;
        let mut parts = rest.splitn(3, '/');
        let (namespace, name, key) = (parts.next()?, parts.next()?, parts.next()?);
        Some(Given {
            id: id.into(),
            flag: format!("configmap {namespace}/{name} key {key}"),
            source: json!({"configMap": {"namespace": namespace, "name": name, "key": key}}),
        })
    }
}

/// A DNS subdomain from a plugin's name: lower case, other characters `-`.
pub fn object_name(plugin: &str) -> String {
    let mapped: String =
        plugin.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c.to_ascii_lowercase() } else { '-' }).collect();
    let trimmed = mapped.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let mut name: String = trimmed.chars().take(253).collect();
    if name.is_empty() {
        name = "plugin".into();
    }
    name
}

/// One published object.
struct Published {
    /// The flag or key it mirrors ([`SOURCE_ANNOTATION`]).
    flag: String,
    uid: String,
    status: Value,
    /// The refusal last evented (its time and message), so each is one Event.
    evented: Option<(String, String)>,
}

/// The published objects and what was reported about them.
#[derive(Default)]
pub struct Mirror {
    flags: Flags,
    published: BTreeMap<String, Published>,
    /// Whether leftovers of an earlier run were looked for.
    swept: bool,
    /// Names already reported as taken by a user's Plugin (reported once).
    conflicts: BTreeSet<String>,
}

/// What one pass needs from the Plugin watch.
pub struct Pass<'a> {
    pub api: &'a Api<DynamicObject>,
    pub recorder: &'a Recorder,
    pub activity: &'a Activity,
    pub running: &'a [crate::status::Plugin],
    /// Names of user-created Plugins (they win a name).
    pub user: &'a BTreeSet<String>,
    pub now: &'a str,
}

impl Mirror {
    pub fn new(flags: Flags) -> Self {
        Self { flags, ..Self::default() }
    }

    /// Publishes, updates and deletes objects so they match what runs.
    pub async fn pass(&mut self, p: Pass<'_>) {
        if !self.swept {
            self.sweep(p.api).await;
        }
        let mut wanted: HashMap<String, (Given, &crate::status::Plugin)> = HashMap::new();
        for plugin in p.running {
            let Some(given) = self.flags.given(&plugin.id) else { continue };
            let name = object_name(&plugin.name);
            if p.user.contains(&name) {
                self.conflict(&p, &name, &given).await;
                continue;
            }
            match wanted.get(&name) {
                Some((other, _)) => tracing::warn!(plugin = %given.id, "not published as Plugin {name}: {} has that name", other.flag),
                None => {
                    wanted.insert(name, (given, plugin));
                }
            }
        }
        let gone: Vec<String> = self.published.keys().filter(|n| !wanted.contains_key(*n)).cloned().collect();
        for name in gone {
            self.delete(p.api, &name).await;
        }
        for (name, (given, plugin)) in wanted {
            self.publish(&p, &name, &given, plugin).await;
        }
    }

    /// Deletes the published objects of an earlier run (the plugins they
    /// mirror are given again, if they are, and published anew).
    async fn sweep(&mut self, api: &Api<DynamicObject>) {
        match api.list(&ListParams::default().labels(&format!("{PUBLISHED_BY}={HOST}"))).await {
            Ok(list) => {
                for o in list.items {
                    let (name, uid) = (o.metadata.name.unwrap_or_default(), o.metadata.uid.unwrap_or_default());
                    let status = o.data.get("status").cloned().unwrap_or(Value::Null);
                    let flag = o.metadata.annotations.and_then(|a| a.get(SOURCE_ANNOTATION).cloned()).unwrap_or_default();
                    self.published.insert(name, Published { flag, uid, status, evented: None });
                }
                self.swept = true;
            }
            Err(e) => tracing::warn!(error = %crate::error_chain(&e), "cannot list the Plugin objects the host published; retrying"),
        }
    }

    async fn delete(&mut self, api: &Api<DynamicObject>, name: &str) {
        let result = api.delete(name, &DeleteParams::default()).await;
        match result {
            Ok(_) => {
                tracing::info!("Plugin {name} deleted: the plugin it mirrored is no longer given");
                self.published.remove(name);
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {
                tracing::info!("Plugin {name} deleted: the plugin it mirrored is no longer given");
                self.published.remove(name);
            }
            Err(e) => tracing::warn!(error = %crate::error_chain(&e), "cannot delete the published Plugin {name}; retrying"),
        }
    }

    async fn conflict(&mut self, p: &Pass<'_>, name: &str, given: &Given) {
        if !self.conflicts.insert(name.to_string()) {
            return;
        }
        let message = format!(
            "the host runs a plugin named {name} from {} as well; it is not published as a Plugin object, this one wins the name",
            given.flag
        );
        tracing::warn!(plugin = %given.id, "{message}");
        let uid = match p.api.get(name).await {
            Ok(o) => o.metadata.uid.unwrap_or_default(),
            Err(_) => return,
        };
        event(p.recorder, name, &uid, "Warning", "PublishConflict", &message).await;
    }

    /// Applies the object for `plugin`, then its status, then an Event for a new refusal.
    async fn publish(&mut self, p: &Pass<'_>, name: &str, given: &Given, plugin: &crate::status::Plugin) {
        let changed = self.published.get(name).is_none_or(|o| o.flag != given.flag);
        if changed {
            let object = json!({
                "apiVersion": crate::hotswap::PLUGIN_API_VERSION,
                "kind": crd::KIND,
                "metadata": {"name": name, "labels": {PUBLISHED_BY: HOST}, "annotations": {SOURCE_ANNOTATION: given.flag}},
                "spec": {"source": given.source},
            });
            match p.api.patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&object)).await {
                Ok(o) => {
                    let status = o.data.get("status").cloned().unwrap_or(Value::Null);
                    let uid = o.metadata.uid.unwrap_or_default();
                    let evented = self.published.remove(name).and_then(|old| old.evented);
                    tracing::info!(plugin = %given.id, "published as Plugin {name}");
                    self.published.insert(name.into(), Published { flag: given.flag.clone(), uid, status, evented });
                }
                Err(e) => {
                    return tracing::warn!(plugin = %given.id, error = %crate::error_chain(&e), "cannot publish Plugin {name}; retrying");
                }
            }
        }
        let Some(o) = self.published.get_mut(name) else { return };
        let refusal = p.activity.refusal(&given.id);
        let inputs = status::Inputs {
            running: Some(plugin),
            refusal: refusal.clone(),
            has_candidate: plugin.candidate.is_some(),
            candidate_refusal: p.activity.refusal(&format!("{}{CANDIDATE_SUFFIX}", given.id)),
            ..status::Inputs::default()
        };
        let previous = o.status["conditions"].as_array().cloned().unwrap_or_default();
        let desired = status::desired(&inputs, &previous, p.now);
        if status::without_nulls(&desired) != o.status {
            match p.api.patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": desired}))).await {
                Ok(_) => o.status = status::without_nulls(&desired),
                // Deleted by hand: published again at the next pass.
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    self.published.remove(name);
                    return;
                }
                Err(e) => tracing::warn!(plugin = %given.id, error = %crate::error_chain(&e), "cannot write the status of Plugin {name}; retrying"),
            }
        }
        if let Some(r) = refusal {
            let key = (r.at.clone(), r.message.clone());
            if o.evented.as_ref() != Some(&key) {
                event(p.recorder, name, &o.uid, "Warning", &r.reason, &r.message).await;
                o.evented = Some(key);
            }
        }
    }
}

async fn event(recorder: &Recorder, name: &str, uid: &str, type_: &str, reason: &str, message: &str) {
    let regarding = Regarding {
        api_version: crate::hotswap::PLUGIN_API_VERSION.into(),
        kind: crd::KIND.into(),
        namespace: String::new(),
        name: name.into(),
        uid: uid.into(),
    };
    if let Err(e) = recorder.publish(&regarding, type_, reason, message).await {
        tracing::warn!(error = %crate::error_chain(&e), "could not record event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_map_back_to_the_flag_or_key_that_gave_them() {
        let mut flags = Flags::default();
        flags.oci("oci://127.0.0.1:5000/hello-py:v1".into(), "oci://127.0.0.1:5000/hello-py:v1");
        flags.file("/p/hello.wasm".into(), "/p/hello.wasm");
        let oci = flags.given("oci://127.0.0.1:5000/hello-py:v1").unwrap();
        assert_eq!(oci.source, json!({"oci": {"reference": "oci://127.0.0.1:5000/hello-py:v1"}}));
        assert_eq!(oci.flag, "--plugin oci://127.0.0.1:5000/hello-py:v1");
        assert_eq!(flags.given("/p/hello.wasm").unwrap().source, json!({"file": {"path": "/p/hello.wasm"}}));
        let key = flags.given("configmap/sys/plugins/cronjob.wasm.gz").unwrap();
        assert_eq!(key.source, json!({"configMap": {"namespace": "sys", "name": "plugins", "key": "cronjob.wasm.gz"}}));
        assert_eq!(flags.given("plugin/hello"), None, "a Plugin object's own plugin");
        assert_eq!(flags.given("configmap/sys/plugins/next.wasm.candidate"), None, "a candidate is shown on its active plugin's object");
        assert_eq!(flags.given("something-else"), None);
    }

    #[test]
    fn object_names_are_dns_subdomains() {
        assert_eq!(object_name("hello"), "hello");
        assert_eq!(object_name("My_Plugin"), "my-plugin");
        assert_eq!(object_name("__"), "plugin");
    }
}
