//! The on-disk cache of pulled plugins, content-addressed as an OCI image
//! layout's `blobs/sha256/<hex>`: a manifest and its layer are kept by
//! digest, and every read is hashed again before it is used, so a cache
//! that was altered or half written is a miss, never a different plugin.

use std::path::{Path, PathBuf};

use super::Digest;

/// The default cache: `$XDG_CACHE_HOME/operator-host/oci`, else
/// `$HOME/.cache/operator-host/oci`, else under the temp dir.
pub fn default_dir() -> PathBuf {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|d| !d.is_empty()).map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("operator-host/oci")
}

/// Blobs by digest under one directory.
#[derive(Clone, Debug)]
pub struct BlobCache {
    dir: PathBuf,
}

impl BlobCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, digest: &Digest) -> PathBuf {
        self.dir.join("blobs/sha256").join(digest.hex())
    }

    /// The blob, if cached and still hashing to `digest`; a blob that does
    /// not is removed (and reported).
    pub fn get(&self, digest: &Digest) -> Option<Vec<u8>> {
        let path = self.path(digest);
        let bytes = std::fs::read(&path).ok()?;
        if Digest::of(&bytes) == *digest {
            return Some(bytes);
        }
        tracing::warn!(path = %path.display(), "a cached OCI blob does not hash to its name; removed, pulled again");
        let _ = std::fs::remove_file(&path);
        None
    }

    /// Stores a blob already verified against `digest` (atomically: written
    /// beside, then renamed).
    pub fn put(&self, digest: &Digest, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let path = self.path(digest);
        let dir = path.parent().expect("a blob path has a parent");
        std::fs::create_dir_all(dir)?;
        let mut file = tempfile::NamedTempFile::new_in(dir)?;
        file.write_all(bytes)?;
        file.persist(&path).map_err(|e| e.error)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blob_is_read_back_only_while_it_hashes_to_its_digest() {
        let dir = tempfile::tempdir().unwrap();
        let cache = BlobCache::new(dir.path());
        let digest = Digest::of(b"plugin");
        assert_eq!(cache.get(&digest), None);
        cache.put(&digest, b"plugin").unwrap();
        assert_eq!(cache.get(&digest).as_deref(), Some(&b"plugin"[..]));
        std::fs::write(dir.path().join("blobs/sha256").join(digest.hex()), b"tampered").unwrap();
        assert_eq!(cache.get(&digest), None, "altered bytes are a miss");
        assert!(!dir.path().join("blobs/sha256").join(digest.hex()).exists(), "and are removed");
    }
}
