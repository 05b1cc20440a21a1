//! Ed25519 keys for the plugin trust tests, written as openssl writes them
//! (`openssl genpkey -algorithm ed25519`, `openssl pkey -pubout`), and
//! detached signatures as `host sign` makes them.

use std::path::{Path, PathBuf};

use ed25519_dalek::Signer;
use ed25519_dalek::SigningKey;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{EncodePrivateKey, EncodePublicKey};

/// The key whose 32 secret bytes are all `seed`.
pub fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// Writes `key`'s public half as `openssl pkey -pubout` does; returns the path.
pub fn public_pem(dir: &Path, name: &str, key: &SigningKey) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, key.verifying_key().to_public_key_pem(LineEnding::LF).unwrap()).unwrap();
    path
}

/// Writes `key` as `openssl genpkey -algorithm ed25519` does; returns the path.
pub fn private_pem(dir: &Path, name: &str, key: &SigningKey) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, key.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes()).unwrap();
    path
}

/// The signature of `bytes` by `key`, as the `.sig` file beside a plugin holds it.
pub fn sign(key: &SigningKey, bytes: &[u8]) -> Vec<u8> {
    key.sign(bytes).to_bytes().to_vec()
}
