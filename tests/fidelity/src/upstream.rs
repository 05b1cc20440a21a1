//! A server the recorder forwards to or the replayer sends to: the real
//! kube-apiserver (HTTPS, trusting only its CA, with the administrator's
//! bearer token) or the embedded one (plain HTTP on loopback). One
//! connection per request: loopback makes that cheap, and no state (a
//! half-read watch) leaks from one exchange into the next.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("the server URL {0:?} is not http://HOST:PORT or https://HOST:PORT")]
    Url(String),
    #[error("the CA certificate: {0}")]
    Ca(String),
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("TLS with {addr}: {source}")]
    Tls {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("HTTP with {addr}: {source}")]
    Http {
        addr: String,
        #[source]
        source: hyper::Error,
    },
}

/// Where requests go and how they authenticate.
#[derive(Clone)]
pub struct Upstream {
    /// `HOST:PORT`.
    addr: String,
    tls: Option<tokio_rustls::TlsConnector>,
    token: Option<String>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream").field("addr", &self.addr).field("tls", &self.tls.is_some()).finish()
    }
}

impl Upstream {
    /// A plain-HTTP server (the embedded one), without credentials.
    pub fn http(url: &str) -> Result<Upstream, UpstreamError> {
        let addr = url.strip_prefix("http://").ok_or_else(|| UpstreamError::Url(url.to_string()))?.trim_end_matches('/').to_string();
        Ok(Upstream { addr, tls: None, token: None })
    }

    /// An HTTPS server whose certificate `ca_pem` signed, with a bearer token.
    pub fn https(url: &str, ca_pem: &str, token: &str) -> Result<Upstream, UpstreamError> {
        use rustls::pki_types::pem::PemObject;
        let addr = url.strip_prefix("https://").ok_or_else(|| UpstreamError::Url(url.to_string()))?.trim_end_matches('/').to_string();
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.map_err(|e| UpstreamError::Ca(e.to_string()))?).map_err(|e| UpstreamError::Ca(e.to_string()))?;
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| UpstreamError::Ca(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Upstream { addr, tls: Some(tokio_rustls::TlsConnector::from(Arc::new(config))), token: Some(token.to_string()) })
    }

    /// Sends `request` (its headers already the client's; credentials and
    /// `Host` are set here) and returns the response with its body unread.
    pub async fn send(&self, mut request: Request<Full<Bytes>>) -> Result<Response<Incoming>, UpstreamError> {
        let headers = request.headers_mut();
        headers.insert(hyper::header::HOST, self.addr.parse().map_err(|_| UpstreamError::Url(self.addr.clone()))?);
        headers.remove(hyper::header::AUTHORIZATION);
        if let Some(token) = &self.token
            && let Ok(value) = format!("Bearer {token}").parse()
        {
            headers.insert(hyper::header::AUTHORIZATION, value);
        }
        let tcp = tokio::net::TcpStream::connect(&self.addr).await.map_err(|source| UpstreamError::Connect { addr: self.addr.clone(), source })?;
        let http = |source| UpstreamError::Http { addr: self.addr.clone(), source };
        match &self.tls {
            None => {
                let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await.map_err(http)?;
                tokio::spawn(conn);
                sender.send_request(request).await.map_err(http)
            }
            Some(tls) => {
                let host = self.addr.rsplit_once(':').map_or(self.addr.as_str(), |(h, _)| h).to_string();
                let name = rustls::pki_types::ServerName::try_from(host).map_err(|_| UpstreamError::Url(self.addr.clone()))?;
                let stream = tls.connect(name, tcp).await.map_err(|source| UpstreamError::Tls { addr: self.addr.clone(), source })?;
                let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(http)?;
                tokio::spawn(conn);
                sender.send_request(request).await.map_err(http)
            }
        }
    }
}
