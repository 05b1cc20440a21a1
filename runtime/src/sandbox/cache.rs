//! The on-disk cache of precompiled plugins.
//!
//! A plugin is compiled once per content digest and engine configuration;
//! later loads deserialize the artifact (about 0.1 ms instead of tens of ms).
//! Files are written to a temporary name and renamed into place, so
//! concurrent hosts sharing the directory never see a half-written file.
//! Each file carries a SHA-256 of its payload, so a corrupted or truncated
//! artifact is detected, discarded and rebuilt instead of being loaded.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 8] = b"OPHCWASM";
const HEADER_LEN: usize = MAGIC.len() + 32;

/// How a component was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded from a valid cached artifact.
    Hit,
    /// Compiled (no cache configured, or no artifact yet).
    Compiled,
    /// A cached artifact was corrupt; it was replaced by a fresh compile.
    Rebuilt,
}

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("cannot use plugin cache directory {dir}")]
    Dir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write cached artifact {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The cache directory, or none (compile every time).
#[derive(Clone, Debug)]
pub struct PrecompiledCache {
    dir: Option<PathBuf>,
}

impl PrecompiledCache {
    pub fn disabled() -> Self {
        Self { dir: None }
    }

    pub fn at(dir: impl Into<PathBuf>) -> Result<Self, CacheError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|source| CacheError::Dir { dir: dir.clone(), source })?;
        Ok(Self { dir: Some(dir) })
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The artifact path for these plugin bytes (`digest`, SHA-256) under
    /// this engine: the name carries both, so another wasmtime version or
    /// engine configuration never reads this artifact.
    pub fn path_for(&self, engine: &Engine, digest: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{digest}-{}.cwasm", engine_key(engine))))
    }

    /// Returns the compiled component, from the cache when possible.
    /// `compile` runs only on a miss.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        digest: &str,
        compile: impl FnOnce() -> wasmtime::Result<Component>,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let Some(path) = self.path_for(engine, digest) else {
            return Ok((compile()?, CacheOutcome::Compiled));
        };
        let mut outcome = CacheOutcome::Compiled;
        match std::fs::read(&path) {
            Ok(file) => match verified_payload(&file) {
                Some(payload) => {
                    // SAFETY: the payload was produced by `Component::serialize`
                    // of this engine configuration (the file name carries the
                    // engine's compatibility hash) and its SHA-256 matches, so it
                    // is the artifact we wrote, not arbitrary bytes.
                    match unsafe { Component::deserialize(engine, payload) } {
                        Ok(component) => return Ok((component, CacheOutcome::Hit)),
                        Err(e) => {
                            tracing::warn!(path = %path.display(), error = %e, "cached plugin artifact rejected; recompiling");
                            outcome = CacheOutcome::Rebuilt;
                        }
                    }
                }
                None => {
                    tracing::warn!(path = %path.display(), "cached plugin artifact is corrupt; recompiling");
                    outcome = CacheOutcome::Rebuilt;
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "cannot read cached plugin artifact; recompiling"),
        }
        let component = compile()?;
        if let Err(e) = write_atomically(&path, &component.serialize()?) {
            // A cache that cannot be written costs speed, not correctness.
            tracing::warn!(error = %e, "plugin artifact not cached");
        }
        Ok((component, outcome))
    }
}

fn verified_payload(file: &[u8]) -> Option<&[u8]> {
    if file.len() < HEADER_LEN || &file[..MAGIC.len()] != MAGIC {
        return None;
    }
    let (digest, payload) = file[MAGIC.len()..].split_at(32);
    (Sha256::digest(payload).as_slice() == digest).then_some(payload)
}

fn write_atomically(path: &Path, payload: &[u8]) -> Result<(), CacheError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let write = || -> std::io::Result<()> {
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(MAGIC)?;
        tmp.write_all(&Sha256::digest(payload))?;
        tmp.write_all(payload)?;
        tmp.as_file().sync_all()?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    };
    write().map_err(|source| CacheError::Write { path: path.to_owned(), source })
}

/// SHA-256 of the engine's precompile compatibility hash, 16 hex digits.
/// Stable across Rust releases, unlike `DefaultHasher`, whose output may
/// change with any of them (wasmtime's own cache hashes the same way).
fn engine_key(engine: &Engine) -> String {
    let mut hasher = Sha256Hasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hex::encode(&hasher.0.finalize()[..8])
}

/// Feeds what a `Hash` impl writes into SHA-256.
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        unreachable!("read the digest with finalize()")
    }
}

/// The content digest that names a plugin: SHA-256 of its bytes, hex.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_artifact_is_named_by_the_plugin_digest_and_a_stable_engine_key() {
        let engine = Engine::default();
        let cache = PrecompiledCache { dir: Some(PathBuf::from("/c")) };
        let path = cache.path_for(&engine, "abc").unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("abc-") && name.ends_with(".cwasm"), "{name}");
        assert_eq!(name.len(), "abc-".len() + 16 + ".cwasm".len(), "{name}");
        assert_eq!(cache.path_for(&Engine::default(), "abc"), Some(path), "the same engine config gives the same key");
    }

    #[test]
    fn a_payload_with_a_wrong_digest_is_refused() {
        let payload = b"artifact";
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&Sha256::digest(payload));
        file.extend_from_slice(payload);
        assert_eq!(verified_payload(&file), Some(&payload[..]));
        let last = file.len() - 1;
        file[last] ^= 1;
        assert_eq!(verified_payload(&file), None);
        assert_eq!(verified_payload(&file[..10]), None);
    }
}
