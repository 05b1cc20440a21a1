//! The API surface of the real kube-apiserver, captured as the embedded
//! server serves it: `/version`, aggregated discovery (`/api`, `/apis`), every
//! built-in group version's `APIResourceList`, the OpenAPI v3 documents and
//! the Table columns of every listable resource. `cargo xtask api-surface`
//! writes it under `apiserver/surface/` ([`write`]); the drift test compares
//! a fresh capture with the committed files ([`Surface::differences`]).
//!
//! The files (see apiserver/README.md, "The API surface"):
//! - `version.json`: `/version` as upstream answers it.
//! - `discovery.json`: `{"api": <aggregated /api>, "apis": <aggregated /apis>,
//!   "resourceLists": {"api/v1": <APIResourceList>, "apis/G/V": ...}}`.
//! - `tables.json`: `{"<group>/<resource>": [<Table columnDefinitions>]}`
//!   (`""` is the core group).
//! - `openapi-v3.json.gz`: gzipped `{"api/v1": <document>, "apis/G/V": ...}`,
//!   every document `/openapi/v3` lists (group versions, groups, `version`,
//!   `.well-known/openid-configuration`, ...) unchanged (descriptions and `x-kubernetes-*`
//!   extensions included).
//! - `openapi-v2.json.gz` and `openapi-v2.pb.gz`: `/openapi/v2` as JSON and as the protobuf
//!   kubectl asks for (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`), gzipped,
//!   captured with no CRD installed (upstream adds CRDs' schemas to it).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::Request;
use serde_json::{Map, Value, json};

use crate::upstream::{Upstream, UpstreamError};

/// What aggregated discovery v2 is asked for with (kubectl's Accept).
pub const AGGREGATED_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

#[derive(Debug, thiserror::Error)]
pub enum SurfaceError {
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    #[error("GET {path}: {status} {body}")]
    Status { path: String, status: u16, body: String },
    #[error("GET {path}: the body is not JSON: {source}")]
    Json {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One server's API surface.
#[derive(Debug, Clone, PartialEq)]
pub struct Surface {
    pub version: Value,
    /// `{"api", "apis", "resourceLists"}` (see the module's doc).
    pub discovery: Value,
    /// Table columns by `group/resource`.
    pub tables: BTreeMap<String, Value>,
    /// OpenAPI v3 documents by their `/openapi/v3` key (`api/v1`, `apis/G/V`, `version`, ...).
    pub openapi: BTreeMap<String, Value>,
    /// `/openapi/v2` as JSON.
    pub openapi_v2: Value,
    /// `/openapi/v2` as protobuf (gnostic's `openapi.v2.Document`).
    pub openapi_v2_protobuf: Vec<u8>,
}

/// What kubectl asks `/openapi/v2` for.
pub const OPENAPI_V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

async fn get_bytes(upstream: &Upstream, path: &str, accept: &str) -> Result<Bytes, SurfaceError> {
    let request = Request::get(path).header("accept", accept).body(Full::new(Bytes::new())).expect("a GET request");
    let response = upstream.send(request).await?;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    if status != 200 {
        return Err(SurfaceError::Status { path: path.to_string(), status, body: String::from_utf8_lossy(&bytes).into_owned() });
    }
    Ok(bytes)
}

async fn get(upstream: &Upstream, path: &str, accept: &str) -> Result<Value, SurfaceError> {
    let bytes = get_bytes(upstream, path, accept).await?;
    serde_json::from_slice(&bytes).map_err(|source| SurfaceError::Json { path: path.to_string(), source })
}

/// `api/v1` or `apis/G/V`.
fn gv_key(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

/// (group, version, resource, namespaced) of every listable resource in an aggregated document.
fn listable(aggregated: &Value) -> Vec<(String, String, String, bool)> {
    let mut out = vec![];
    for item in aggregated["items"].as_array().into_iter().flatten() {
        let group = item["metadata"]["name"].as_str().unwrap_or_default();
        for version in item["versions"].as_array().into_iter().flatten() {
            let v = version["version"].as_str().unwrap_or_default();
            for r in version["resources"].as_array().into_iter().flatten() {
                if r["verbs"].as_array().is_some_and(|vs| vs.iter().any(|x| x == "list")) {
                    let name = r["resource"].as_str().unwrap_or_default().to_string();
                    out.push((group.to_string(), v.to_string(), name, r["scope"] == "Namespaced"));
                }
            }
        }
    }
    out
}

/// The group versions of an aggregated document, in its order.
fn group_versions(aggregated: &Value) -> Vec<(String, String)> {
    let mut out = vec![];
    for item in aggregated["items"].as_array().into_iter().flatten() {
        let group = item["metadata"]["name"].as_str().unwrap_or_default();
        for version in item["versions"].as_array().into_iter().flatten() {
            out.push((group.to_string(), version["version"].as_str().unwrap_or_default().to_string()));
        }
    }
    out
}

impl Surface {
    /// Reads the surface from a running server.
    pub async fn capture(upstream: &Upstream) -> Result<Surface, SurfaceError> {
        let version = get(upstream, "/version", "application/json").await?;
        let api = get(upstream, "/api", AGGREGATED_ACCEPT).await?;
        let mut apis = get(upstream, "/apis", AGGREGATED_ACCEPT).await?;
        // Only what kube-apiserver serves itself: the groups of CRDs someone installed (kwok's
        // own, say) are not the built-in surface.
        let crds = get(upstream, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/json").await?;
        let custom: Vec<String> =
            crds["items"].as_array().into_iter().flatten().filter_map(|c| c["spec"]["group"].as_str()).map(String::from).collect();
        if let Some(items) = apis["items"].as_array_mut() {
            items.retain(|i| !custom.iter().any(|g| i["metadata"]["name"] == g.as_str()));
        }
        let mut lists = Map::new();
        for (group, version) in group_versions(&api).into_iter().chain(group_versions(&apis)) {
            let key = gv_key(&group, &version);
            lists.insert(key.clone(), get(upstream, &format!("/{key}"), "application/json").await?);
        }
        let mut tables = BTreeMap::new();
        for (group, version, resource, _) in listable(&api).into_iter().chain(listable(&apis)) {
            if tables.contains_key(&format!("{group}/{resource}")) {
                continue;
            }
            let table = get(upstream, &format!("/{}/{resource}?limit=1", gv_key(&group, &version)), TABLE_ACCEPT).await?;
            tables.insert(format!("{group}/{resource}"), table["columnDefinitions"].clone());
        }
        let index = get(upstream, "/openapi/v3", "application/json").await?;
        let mut openapi = BTreeMap::new();
        for (key, entry) in index["paths"].as_object().into_iter().flatten() {
            if custom.iter().any(|g| key.starts_with(&format!("apis/{g}/")) || *key == format!("apis/{g}")) {
                continue;
            }
            let url = entry["serverRelativeURL"].as_str().unwrap_or_default();
            openapi.insert(key.clone(), get(upstream, url, "application/json").await?);
        }
        // Upstream merges CRDs' schemas into /openapi/v2, and the protobuf cannot be taken
        // apart here: the built-in document is only captured with no CRD installed.
        if !custom.is_empty() {
            return Err(SurfaceError::Status {
                path: "/openapi/v2".into(),
                status: 409,
                body: format!("CRDs of {custom:?} are installed: capture /openapi/v2 on a control plane without CRDs"),
            });
        }
        let openapi_v2 = get(upstream, "/openapi/v2", "application/json").await?;
        let openapi_v2_protobuf = get_bytes(upstream, "/openapi/v2", OPENAPI_V2_PROTOBUF).await?.to_vec();
        let discovery = json!({"api": api, "apis": apis, "resourceLists": lists});
        Ok(Surface { version, discovery, tables, openapi, openapi_v2, openapi_v2_protobuf })
    }

    /// Reads the committed files from `dir` (`apiserver/surface`).
    pub fn load(dir: &Path) -> Result<Surface, SurfaceError> {
        let read = |name: &str| -> Result<Vec<u8>, SurfaceError> {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| SurfaceError::Io { what: "reading", path, source })
        };
        let json = |name: &str, bytes: &[u8]| -> Result<Value, SurfaceError> {
            serde_json::from_slice(bytes).map_err(|source| SurfaceError::Json { path: dir.join(name).display().to_string(), source })
        };
        let gunzipped = |name: &str| -> Result<Vec<u8>, SurfaceError> {
            let mut out = Vec::new();
            let raw = read(name)?;
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&raw[..]), &mut out).map_err(|source| SurfaceError::Io {
                what: "gunzipping",
                path: dir.join(name),
                source,
            })?;
            Ok(out)
        };
        let value_map = |v: Value| -> BTreeMap<String, Value> { v.as_object().cloned().unwrap_or_default().into_iter().collect() };
        Ok(Surface {
            version: json("version.json", &read("version.json")?)?,
            discovery: json("discovery.json", &read("discovery.json")?)?,
            tables: value_map(json("tables.json", &read("tables.json")?)?),
            openapi: value_map(json(OPENAPI_FILE, &gunzipped(OPENAPI_FILE)?)?),
            openapi_v2: json(OPENAPI_V2_FILE, &gunzipped(OPENAPI_V2_FILE)?)?,
            openapi_v2_protobuf: gunzipped(OPENAPI_V2_PROTOBUF_FILE)?,
        })
    }

    /// Writes the files into `dir`: pretty JSON, and the OpenAPI documents
    /// gzipped (compact JSON, 9 MB of text with upstream's descriptions).
    pub fn write(&self, dir: &Path) -> Result<(), SurfaceError> {
        std::fs::create_dir_all(dir).map_err(|source| SurfaceError::Io { what: "creating", path: dir.to_path_buf(), source })?;
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).map_err(|source| SurfaceError::Io { what: "writing", path, source })
        };
        let pretty = |v: &Value| format!("{}\n", serde_json::to_string_pretty(v).unwrap_or_default());
        write("version.json", pretty(&self.version).as_bytes())?;
        write("discovery.json", pretty(&self.discovery).as_bytes())?;
        write("tables.json", pretty(&json!(self.tables)).as_bytes())?;
        let gzipped = |name: &str, bytes: &[u8]| {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            let io = |source| SurfaceError::Io { what: "gzipping", path: dir.join(name), source };
            gz.write_all(bytes).map_err(io)?;
            write(name, &gz.finish().map_err(io)?)
        };
        gzipped(OPENAPI_FILE, serde_json::to_string(&self.openapi).unwrap_or_default().as_bytes())?;
        gzipped(OPENAPI_V2_FILE, serde_json::to_string(&self.openapi_v2).unwrap_or_default().as_bytes())?;
        gzipped(OPENAPI_V2_PROTOBUF_FILE, &self.openapi_v2_protobuf)
    }

    /// What differs from `other`, one line per part (empty when equal). The
    /// build fields of `/version` (commit, date, Go version, platform) are
    /// not compared: they name a build, not the API.
    pub fn differences(&self, other: &Surface) -> Vec<String> {
        let mut out = vec![];
        let api_version = |v: &Value| {
            let mut v = v.clone();
            if let Value::Object(m) = &mut v {
                m.retain(|k, _| !["gitCommit", "buildDate", "goVersion", "compiler", "platform"].contains(&k.as_str()));
            }
            v
        };
        if api_version(&self.version) != api_version(&other.version) {
            out.push(format!("/version: {} against {}", self.version, other.version));
        }
        for part in ["api", "apis"] {
            if self.discovery[part] != other.discovery[part] {
                out.push(format!("aggregated discovery /{part}"));
            }
        }
        let keys = |a: &Map<String, Value>, b: &Map<String, Value>| a.keys().chain(b.keys()).cloned().collect::<std::collections::BTreeSet<_>>();
        let (la, lb) = (
            self.discovery["resourceLists"].as_object().cloned().unwrap_or_default(),
            other.discovery["resourceLists"].as_object().cloned().unwrap_or_default(),
        );
        for key in keys(&la, &lb) {
            if la.get(&key) != lb.get(&key) {
                out.push(format!("APIResourceList /{key}"));
            }
        }
        for key in self.tables.keys().chain(other.tables.keys()).collect::<std::collections::BTreeSet<_>>() {
            if self.tables.get(key) != other.tables.get(key) {
                out.push(format!("Table columns of {key}"));
            }
        }
        for key in self.openapi.keys().chain(other.openapi.keys()).collect::<std::collections::BTreeSet<_>>() {
            if self.openapi.get(key) != other.openapi.get(key) {
                out.push(format!("OpenAPI v3 document {key}"));
            }
        }
        if self.openapi_v2 != other.openapi_v2 {
            out.push("/openapi/v2 (JSON)".into());
        }
        if self.openapi_v2_protobuf != other.openapi_v2_protobuf {
            out.push("/openapi/v2 (protobuf)".into());
        }
        out
    }
}

/// The gzipped OpenAPI documents' file name.
pub const OPENAPI_FILE: &str = "openapi-v3.json.gz";
/// The gzipped `/openapi/v2` JSON document.
pub const OPENAPI_V2_FILE: &str = "openapi-v2.json.gz";
/// The gzipped `/openapi/v2` protobuf document.
pub const OPENAPI_V2_PROTOBUF_FILE: &str = "openapi-v2.pb.gz";

/// `apiserver/surface`.
pub fn committed_dir() -> PathBuf {
    real_cluster::binaries::workspace_root().join("apiserver/surface")
}

/// Captures the surface of `plane`'s kube-apiserver.
pub async fn capture_plane(plane: &real_cluster::ControlPlane) -> Result<Surface, crate::RunError> {
    let kubeconfig = std::fs::read_to_string(&plane.kubeconfig).map_err(crate::io("reading the control plane's kubeconfig"))?;
    let token = kubeconfig.lines().find_map(|l| l.trim().strip_prefix("token: ")).ok_or(crate::RunError::NoToken)?;
    let real = Upstream::https(&plane.server, &plane.pki.ca_pem, token.trim())?;
    Ok(Surface::capture(&real).await?)
}
