//! Kubeconfig files for the embedded server: cluster `embedded`, a user without credentials and
//! context `embedded` as the current context.

use std::path::Path;

/// The kubeconfig YAML for a server at `server_url` (e.g. `http://127.0.0.1:41234`).
pub fn kubeconfig_yaml(server_url: &str, namespace: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: embedded
  cluster:
    server: {server_url}
users:
- name: embedded
  user: {{}}
contexts:
- name: embedded
  context:
    cluster: embedded
    user: embedded
    namespace: {namespace}
current-context: embedded
preferences: {{}}
"
    )
}

/// Write the kubeconfig to `path` (parent directories are created).
pub fn write_kubeconfig(path: impl AsRef<Path>, server_url: &str) -> std::io::Result<()> {
    let path = path.as_ref();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, kubeconfig_yaml(server_url, "default"))
}
