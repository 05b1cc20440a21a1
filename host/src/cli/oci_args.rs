//! `host run`'s registry flags: `--plugin oci://...` references, how they
//! are pulled (`--oci-cache-dir`, `--registry-config`, `--registry-secret`,
//! `--insecure-registry`), polled (`--oci-poll-interval`) and trusted
//! (`--cosign-key`). See [`operator_runtime::hotswap::oci`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::{Failure, parse_duration};
use operator_runtime::hotswap::oci::{self, Credentials, Puller, PullerOptions, Reference};
use operator_runtime::hotswap::trust::{NotAdmitted, Policy};
use operator_runtime::hotswap::{self, Origin};
use operator_runtime::sandbox::{LoadedPlugin, Sandbox};

#[derive(Debug, clap::Args)]
pub struct OciArgs {
    /// Resolve the tags of `--plugin oci://...:TAG` again this often; a tag
    /// that moved is a new version, swapped in as a changed file is. Without
    /// it a tag is resolved once, at start-up, and that digest runs.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    oci_poll_interval: Option<Duration>,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// How `oci://` plugins are pulled and trusted: `run`'s flags, which
/// `inspect`, `reconcile` and `validate` take too.
#[derive(Debug, clap::Args)]
pub struct RegistryArgs {
    /// Where pulled plugins are kept by digest (default:
    /// `$XDG_CACHE_HOME/operator-host/oci`); every read is hashed again.
    #[arg(long, value_name = "DIR")]
    oci_cache_dir: Option<PathBuf>,
    /// Registry credentials: a docker config JSON (`~/.docker/config.json`,
    /// as `docker login` or `oras login` writes it).
    #[arg(long, value_name = "FILE")]
    registry_config: Option<PathBuf>,
    /// Registry credentials from a Secret of type
    /// kubernetes.io/dockerconfigjson in the kubeconfig's cluster (read once
    /// at start-up; its logins win over --registry-config's).
    #[arg(long, value_name = "NAMESPACE/NAME")]
    registry_secret: Option<String>,
    /// Reach this registry (`host` or `host:port`) over plain HTTP; loopback
    /// registries always are, every other over HTTPS. Repeatable.
    #[arg(long = "insecure-registry", value_name = "HOST[:PORT]")]
    insecure_registries: Vec<String>,
    /// Run registry plugins only when cosign signed their manifest digest
    /// with this key (the cosign.pub of `cosign generate-key-pair`);
    /// repeatable. Refused versions never replace the running one.
    #[arg(long = "cosign-key", value_name = "FILE")]
    pub cosign_keys: Vec<PathBuf>,
}

/// `--plugin` values: files, and `oci://` references.
pub fn split(plugins: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<Reference>), Failure> {
    let mut files = Vec::new();
    let mut refs = Vec::new();
    for p in plugins {
        match p.to_str().filter(|s| s.starts_with(oci::reference::SCHEME)) {
            Some(text) => refs.push(text.parse::<Reference>().map_err(|e| Failure::bad_input(format!("--plugin {e}")))?),
            None => files.push(p.clone()),
        }
    }
    Ok((files, refs))
}

/// Registry plugins loaded at start-up, what polls their tags, and the
/// registry client (also `Plugin` objects' `oci` sources' client).
pub struct Started {
    pub plugins: Vec<(String, LoadedPlugin)>,
    pub poll: Option<Poll>,
    pub puller: Option<Arc<Puller>>,
}

/// `--oci-poll-interval`: the references to poll and the digests they started with.
pub struct Poll {
    puller: Arc<Puller>,
    started: Vec<(Reference, Option<oci::Digest>)>,
    cosign: bool,
    interval: Duration,
}

impl Poll {
    /// Polls until `tx` is closed.
    pub async fn run(self, metrics: Arc<operator_runtime::metrics::Metrics>, tx: tokio::sync::mpsc::Sender<hotswap::Update>) {
        println!("polling the tags of {} registry plugin(s) every {:?}", self.started.len(), self.interval);
        oci::watch::OciWatch::new(self.puller, self.started, self.cosign, metrics).run(self.interval, tx).await
    }
}

impl RegistryArgs {
    fn puller(&self) -> Result<Puller, Failure> {
        let mut credentials = Credentials::default();
        if let Some(path) = &self.registry_config {
            let json = std::fs::read(path).map_err(|e| Failure::bad_input(format!("--registry-config {}: {e}", path.display())))?;
            credentials = Credentials::from_docker_config(&json, &path.display().to_string()).map_err(Failure::bad_input)?;
        }
        if let Some(secret) = &self.registry_secret {
            credentials.merge(read_secret(secret)?);
        }
        let cache_dir = self.oci_cache_dir.clone().unwrap_or_else(oci::cache::default_dir);
        Ok(Puller::new(PullerOptions { cache_dir, credentials, insecure: self.insecure_registries.clone(), ..PullerOptions::default() }))
    }

    /// The one plugin `inspect`, `reconcile` and `validate` name: a file, or
    /// an `oci://` reference pulled as `run` pulls it (the same cache,
    /// credentials and `--cosign-key` check).
    pub fn load_one(&self, plugin: &Path, sandbox: &Sandbox) -> Result<LoadedPlugin, Failure> {
        let (files, refs) = split(std::slice::from_ref(&plugin.to_path_buf()))?;
        if let Some(file) = files.first() {
            return sandbox.load_file(file).map_err(|e| Failure::plugin(operator_runtime::error_chain(&e)));
        }
        let trust = Policy::default().with_cosign_keys(&self.cosign_keys).map_err(|e| Failure::bad_input(operator_runtime::error_chain(&e)))?;
        let puller = self.puller()?;
        let runtime = current_thread()?;
        let reference = &refs[0];
        let (plugin, _) = pull_and_load(&puller, &runtime, reference, sandbox, &trust)?;
        Ok(plugin)
    }
}

fn current_thread() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| Failure::plugin(format!("tokio: {e}")))
}

/// Pulls `r`, admits it by `trust` and loads it; with the pulled manifest
/// digest and whether it came from the cache.
fn pull_and_load(
    puller: &Puller,
    runtime: &tokio::runtime::Runtime,
    r: &Reference,
    sandbox: &Sandbox,
    trust: &Policy,
) -> Result<(LoadedPlugin, (String, bool)), Failure> {
    let (pulled, evidence) = runtime
        .block_on(async {
            let pulled = puller.pull(r).await?;
            let digest = pulled.digest.parse::<oci::Digest>().expect("a pulled digest parses");
            let evidence = if trust.wants_cosign() { Some(puller.signatures(r, &digest).await?) } else { None };
            Ok::<_, oci::OciError>((pulled, evidence))
        })
        .map_err(|e| Failure::bad_input(format!("plugin {r}: {}", operator_runtime::error_chain(&e))))?;
    let origin = Origin::Oci(r.clone());
    let digest = pulled.digest.clone();
    let admitted = trust.admit_with(pulled.component, None, evidence.as_ref(), &origin.signature_name()).map_err(|e| match e {
        NotAdmitted::Untrusted(_) => Failure::bad_input(format!("plugin {r} ({digest}) refused: {e}")),
        NotAdmitted::Unreadable(why) => Failure::bad_input(format!("plugin {r}: {why}")),
    })?;
    let p = sandbox.load(&origin.id(), &admitted.component).map_err(|e| Failure::bad_input(operator_runtime::error_chain(&e)))?;
    Ok((p, (digest, pulled.cached)))
}

impl OciArgs {
    /// Pulls, admits and loads `refs` (a refusal is bad input: exit 2).
    /// With `client_wanted` (`Plugin` objects may name registries) the
    /// registry client is made even when `refs` is empty.
    pub fn start(&self, refs: &[Reference], sandbox: &Sandbox, trust: &Policy, client_wanted: bool) -> Result<Started, Failure> {
        if refs.is_empty() {
            let puller = if client_wanted { Some(Arc::new(self.registry.puller()?)) } else { None };
            return Ok(Started { plugins: vec![], poll: None, puller });
        }
        let puller = Arc::new(self.registry.puller()?);
        let runtime = current_thread()?;
        let mut plugins = Vec::new();
        let mut started = Vec::new();
        // A candidate tag (`TAG.candidate`) is staged beside its running tag
        // by the hot-swap path once that one runs: polled, never loaded here.
        let (candidates, refs): (Vec<&Reference>, Vec<&Reference>) =
            refs.iter().partition(|r| hotswap::shadow::active_id(&Origin::Oci((*r).clone()).id()).is_some());
        if !candidates.is_empty() && self.oci_poll_interval.is_none() {
            return Err(Failure::bad_input(format!("--plugin {}: a candidate tag is staged by polling; add --oci-poll-interval", candidates[0])));
        }
        started.extend(candidates.into_iter().map(|c| (c.clone(), None)));
        for r in refs {
            let (p, (digest, cached)) = pull_and_load(&puller, &runtime, r, sandbox, trust)?;
            let origin = Origin::Oci(r.clone());
            let from = if cached { "the cache" } else { "the registry" };
            tracing::info!(plugin = p.name(), source = %r, manifest = %digest, "loaded from {from}");
            println!("plugin {} from {r} ({digest}, {from})", hotswap::describe(&p));
            started.push((r.clone(), Some(digest.parse().expect("a pulled digest parses"))));
            plugins.push((origin.id(), p));
        }
        let poll = self.oci_poll_interval.map(|interval| Poll { puller: puller.clone(), started, cosign: trust.wants_cosign(), interval });
        Ok(Started { plugins, poll, puller: Some(puller) })
    }
}

/// The logins in a kubernetes.io/dockerconfigjson Secret of the kubeconfig's cluster.
fn read_secret(secret: &str) -> Result<Credentials, Failure> {
    use k8s_openapi::api::core::v1::Secret;
    let (namespace, name) = secret
        .split_once('/')
        .filter(|(n, m)| !n.is_empty() && !m.is_empty() && !m.contains('/'))
        .ok_or_else(|| Failure::bad_input(format!("--registry-secret {secret:?} is not NAMESPACE/NAME")))?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| Failure::plugin(format!("tokio: {e}")))?;
    runtime.block_on(async {
        let config = super::kubeconfig::config().await?.ok_or_else(|| {
            Failure::bad_input(format!("--registry-secret {secret} needs a cluster to read it from: {}", super::kubeconfig::NONE_CONFIGURED))
        })?;
        let client =
            kube::Client::try_from(config).map_err(|e| Failure::bad_input(format!("--registry-secret: {}", operator_runtime::error_chain(&e))))?;
        let s = kube::Api::<Secret>::namespaced(client, namespace)
            .get(name)
            .await
            .map_err(|e| Failure::bad_input(format!("--registry-secret {secret}: {}", operator_runtime::error_chain(&e))))?;
        if s.type_.as_deref() != Some("kubernetes.io/dockerconfigjson") {
            return Err(Failure::bad_input(format!(
                "--registry-secret {secret} is of type {:?}, not kubernetes.io/dockerconfigjson",
                s.type_.unwrap_or_default()
            )));
        }
        let json = s
            .data
            .and_then(|mut d| d.remove(".dockerconfigjson"))
            .ok_or_else(|| Failure::bad_input(format!("--registry-secret {secret} has no .dockerconfigjson key")))?;
        Credentials::from_docker_config(&json.0, &format!("secret {secret}")).map_err(Failure::bad_input)
    })
}
