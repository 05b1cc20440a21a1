//! The Kubernetes client the host talks to a cluster with: kube's own
//! service stack (base URI, retries, auth, extra headers, timeouts, rustls)
//! over a TCP connector that sets `TCP_NODELAY`, as client-go does.
//!
//! kube 5 builds its `HttpConnector` with Nagle's algorithm on and offers no
//! option for it (kube-rs issue 2056). On HTTP/1.1 a request written in two
//! segments (headers, then body) then waits for the acknowledgement of the
//! first before the second leaves; kube-apiserver's request timer runs
//! meanwhile, and every write of a busy controller pays it.
//!
//! The stack differs from `kube::Client::try_from` in three ways: the
//! connector, no tracing layer (the host traces its own calls), and a
//! configured proxy, which is left to kube's own builder (it knows the
//! proxy protocols; the connection to a proxy is not the one that matters).

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use kube::client::retry::RetryPolicy;
use tower::ServiceBuilder;
use tower::retry::RetryLayer;

/// Why no client could be built from a kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot build the TLS connector: {0}")]
    Tls(#[source] kube::Error),
    #[error("cannot build the authentication layer: {0}")]
    Auth(#[source] kube::Error),
    #[error("cannot build the extra-headers layer (impersonation): {0}")]
    Headers(#[source] kube::Error),
    #[error("cannot build a client: {0}")]
    Kube(#[source] kube::Error),
}

/// A client for `config`'s cluster whose connections send each segment at
/// once (`TCP_NODELAY`).
pub fn client(config: kube::Config) -> Result<kube::Client, ClientError> {
    if config.proxy_url.is_some() {
        return kube::Client::try_from(config).map_err(ClientError::Kube);
    }
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    let tls = config.rustls_https_connector_with_connector(tcp).map_err(ClientError::Tls)?;
    let mut connector = hyper_timeout::TimeoutConnector::new(tls);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http: hyper_util::client::legacy::Client<_, kube::client::Body> =
        hyper_util::client::legacy::Builder::new(TokioExecutor::new()).build(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.default_retry.then(|| RetryLayer::new(RetryPolicy::server_retry())))
        .option_layer(config.auth_layer().map_err(ClientError::Auth)?)
        .layer(config.extra_headers_layer().map_err(ClientError::Headers)?)
        .map_err(tower::BoxError::from)
        .service(http);
    Ok(kube::Client::new(service, config.default_namespace))
}
