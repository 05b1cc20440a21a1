//! Durable storage for the store (`host run --embedded --data-dir DIR`): a [`Backend`] over a
//! [redb](https://docs.rs/redb) file, `DIR/store.redb`.
//!
//! Guarantees:
//! - Every committed event is written in its own redb transaction with
//!   [`redb::Durability::Immediate`] (fsync) *before* the store applies it, so a write the API
//!   acknowledged survives a crash or `kill -9`; a write that cannot be persisted is refused
//!   (the request gets a 500) and the in-memory state is left as it was.
//! - The file holds the objects (key `group/resource/namespace/name`, value = CRC-32 of the JSON
//!   + the JSON) and the last resourceVersion, so resourceVersions continue after a restart.
//! - A damaged file is reported at start, never loaded or emptied silently: redb verifies every
//!   page checksum on open (`set_check_integrity_on_open`) and a torn last commit is rolled back
//!   to the previous one by redb's commit protocol (that commit was never acknowledged), and each
//!   object's own checksum, key and resourceVersion are verified while loading.
//!
//! Watches do not survive a restart: the event window starts empty at the loaded
//! resourceVersion, so resuming from an older one gets 410 Expired, as after an upstream
//! apiserver restart with an empty watch cache.

use crate::resources::GroupResource;
use crate::store::{Backend, BackendError, Event, EventType, ObjectKey};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;
use std::path::{Path, PathBuf};

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// The last committed resourceVersion.
const META_RV: &str = "resource_version";
/// Layout version of this file, for future migrations.
const META_FORMAT: &str = "format";
const FORMAT: u64 = 1;

/// The data file inside a data directory.
pub const FILE_NAME: &str = "store.redb";

/// Why the data directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The directory cannot be created.
    #[error("cannot create data directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// redb refused the file: damaged, not a redb file, or in use by another process.
    #[error("cannot open data file {path}: {source} (a damaged file is not loaded: move it away to start with an empty store, or restore a backup)")]
    Open {
        /// The file.
        path: PathBuf,
        /// redb's reason.
        #[source]
        source: redb::DatabaseError,
    },
    /// The file opened but its contents are inconsistent.
    #[error("data file {path} is corrupt: {detail} (not loaded: move it away to start with an empty store, or restore a backup)")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A redb read or write failed.
    #[error("data file {path}: {source}")]
    Storage {
        /// The file.
        path: PathBuf,
        /// redb's error.
        #[source]
        source: redb::Error,
    },
}

/// What a data file holds: its objects and the resourceVersion to continue from.
type Contents = (Vec<(ObjectKey, Value)>, u64);

/// A [`Backend`] keeping the store in `DIR/store.redb`.
pub struct RedbBackend {
    db: Database,
    path: PathBuf,
    /// Read and verified at open; handed to the store once.
    loaded: std::sync::Mutex<Option<Contents>>,
}

impl std::fmt::Debug for RedbBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbBackend").field("path", &self.path).finish()
    }
}

impl RedbBackend {
    /// Open (or create) the store in `dir`, verify it and read it whole. Fails with a clear
    /// error for a damaged file, or one another process holds open.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, PersistError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| PersistError::CreateDir { path: dir.to_path_buf(), source })?;
        let path = dir.join(FILE_NAME);
        let db = Database::builder()
            .set_check_integrity_on_open(true)
            .create(&path)
            .map_err(|source| PersistError::Open { path: path.clone(), source })?;
        let backend = RedbBackend { db, path, loaded: std::sync::Mutex::new(None) };
        let loaded = backend.read_all()?;
        *backend.loaded.lock().unwrap() = Some(loaded);
        Ok(backend)
    }

    /// The data file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn storage(&self, e: impl Into<redb::Error>) -> PersistError {
        PersistError::Storage { path: self.path.clone(), source: e.into() }
    }

    fn corrupt(&self, detail: String) -> PersistError {
        PersistError::Corrupt { path: self.path.clone(), detail }
    }

    fn read_all(&self) -> Result<Contents, PersistError> {
        let tx = self.db.begin_read().map_err(|e| self.storage(e))?;
        let meta = match tx.open_table(META) {
            Ok(t) => Some(t),
            Err(redb::TableError::TableDoesNotExist(_)) => None,
            Err(e) => return Err(self.storage(e)),
        };
        let Some(meta) = meta else {
            return Ok((vec![], 0));
        }; // a new file
        let format = meta.get(META_FORMAT).map_err(|e| self.storage(e))?.map(|v| v.value());
        if format != Some(FORMAT) {
            return Err(self.corrupt(format!("format version {format:?}, expected {FORMAT}")));
        }
        let rv =
            meta.get(META_RV).map_err(|e| self.storage(e))?.map(|v| v.value()).ok_or_else(|| self.corrupt("no resourceVersion recorded".into()))?;
        let objects = tx.open_table(OBJECTS).map_err(|e| self.storage(e))?;
        let mut out = vec![];
        for entry in objects.iter().map_err(|e| self.storage(e))? {
            let (k, v) = entry.map_err(|e| self.storage(e))?;
            let key = parse_key(k.value()).ok_or_else(|| self.corrupt(format!("malformed key {:?}", k.value())))?;
            let obj = decode(v.value()).map_err(|why| self.corrupt(format!("object {}: {why}", k.value())))?;
            let name_ok = obj.pointer("/metadata/name").and_then(Value::as_str) == Some(key.name.as_str());
            let obj_rv = crate::store::object_rv(&obj);
            if !name_ok || obj_rv == 0 || obj_rv > rv {
                return Err(self.corrupt(format!("object {} does not match its key or has resourceVersion {obj_rv} (store at {rv})", k.value())));
            }
            out.push((key, obj));
        }
        Ok((out, rv))
    }

    fn write(&self, event: &Event) -> Result<(), PersistError> {
        let mut tx = self.db.begin_write().map_err(|e| self.storage(e))?;
        tx.set_durability(Durability::Immediate).map_err(|e| self.storage(e))?;
        {
            let mut objects = tx.open_table(OBJECTS).map_err(|e| self.storage(e))?;
            let key = format_key(&event.key);
            match event.kind {
                EventType::Deleted => {
                    objects.remove(key.as_str()).map_err(|e| self.storage(e))?;
                }
                EventType::Added | EventType::Modified => {
                    objects.insert(key.as_str(), encode(&event.object).as_slice()).map_err(|e| self.storage(e))?;
                }
            }
            let mut meta = tx.open_table(META).map_err(|e| self.storage(e))?;
            meta.insert(META_RV, event.rv).map_err(|e| self.storage(e))?;
            meta.insert(META_FORMAT, FORMAT).map_err(|e| self.storage(e))?;
        }
        tx.commit().map_err(|e| self.storage(e))
    }
}

impl Backend for RedbBackend {
    fn record(&self, event: &Event) -> Result<(), BackendError> {
        self.write(event).map_err(|e| BackendError(e.to_string()))
    }

    fn load(&self) -> (Vec<(ObjectKey, Value)>, u64) {
        self.loaded.lock().unwrap().take().unwrap_or_default()
    }
}

fn format_key(k: &ObjectKey) -> String {
    // None of the parts can contain '/' (API groups, plurals and names are DNS-like).
    format!("{}/{}/{}/{}", k.gr.group, k.gr.resource, k.namespace, k.name)
}

fn parse_key(s: &str) -> Option<ObjectKey> {
    let mut parts = s.split('/');
    let (group, resource, namespace, name) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || resource.is_empty() || name.is_empty() {
        return None;
    }
    Some(ObjectKey { gr: GroupResource { group: group.into(), resource: resource.into() }, namespace: namespace.into(), name: name.into() })
}

/// CRC-32 (little endian) followed by the JSON.
fn encode(obj: &Value) -> Vec<u8> {
    let json = serde_json::to_vec(obj).expect("a JSON value serializes");
    let mut out = crc32fast::hash(&json).to_le_bytes().to_vec();
    out.extend_from_slice(&json);
    out
}

fn decode(bytes: &[u8]) -> Result<Value, String> {
    let (crc, json) = bytes.split_at_checked(4).ok_or("shorter than its checksum")?;
    if u32::from_le_bytes(crc.try_into().expect("4 bytes")) != crc32fast::hash(json) {
        return Err("checksum mismatch".into());
    }
    serde_json::from_slice(json).map_err(|e| format!("not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_including_the_core_group_and_cluster_scope() {
        for k in ["/configmaps/default/a", "apps/deployments/ns/web", "/namespaces//kube-system"] {
            assert_eq!(format_key(&parse_key(k).unwrap()), k);
        }
        assert!(parse_key("a/b/c").is_none());
    }

    #[test]
    fn a_flipped_bit_in_a_value_is_detected() {
        let mut bytes = encode(&serde_json::json!({"metadata": {"name": "a"}}));
        assert!(decode(&bytes).is_ok());
        let last = bytes.len() - 3;
        bytes[last] ^= 0x01;
        assert_eq!(decode(&bytes).unwrap_err(), "checksum mismatch");
    }
}
