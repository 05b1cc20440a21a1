//! The on-disk cache of precompiled plugins.
//!
//! A plugin is compiled once per content digest and engine configuration;
//! later loads deserialize the artifact (about 0.1 ms instead of tens of ms).
//! Files are written to a temporary name and renamed into place, so
//! concurrent hosts sharing the directory never see a half-written file
//! (and a file is never changed in place, which matters: see below).
//! Each file carries a SHA-256 of its payload, so a corrupted or truncated
//! artifact is detected, discarded and rebuilt instead of being loaded.
//!
//! A cached artifact is mapped from its file, not read into memory: the
//! payload comes first and the check after it, so wasmtime can map the file
//! as it is. Only the pages of code and data a plugin touches become
//! resident, and they are the page cache's, shared by every host on the
//! machine; a copy in anonymous memory cost each process the artifact's
//! whole size (a few MiB per plugin).
//!
//! Read-only directories of artifacts made ahead of time ([`PrecompiledCache::with_shipped`],
//! the image's precompiled plugins) are consulted first: a Pod whose writable
//! cache is a fresh emptyDir then loads the image's own plugins without
//! compiling them, and without the compiler's working memory that a compile
//! at start-up leaves behind in the heap.

use std::hash::{Hash, Hasher};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The check that ends every artifact: this magic, then SHA-256 of the payload.
const MAGIC: &[u8; 8] = b"OPHCWAS2";
const TRAILER_LEN: usize = MAGIC.len() + 32;

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

/// The cache directory, or none (compile every time), and the read-only
/// directories of shipped artifacts looked at before it.
#[derive(Clone, Debug)]
pub struct PrecompiledCache {
    dir: Option<PathBuf>,
    shipped: Vec<PathBuf>,
}

impl PrecompiledCache {
    pub fn disabled() -> Self {
        Self { dir: None, shipped: Vec::new() }
    }

    pub fn at(dir: impl Into<PathBuf>) -> Result<Self, CacheError> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|source| CacheError::Dir { dir: dir.clone(), source })?;
        Ok(Self { dir: Some(dir), shipped: Vec::new() })
    }

    /// Also loads artifacts from `dir`, read-only, before the cache's own
    /// directory: artifacts made ahead of time by a host of the same build
    /// (`host --plugin-cache-dir DIR --no-plugin-baseline inspect P`). Their
    /// names carry the engine's compatibility hash, so a host of another
    /// build or on a CPU without the features they were compiled for looks
    /// for other names and compiles. Nothing is ever written to `dir`, and a
    /// missing `dir` is the same as an empty one.
    pub fn with_shipped(mut self, dir: impl Into<PathBuf>) -> Self {
        self.shipped.push(dir.into());
        self
    }

    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The artifact path for these plugin bytes (`digest`, SHA-256) under
    /// this engine: the name carries both, so another wasmtime version or
    /// engine configuration never reads this artifact.
    pub fn path_for(&self, engine: &Engine, digest: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(artifact_name(engine, digest)))
    }

    /// Returns the compiled component, from the cache when possible.
    /// `compile` runs only on a miss.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        digest: &str,
        compile: impl FnOnce() -> wasmtime::Result<Component>,
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        let outcome = match self.lookup(engine, digest) {
            Lookup::Hit(component) => return Ok((component, CacheOutcome::Hit)),
            Lookup::Miss(outcome) => outcome,
        };
        let component = compile()?;
        self.store(engine, digest, &component);
        Ok((component, outcome))
    }

    /// The cached component for `digest`, or what compiling it will be
    /// ([`CacheOutcome::Compiled`], or [`CacheOutcome::Rebuilt`] when a
    /// cached artifact was found corrupt).
    pub fn lookup(&self, engine: &Engine, digest: &str) -> Lookup {
        let name = artifact_name(engine, digest);
        for dir in &self.shipped {
            // A shipped artifact that is corrupt or rejected is passed over:
            // the directory is read-only, so the compile's result goes to the
            // writable cache instead.
            if let Lookup::Hit(component) = load_artifact(engine, &dir.join(&name)) {
                tracing::debug!(dir = %dir.display(), digest, "plugin loaded from the shipped precompiled artifacts");
                return Lookup::Hit(component);
            }
        }
        match &self.dir {
            Some(dir) => load_artifact(engine, &dir.join(&name)),
            None => Lookup::Miss(CacheOutcome::Compiled),
        }
    }

    /// Writes the artifact of a component compiled for `digest` (if the
    /// cache is enabled). A cache that cannot be written costs speed, not
    /// correctness: failures are logged.
    pub fn store(&self, engine: &Engine, digest: &str, component: &Component) {
        let Some(path) = self.path_for(engine, digest) else {
            return;
        };
        let written =
            component.serialize().map_err(|e| e.to_string()).and_then(|bytes| write_atomically(&path, &bytes).map_err(|e| crate::error_chain(&e)));
        if let Err(e) = written {
            tracing::warn!(error = %e, "plugin artifact not cached");
        }
    }
}

/// What [`PrecompiledCache::lookup`] found.
pub enum Lookup {
    Hit(Component),
    /// Not cached; the outcome a compile will have.
    Miss(CacheOutcome),
}

/// The file name of `digest`'s artifact under `engine`.
fn artifact_name(engine: &Engine, digest: &str) -> String {
    format!("{digest}-{}.cwasm", engine_key(engine))
}

/// The component in the artifact at `path`, if it is there, intact and
/// accepted by `engine`; otherwise what compiling instead will be.
fn load_artifact(engine: &Engine, path: &Path) -> Lookup {
    match verify_file(path) {
        Ok(true) => {
            // SAFETY: the file holds what `Component::serialize` of this
            // engine configuration wrote (its name carries the engine's
            // compatibility hash, its payload matches its SHA-256), so it
            // is the artifact we wrote, not arbitrary bytes; and artifacts
            // are only ever replaced by rename, never changed in place,
            // so the mapping stays what was checked.
            match unsafe { Component::deserialize_file(engine, path) } {
                Ok(component) => Lookup::Hit(component),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cached plugin artifact rejected; recompiling");
                    Lookup::Miss(CacheOutcome::Rebuilt)
                }
            }
        }
        Ok(false) => {
            tracing::warn!(path = %path.display(), "cached plugin artifact is corrupt; recompiling");
            Lookup::Miss(CacheOutcome::Rebuilt)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Lookup::Miss(CacheOutcome::Compiled),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot read cached plugin artifact; recompiling");
            Lookup::Miss(CacheOutcome::Compiled)
        }
    }
}

/// Whether the file's trailer matches its payload, hashed as it is read in
/// small pieces (the artifact is mapped afterwards, never held in memory).
fn verify_file(path: &Path) -> std::io::Result<bool> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let Some(payload_len) = len.checked_sub(TRAILER_LEN as u64) else {
        return Ok(false);
    };
    let mut hash = Sha256::new();
    // Sha256 is an io::Write: the payload streams through it.
    std::io::copy(&mut (&mut file).take(payload_len), &mut hash)?;
    let mut trailer = [0u8; TRAILER_LEN];
    file.seek(std::io::SeekFrom::Start(payload_len))?;
    file.read_exact(&mut trailer)?;
    Ok(trailer_matches(&trailer, &hash.finalize()))
}

fn trailer_matches(trailer: &[u8; TRAILER_LEN], payload_digest: &[u8]) -> bool {
    &trailer[..MAGIC.len()] == MAGIC && &trailer[MAGIC.len()..] == payload_digest
}

fn write_atomically(path: &Path, payload: &[u8]) -> Result<(), CacheError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let write = || -> std::io::Result<()> {
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(payload)?;
        tmp.write_all(MAGIC)?;
        tmp.write_all(&Sha256::digest(payload))?;
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
        let cache = PrecompiledCache { dir: Some(PathBuf::from("/c")), shipped: Vec::new() };
        let path = cache.path_for(&engine, "abc").unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("abc-") && name.ends_with(".cwasm"), "{name}");
        assert_eq!(name.len(), "abc-".len() + 16 + ".cwasm".len(), "{name}");
        assert_eq!(cache.path_for(&Engine::default(), "abc"), Some(path), "the same engine config gives the same key");
    }

    #[test]
    fn a_payload_with_a_wrong_digest_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.cwasm");
        write_atomically(&path, b"artifact").unwrap();
        assert!(verify_file(&path).unwrap());
        let mut file = std::fs::read(&path).unwrap();
        assert!(file.starts_with(b"artifact"), "the payload comes first, so the file can be mapped as it is");
        file[0] ^= 1;
        std::fs::write(&path, &file).unwrap();
        assert!(!verify_file(&path).unwrap());
        std::fs::write(&path, &file[..10]).unwrap();
        assert!(!verify_file(&path).unwrap());
    }
}
