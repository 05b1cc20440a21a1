//! Kubeconfig files for the embedded server: cluster `embedded`, a user without credentials and
//! context `embedded` as the current context. Built as kube's [`Kubeconfig`] (the type kubectl's
//! format is read with) and written as YAML, not from a text template.

use std::path::Path;

use kube::config::{Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext, Preferences};

/// The name of the cluster, user and context.
const NAME: &str = "embedded";

/// The kubeconfig for a server at `server_url` (e.g. `http://127.0.0.1:41234`).
pub fn kubeconfig(server_url: &str, namespace: &str) -> Kubeconfig {
    Kubeconfig {
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        clusters: vec![NamedCluster {
            name: NAME.into(),
            cluster: Some(Cluster { server: Some(server_url.into()), ..Cluster::default() }),
            ..NamedCluster::default()
        }],
        // A user with no credentials (`user: {}`): the server admits everyone.
        auth_infos: vec![NamedAuthInfo { name: NAME.into(), auth_info: Some(Default::default()), ..NamedAuthInfo::default() }],
        contexts: vec![NamedContext {
            name: NAME.into(),
            context: Some(Context { cluster: NAME.into(), user: Some(NAME.into()), namespace: Some(namespace.into()), ..Context::default() }),
            ..NamedContext::default()
        }],
        current_context: Some(NAME.into()),
        preferences: Some(Preferences::default()),
        ..Kubeconfig::default()
    }
}

/// A kubeconfig for `server_url` as YAML: one cluster, one context in `namespace`, no credentials.
pub fn kubeconfig_yaml(server_url: &str, namespace: &str) -> String {
    serde_saphyr::to_string(&kubeconfig(server_url, namespace)).expect("a kubeconfig serializes")
}

/// Write the kubeconfig to `path` (parent directories are created).
pub fn write_kubeconfig(path: impl AsRef<Path>, server_url: &str) -> std::io::Result<()> {
    let path = path.as_ref();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, kubeconfig_yaml(server_url, "default"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_kubeconfig_reads_back_as_kubes_type() {
        let text = kubeconfig_yaml("http://127.0.0.1:1234", "default");
        let read = Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(read.current_context.as_deref(), Some("embedded"));
        assert_eq!(read.clusters[0].cluster.as_ref().unwrap().server.as_deref(), Some("http://127.0.0.1:1234"));
        let context = read.contexts[0].context.as_ref().unwrap();
        assert_eq!((context.user.as_deref(), context.namespace.as_deref()), (Some("embedded"), Some("default")));
    }
}
