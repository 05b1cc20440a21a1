//! Which cluster `host run` talks to, as kubectl decides: the kubeconfig
//! files in `KUBECONFIG` (merged), else `~/.kube/config`, else the Pod's
//! service account; none of them means no cluster is configured (the caller
//! then starts the embedded one). A kubeconfig that cannot be read or used is
//! bad input (exit 2) and the message names the file and the one reason,
//! instead of kube's nested inference error that repeats every cause three times.

use std::path::PathBuf;

use kube::config::{Config, KubeConfigOptions, Kubeconfig};

use super::Failure;

/// Why [`config`] found no cluster, in one line (printed before the embedded cluster starts).
pub const NONE_CONFIGURED: &str =
    "no kubeconfig (KUBECONFIG is unset or names no existing file, and ~/.kube/config does not exist) and not running in a Pod";

/// The client configuration; `None` when no cluster is configured at all; a
/// [`Failure::bad_input`] naming the file when one is configured but unusable.
pub async fn config() -> Result<Option<Config>, Failure> {
    let (paths, explicit) = match std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        Some(v) => (std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()).collect(), true),
        None => (std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config")).into_iter().collect::<Vec<_>>(), false),
    };
    // kubectl skips KUBECONFIG entries that do not exist, but a typo in a
    // single explicit path is almost always a mistake worth stopping for.
    let paths: Vec<PathBuf> = if explicit && paths.len() == 1 { paths } else { paths.into_iter().filter(|p| p.exists()).collect() };
    if paths.is_empty() {
        // As client-go's InClusterConfig: a Pod is told by these two variables.
        let in_pod = ["KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"].iter().all(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
        if !in_pod {
            return Ok(None);
        }
        return Config::incluster().map(Some).map_err(|e| {
            Failure::bad_input(format!("running in a Pod, but its service account cannot be used: {}", operator_runtime::error_chain(&e)))
        });
    }
    let mut merged: Option<Kubeconfig> = None;
    for path in &paths {
        let text = std::fs::read_to_string(path).map_err(|e| Failure::bad_input(format!("cannot read kubeconfig {}: {e}", path.display())))?;
        Kubeconfig::from_yaml(&text)
            .map_err(|e| Failure::bad_input(format!("kubeconfig {} is not valid: {}", path.display(), operator_runtime::error_chain(&e))))?;
        // read_from also makes relative certificate paths absolute.
        let file = Kubeconfig::read_from(path)
            .map_err(|e| Failure::bad_input(format!("kubeconfig {}: {}", path.display(), operator_runtime::error_chain(&e))))?;
        merged = Some(match merged {
            None => file,
            Some(m) => {
                m.merge(file).map_err(|e| Failure::bad_input(format!("kubeconfig {}: {}", path.display(), operator_runtime::error_chain(&e))))?
            }
        });
    }
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    Config::from_custom_kubeconfig(merged.unwrap_or_default(), &KubeConfigOptions::default())
        .await
        .map(Some)
        .map_err(|e| Failure::bad_input(format!("kubeconfig {}: {}", names.join(":"), operator_runtime::error_chain(&e))))
}
