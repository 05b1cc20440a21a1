//! `host run`'s admission webhook flags: serving (`--webhook-addr`, the
//! certificate) and the host's own webhook configurations
//! (`--webhook-configure`, see [`operator_runtime::webhook::configuration`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{Failure, parse_duration};
use operator_runtime::webhook::configuration::{self, DEFAULT_TIMEOUT_SECONDS, Endpoint, FailurePolicy, MAX_TIMEOUT_SECONDS};

#[derive(Debug, clap::Args)]
pub struct WebhookArgs {
    /// Serve each plugin's default/validate as HTTPS admission webhooks on
    /// this address (for a real cluster), e.g. `0.0.0.0:9443`. Off by default.
    #[arg(long)]
    pub webhook_addr: Option<SocketAddr>,
    /// Directory holding the webhook's `tls.crt` and `tls.key` (and
    /// `ca.crt`, the CA bundle, when a CA issued them). When it holds
    /// neither, a self-signed pair is generated and its certificate (the
    /// caBundle) written to `<dir>/generated/ca.crt`.
    #[arg(long, default_value = "/tmp/k8s-webhook-server/serving-certs")]
    pub webhook_cert_dir: PathBuf,
    /// A name the generated webhook certificate is valid for besides
    /// localhost, 127.0.0.1 and the `--webhook-url-base` or
    /// `--webhook-service` host, e.g. another DNS name. Repeatable.
    #[arg(long = "webhook-host", value_name = "NAME")]
    pub webhook_hosts: Vec<String>,
    /// Share a generated certificate between replicas through this Secret
    /// (type kubernetes.io/tls with ca.crt): the first replica creates it,
    /// the others read it. Instead of `--webhook-cert-dir`.
    #[arg(long, value_name = "NAMESPACE/NAME", requires = "webhook_addr")]
    pub webhook_cert_secret: Option<String>,
    /// Write and keep up to date a MutatingWebhookConfiguration and a
    /// ValidatingWebhookConfiguration for the running plugins, with the
    /// serving certificate's CA as caBundle. Needs `--webhook-url-base` or
    /// `--webhook-service`.
    #[arg(long, requires = "webhook_addr")]
    pub webhook_configure: bool,
    /// `--webhook-configure` for a host outside the cluster: the API server
    /// calls `<URL><path>`, e.g. `https://127.0.0.1:9443`.
    #[arg(long, value_name = "URL", requires = "webhook_configure", conflicts_with = "webhook_service")]
    pub webhook_url_base: Option<String>,
    /// `--webhook-configure` for a host in the cluster: the API server calls
    /// this Service (port default 443).
    #[arg(long, value_name = "NAMESPACE/NAME[:PORT]", requires = "webhook_configure")]
    pub webhook_service: Option<String>,
    /// What the API server does when it gets no answer from the host:
    /// `Fail` refuses the request, `Ignore` admits it unchecked.
    #[arg(long, value_enum, ignore_case = true, default_value = "Fail", requires = "webhook_configure")]
    pub webhook_failure_policy: FailurePolicyArg,
    /// How long the API server waits for each webhook call: whole seconds
    /// from 1s to 30s (the API's bounds); `10` is read as `10s`.
    #[arg(long, default_value = "10s", value_parser = parse_webhook_timeout, requires = "webhook_configure")]
    pub webhook_timeout: u8,
    /// Name of both webhook configuration objects.
    #[arg(long, default_value = configuration::DEFAULT_CONFIGURATION_NAME, requires = "webhook_configure")]
    pub webhook_configuration_name: String,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum FailurePolicyArg {
    #[value(name = "Fail")]
    Fail,
    #[value(name = "Ignore")]
    Ignore,
}

fn parse_webhook_timeout(text: &str) -> Result<u8, String> {
    let duration = match text.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        Err(_) => parse_duration(text)?,
    };
    let bounds = 1..=u64::from(MAX_TIMEOUT_SECONDS);
    match u8::try_from(duration.as_secs()) {
        Ok(seconds) if duration.subsec_nanos() == 0 && bounds.contains(&duration.as_secs()) => Ok(seconds),
        _ => Err(format!("{text:?}: whole seconds from 1s to {MAX_TIMEOUT_SECONDS}s (the API server's bounds; default {DEFAULT_TIMEOUT_SECONDS}s)")),
    }
}

/// Where the serving certificate comes from.
#[derive(Debug)]
pub enum CertSource {
    /// `--webhook-cert-dir` (or generated there).
    Dir,
    /// `--webhook-cert-secret`: (namespace, name).
    Secret(String, String),
}

/// The webhook flags, checked together.
#[derive(Debug)]
pub struct WebhookPlan {
    pub addr: SocketAddr,
    pub cert: CertSource,
    /// Names a generated certificate is valid for (besides localhost and 127.0.0.1).
    pub hosts: Vec<String>,
    pub configure: Option<configuration::Config>,
}

fn namespaced(flag: &str, text: &str) -> Result<(String, String), Failure> {
    text.split_once('/')
        .filter(|(ns, n)| !ns.is_empty() && !n.is_empty() && !n.contains('/'))
        .map(|(ns, n)| (ns.to_string(), n.to_string()))
        .ok_or_else(|| Failure::bad_input(format!("{flag} {text:?}: expected NAMESPACE/NAME")))
}

impl WebhookArgs {
    /// The plan, or `None` without `--webhook-addr`. `leader_elect`: several
    /// replicas may serve, so a configuration written by one must carry a CA
    /// every replica serves.
    pub fn plan(&self, leader_elect: bool) -> Result<Option<WebhookPlan>, Failure> {
        let Some(addr) = self.webhook_addr else { return Ok(None) };
        let cert = match &self.webhook_cert_secret {
            Some(text) => {
                let (namespace, name) = namespaced("--webhook-cert-secret", text)?;
                CertSource::Secret(namespace, name)
            }
            None => CertSource::Dir,
        };
        let mut hosts = self.webhook_hosts.clone();
        let configure = if self.webhook_configure {
            let endpoint = match (&self.webhook_url_base, &self.webhook_service) {
                (Some(url), None) => Endpoint::url(url).map_err(|e| Failure::bad_input(format!("--webhook-url-base {e}")))?,
                (None, Some(service)) => Endpoint::service(service).map_err(|e| Failure::bad_input(format!("--webhook-service {e}")))?,
                _ => {
                    return Err(Failure::bad_input(
                        "--webhook-configure needs where the API server calls the host: --webhook-url-base https://HOST:PORT (a host outside the cluster) or --webhook-service NAMESPACE/NAME[:PORT]",
                    ));
                }
            };
            configuration::check_name(&self.webhook_configuration_name)
                .map_err(|e| Failure::bad_input(format!("--webhook-configuration-name {e}")))?;
            let pair_given = self.webhook_cert_dir.join("tls.crt").exists();
            if leader_elect && matches!(cert, CertSource::Dir) && !pair_given {
                return Err(Failure::bad_input(format!(
                    "--webhook-configure with --leader-elect: each replica would generate its own certificate and the one caBundle could not match them all; \
                     share one with --webhook-cert-secret NAMESPACE/NAME, or mount a pair in --webhook-cert-dir ({} has no tls.crt)",
                    self.webhook_cert_dir.display()
                )));
            }
            hosts.push(endpoint.server_name());
            Some(configuration::Config {
                name: self.webhook_configuration_name.clone(),
                endpoint,
                failure_policy: match self.webhook_failure_policy {
                    FailurePolicyArg::Fail => FailurePolicy::Fail,
                    FailurePolicyArg::Ignore => FailurePolicy::Ignore,
                },
                timeout_seconds: self.webhook_timeout,
            })
        } else {
            None
        };
        Ok(Some(WebhookPlan { addr, cert, hosts, configure }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_timeouts_are_whole_seconds_within_the_apis_bounds() {
        assert_eq!(parse_webhook_timeout("10s"), Ok(10));
        assert_eq!(parse_webhook_timeout("30"), Ok(30));
        assert!(parse_webhook_timeout("31s").is_err());
        assert!(parse_webhook_timeout("0s").is_err());
        assert!(parse_webhook_timeout("1500ms").is_err());
    }
}
