//! The control plane's certificates and keys, as envtest makes them: one CA
//! that signs kube-apiserver's serving certificate (valid for the loopback
//! address and the in-cluster names), and one key that signs and verifies
//! service-account tokens. Clients authenticate with static tokens (a CSV
//! file), so no client certificates are needed.

use std::path::{Path, PathBuf};

/// Files under `<dir>/pki/`.
#[derive(Clone, Debug)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    /// PKCS#8 EC private key: kube-apiserver signs service-account tokens
    /// with it, kube-controller-manager the legacy token Secrets.
    pub service_account_key: PathBuf,
    /// Its public half, which kube-apiserver verifies tokens with (it reads
    /// only public keys, certificates and PKCS#1/SEC1 private keys there).
    pub service_account_public_key: PathBuf,
    pub ca_pem: String,
}

impl Pki {
    /// Generates everything into `dir/pki/`.
    pub fn generate(dir: &Path) -> Pki {
        let pki = dir.join("pki");
        std::fs::create_dir_all(&pki).expect("create the pki directory");
        let ca_key = rcgen::KeyPair::generate().expect("generate the CA key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "real-cluster-ca");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::DigitalSignature, rcgen::KeyUsagePurpose::CrlSign];
        let ca_cert = ca_params.self_signed(&ca_key).expect("self-sign the CA");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);

        let names = [
            "127.0.0.1",
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "10.0.0.1",
        ];
        let mut serving = rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("serving parameters");
        serving.distinguished_name.push(rcgen::DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let serving_key = rcgen::KeyPair::generate().expect("generate the serving key");
        let serving_cert = serving.signed_by(&serving_key, &issuer).expect("sign the serving certificate");

        let sa_key = rcgen::KeyPair::generate().expect("generate the service-account key");

        let write = |name: &str, text: &str| {
            let path = pki.join(name);
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
            path
        };
        Pki {
            ca_cert: write("ca.crt", &ca_cert.pem()),
            serving_cert: write("apiserver.crt", &serving_cert.pem()),
            serving_key: write("apiserver.key", &serving_key.serialize_pem()),
            service_account_key: write("sa.key", &sa_key.serialize_pem()),
            service_account_public_key: write("sa.pub", &sa_key.public_key_pem()),
            ca_pem: ca_cert.pem(),
        }
    }
}
