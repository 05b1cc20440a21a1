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

    /// The artifact path for these plugin bytes under this engine.
    pub fn path_for(&self, engine: &Engine, digest: &str) -> Option<PathBuf> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        let engine_hash = h.finish();
        self.dir.as_ref().map(|d| d.join(format!("{digest}-{engine_hash:016x}.cwasm")))
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

/// The content digest that names a plugin: SHA-256 of its bytes, hex.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

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
