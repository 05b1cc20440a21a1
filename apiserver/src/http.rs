//! HTTP routing: maps kube-apiserver URLs, methods, query parameters and media types onto
//! [`crate::rest`], [`crate::watch`], [`crate::discovery`], [`crate::openapi`] and
//! [`crate::table`], and every error onto a `Status` body.

use crate::auth::UserInfo;
use crate::discovery;
use crate::faults::{FaultAction, FaultId, RequestInfo};
use crate::openapi;
use crate::patch::PatchType;
use crate::rbac::Attributes;
use crate::resources::Resource;
use crate::rest::{Core, DeleteOptions, Deleted, FieldValidation, ListOptions, Sub, WriteOptions};
use crate::selector::{FieldSelector, LabelSelector, supported_fields};
use crate::status::{ApiError, Result};
use crate::table;
use crate::watch::{self, WatchParams};
use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use serde_json::Value;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// Response body type of every endpoint.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

fn full(code: StatusCode, content_type: &str, bytes: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(bytes)).boxed_unsync());
    *r.status_mut() = code;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_str(content_type).expect("content type"));
    r
}

fn json(code: u16, v: &Value) -> Response<Body> {
    full(StatusCode::from_u16(code).unwrap_or(StatusCode::OK), "application/json", crate::wire::to_vec(v))
}

fn error(e: &ApiError) -> Response<Body> {
    json(e.code, &e.to_status())
}

struct Req<'a> {
    method: &'a Method,
    query: HashMap<String, String>,
    accept: String,
    content_type: String,
    user_agent: String,
    body: &'a Bytes,
}

impl Req<'_> {
    fn q(&self, k: &str) -> Option<&str> {
        self.query.get(k).map(String::as_str)
    }

    fn flag(&self, k: &str) -> bool {
        matches!(self.q(k), Some("true") | Some("1"))
    }

    fn wants_table(&self) -> bool {
        self.accept.contains("as=Table")
    }

    fn wants_metadata(&self) -> bool {
        self.accept.contains("as=PartialObjectMetadata")
    }

    fn write_options(&self) -> Result<WriteOptions> {
        let manager = match self.q("fieldManager") {
            Some(m) if !m.is_empty() => m.to_string(),
            _ => self.user_agent.split('/').next().unwrap_or_default().to_string(),
        };
        let options = match *self.method {
            Method::POST => "CreateOptions",
            Method::PUT => "UpdateOptions",
            _ => "PatchOptions",
        };
        let field_validation = FieldValidation::parse(self.q("fieldValidation"), options)?;
        // A JSON body, or a merge or strategic patch, may name a member twice (serde_json keeps
        // the last, as Go's decoder does); upstream's strict decoder reports each one. (An
        // apply body is YAML, whose duplicates upstream words as YAML errors: not reported.)
        let json_body = match *self.method {
            Method::POST | Method::PUT => !self.content_type.contains("yaml") && !self.content_type.contains("protobuf"),
            Method::PATCH => self.content_type.contains("merge-patch"),
            _ => false,
        };
        let duplicate_fields =
            if json_body && field_validation != FieldValidation::Ignore { crate::field_validation::duplicate_fields(self.body) } else { Vec::new() };
        Ok(WriteOptions {
            dry_run: self.q("dryRun") == Some("All"),
            field_manager: manager,
            force: self.flag("force"),
            field_validation,
            duplicate_fields,
            view: None,
        })
    }

    fn list_options(&self, res: &Resource) -> Result<ListOptions> {
        let labels = LabelSelector::parse(self.q("labelSelector").unwrap_or_default()).map_err(|e| ApiError::bad_request(e.to_string()))?;
        let fields = FieldSelector::parse(self.q("fieldSelector").unwrap_or_default())
            .map_err(|e| ApiError::bad_request(e.to_string()))?
            .for_resource(&res.group, &res.plural);
        let supported = if res.custom { &["metadata.name", "metadata.namespace"][..] } else { supported_fields(&res.group, &res.plural) };
        if let Some(f) = fields.fields().find(|f| !supported.contains(f)) {
            return Err(ApiError::bad_request(unknown_field_selector(f, supported)));
        }
        Ok(ListOptions {
            labels,
            fields,
            limit: self.q("limit").and_then(|l| l.parse().ok()).unwrap_or(0),
            continue_token: self.q("continue").map(String::from),
        })
    }

    /// An object answer, transformed as the Accept header asks (`as=Table`,
    /// `as=PartialObjectMetadata`) for every verb, as upstream's `transformResponseObject`
    /// does; a Status (a DELETE's Success) passes unchanged.
    fn object(&self, core: &Core, res: &Resource, code: u16, obj: Value) -> Response<Body> {
        if is_status(&obj) {
            return json(code, &obj);
        }
        if self.wants_table() {
            let meta = serde_json::json!({"resourceVersion": obj["metadata"]["resourceVersion"]});
            let include = self.q("includeObject").unwrap_or("Metadata");
            return json(code, &table::to_table(res, &[obj], meta, include, core.config.clock.now()));
        }
        if self.wants_metadata() {
            return json(code, &crate::wire::partial_metadata(&obj));
        }
        json(code, &obj)
    }

    fn body_json(&self) -> Result<Value> {
        if self.content_type.contains("protobuf") {
            // Every kind of k8s.io/api decodes; other kinds have no protobuf encoding (415).
            return crate::protobuf::decode(self.body).map_err(|e| match e {
                crate::protobuf::Error::Unsupported(ref what) => {
                    tracing::debug!(%what, "protobuf body not decodable");
                    ApiError::unsupported_media_type(&["application/json", "application/yaml"])
                }
                crate::protobuf::Error::Envelope(_) | crate::protobuf::Error::Object { .. } => ApiError::bad_request(e.to_string()),
            });
        }
        if self.content_type.contains("cbor") {
            return Err(ApiError::unsupported_media_type(&["application/json", "application/yaml"]));
        }
        if self.content_type.contains("yaml") {
            crate::yaml::from_slice(self.body).map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
        } else {
            serde_json::from_slice(self.body).map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))
        }
    }

    fn delete_options(&self) -> Result<DeleteOptions> {
        let mut o = DeleteOptions {
            propagation: self.q("propagationPolicy").map(String::from),
            dry_run: self.q("dryRun") == Some("All"),
            grace_period: self.q("gracePeriodSeconds").and_then(|g| g.parse().ok()),
            ..Default::default()
        };
        o.orphan_dependents = self.q("orphanDependents").and_then(|v| v.parse().ok());
        if o.orphan_dependents == Some(true) {
            o.propagation = Some("Orphan".into());
        }
        if !self.body.is_empty() {
            // Go's typed clients send DeleteOptions in their content type, protobuf included.
            let b: Value = if self.content_type.contains("protobuf") {
                self.body_json()?
            } else {
                serde_json::from_slice(self.body).map_err(|e| ApiError::bad_request(e.to_string()))?
            };
            if let Some(p) = b.get("propagationPolicy").and_then(Value::as_str) {
                o.propagation = Some(p.into());
            }
            if let Some(orphan) = b.get("orphanDependents").and_then(Value::as_bool) {
                o.orphan_dependents = Some(orphan);
                if orphan {
                    o.propagation = Some("Orphan".into());
                }
            }
            if let Some(g) = b.get("gracePeriodSeconds").and_then(Value::as_i64) {
                o.grace_period = Some(g);
            }
            o.uid = b.pointer("/preconditions/uid").and_then(Value::as_str).map(String::from);
            o.resource_version = b.pointer("/preconditions/resourceVersion").and_then(Value::as_str).map(String::from);
            if let Some(d) = b.get("dryRun").and_then(Value::as_array) {
                o.dry_run |= d.iter().any(|x| x == "All");
            }
        }
        Ok(o)
    }
}

/// Serve one request.
pub async fn handle(core: Arc<Core>, req: Request<Bytes>, server_address: &str) -> Response<Body> {
    let header = |h: header::HeaderName| req.headers().get(h).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let r = Req {
        method: req.method(),
        query: req.uri().query().map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default(),
        accept: header(header::ACCEPT),
        content_type: header(header::CONTENT_TYPE),
        user_agent: header(header::USER_AGENT),
        body: req.body(),
    };
    let path = req.uri().path().to_string();
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let aggregated = r.accept.contains("as=APIGroupDiscoveryList") && r.accept.contains("v=v2;") && core.config.aggregated_discovery;
    let get = r.method == Method::GET;
    let user = match core.access.identify(&core.store, req.headers()) {
        Ok(user) => user,
        Err(e) => return error(&e),
    };
    if !matches!(segs.as_slice(), ["api", "v1", _, ..] | ["apis", _, _, _, ..]) {
        let attrs = Attributes::NonResource { verb: r.method.as_str().to_ascii_lowercase(), path: path.clone() };
        if let Err(e) = core.access.authorize(&core.store, &user, &attrs, "") {
            return error(&e);
        }
    }
    let (result, warnings) = crate::warning::collect(async {
        match segs.as_slice() {
            ["version"] if get => Ok(json(200, &discovery::version())),
            ["healthz"] | ["livez"] | ["readyz"] if get => Ok(full(StatusCode::OK, "text/plain; charset=utf-8", b"ok".to_vec())),
            ["api"] if get && aggregated => Ok(aggregated_response(discovery::aggregated(&core.registry, true))),
            ["api"] if get => Ok(json(200, &discovery::core_versions(server_address))),
            ["apis"] if get && aggregated => Ok(aggregated_response(discovery::aggregated(&core.registry, false))),
            ["apis"] if get => Ok(json(200, &discovery::group_list(&core.registry))),
            ["apis", g] if get => discovery::group(&core.registry, g).map(|v| json(200, &v)).ok_or_else(ApiError::no_route),
            ["api", "v1"] if get => discovery::resource_list(&core.registry, "", "v1").map(|v| json(200, &v)).ok_or_else(ApiError::no_route),
            ["apis", g, v] if get => discovery::resource_list(&core.registry, g, v).map(|v| json(200, &v)).ok_or_else(ApiError::no_route),
            // Upstream answers the index as text/plain (its handler sets no content type).
            ["openapi", "v3"] if get => Ok(full(StatusCode::OK, "text/plain; charset=utf-8", crate::wire::to_vec(&openapi::root(&core.registry)))),
            ["openapi", "v2"] if get => Ok(match crate::openapi_v2::answer(&core.registry, &r.accept) {
                crate::openapi_v2::Answer::Json(doc) => json(200, &doc),
                crate::openapi_v2::Answer::Protobuf(bytes) => full(StatusCode::OK, crate::openapi_v2::PROTOBUF, bytes.to_vec()),
                crate::openapi_v2::Answer::NotAcceptable => full(StatusCode::NOT_ACCEPTABLE, "text/plain; charset=utf-8", Vec::new()),
            }),
            ["openapi", "v3", key @ ..] if get && !key.is_empty() => {
                openapi::document(&core.registry, &key.join("/")).map(|d| json(200, &d)).ok_or_else(ApiError::no_route)
            }
            ["debug", "faults", rest @ ..] => debug_faults(&core, rest, &r),
            ["api", "v1", rest @ ..] => resource(&core, "", "v1", rest, &r, &user).await,
            ["apis", g, v, rest @ ..] => resource(&core, g, v, rest, &r, &user).await,
            _ => Err(ApiError::no_route()),
        }
    })
    .await;
    let mut resp = result.unwrap_or_else(|e| error(&e));
    for w in warnings {
        if let Ok(value) = HeaderValue::from_str(&crate::warning::header_value(&w)) {
            resp.headers_mut().append(header::WARNING, value);
        }
    }
    tracing::debug!(method = %req.method(), uri = %req.uri(), status = resp.status().as_u16(), "request");
    resp
}

/// `/debug/faults`: GET lists the rules and their counters, POST adds rules (a spec, `;`- or
/// newline-separated specs, or JSON `{"spec": ..}` / `{"specs": [..]}`, optionally with
/// `"seed"`), DELETE clears them all (or one: `/debug/faults/ID`).
fn debug_faults(core: &Core, rest: &[&str], r: &Req<'_>) -> Result<Response<Body>> {
    let faults = &core.faults;
    match (r.method, rest) {
        (&Method::GET, []) => Ok(json(200, &faults.to_json())),
        (&Method::DELETE, []) => {
            faults.clear_all();
            Ok(json(200, &faults.to_json()))
        }
        (&Method::DELETE, [id]) => {
            let id: u64 = id.parse().map_err(|_| ApiError::bad_request(format!("fault id `{id}` is not a number")))?;
            if !faults.clear(FaultId::from_raw(id)) {
                return Err(ApiError::not_found("", "faults", &id.to_string()));
            }
            Ok(json(200, &faults.to_json()))
        }
        (&Method::POST, []) => {
            let text = std::str::from_utf8(r.body).map_err(|_| ApiError::bad_request("fault specs must be UTF-8 text or JSON"))?;
            let specs = if text.trim_start().starts_with('{') {
                let v: Value = serde_json::from_str(text).map_err(|e| ApiError::bad_request(format!("fault request JSON: {e}")))?;
                if let Some(seed) = v.get("seed") {
                    faults.set_seed(seed.as_u64().ok_or_else(|| ApiError::bad_request("seed must be a non-negative integer"))?);
                }
                let list: Vec<&str> = match (v.get("spec"), v.get("specs")) {
                    (Some(s), _) => vec![s.as_str().ok_or_else(|| ApiError::bad_request("spec must be a string"))?],
                    (None, Some(Value::Array(a))) => {
                        a.iter().map(|s| s.as_str().ok_or_else(|| ApiError::bad_request("specs must be strings"))).collect::<Result<_>>()?
                    }
                    _ if v.get("seed").is_some() => vec![],
                    _ => {
                        return Err(ApiError::bad_request(r#"expected {"spec": "500:share=0.05"}, {"specs": [..]} or {"seed": N}"#));
                    }
                };
                list.join(";")
            } else {
                text.replace('\n', ";")
            };
            let parsed = crate::faults::parse_list(&specs).map_err(|e| ApiError::bad_request(e.to_string()))?;
            for spec in &parsed {
                faults.inject_spec(spec);
            }
            Ok(json(201, &faults.to_json()))
        }
        (m, []) => Err(ApiError::method_not_allowed(m.as_str())),
        _ => Err(ApiError::no_route()),
    }
}

/// Subresources upstream serves that need a container runtime or a network path to a node;
/// the embedded cluster runs neither.
const RUNTIME_SUBRESOURCES: &[(&str, &str, &str)] = &[
    ("", "pods", "exec"),
    ("", "pods", "attach"),
    ("", "pods", "portforward"),
    ("", "pods", "proxy"),
    ("", "services", "proxy"),
    ("", "nodes", "proxy"),
];

/// The answer to a subresource discovery lists (as upstream's) that this server does not
/// serve (`pods/exec`, `pods/resize`, ...): once the object is found, a 405 Status naming it,
/// so `kubectl exec` says what is missing rather than "could not find the requested resource".
fn unserved_subresource(core: &Core, res: &Resource, ns: &str, name: &str, sub: &str) -> ApiError {
    if let Err(e) = core.get(res, ns, name) {
        return e;
    }
    let why = if RUNTIME_SUBRESOURCES.contains(&(res.group.as_str(), res.plural.as_str(), sub)) {
        "it runs no containers and has no network path to nodes"
    } else {
        "it is listed as upstream lists it, but not implemented"
    };
    let mut e = ApiError::method_not_allowed("");
    e.message = format!("{}/{sub} is not supported by the embedded API server: {why}", res.plural);
    e.name = Some(name.to_string());
    e.group = Some(res.group.clone());
    e.kind = Some(format!("{}/{sub}", res.plural));
    e
}

/// How long a list or watch from a resourceVersion the store has not reached waits for it
/// before the 504, as upstream's watch cache waits (`blockTimeout`, 3 s).
const RESOURCE_VERSION_WAIT: Duration = Duration::from_secs(3);

/// A list or watch from `resourceVersion` N needs the store at N at least: it waits for a
/// commit to reach it (a client that read N from another server), then answers 504 `Too large
/// resource version`, as upstream. A list with `resourceVersionMatch=Exact` of a version older
/// than the event window is 410 `Expired`, as upstream's for a compacted one.
async fn resource_version_reached(core: &Core, r: &Req<'_>) -> Result<()> {
    let Some(wanted) = r.q("resourceVersion").and_then(|v| v.parse::<u64>().ok()).filter(|v| *v > 0) else { return Ok(()) };
    if r.q("resourceVersionMatch") == Some("Exact") && !r.flag("watch") && wanted < core.store.window_start() {
        return Err(ApiError::expired("The resourceVersion for the provided list is too old."));
    }
    let mut commits = core.store.subscribe();
    let deadline = tokio::time::sleep(RESOURCE_VERSION_WAIT);
    tokio::pin!(deadline);
    loop {
        let current = core.store.current_rv();
        if current >= wanted {
            return Ok(());
        }
        tokio::select! {
            _ = &mut deadline => return Err(ApiError::too_large_resource_version(wanted, current)),
            changed = commits.changed() => {
                if changed.is_err() {
                    return Err(ApiError::too_large_resource_version(wanted, current));
                }
            }
        }
    }
}

/// Whether a body is a `v1 Status` (never transformed, as upstream's `doTransformObject`).
fn is_status(v: &Value) -> bool {
    v.get("kind").and_then(Value::as_str) == Some("Status") && v.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

fn aggregated_response(v: Value) -> Response<Body> {
    full(StatusCode::OK, AGGREGATED, crate::wire::to_vec(&v))
}

/// Requests answered by computing rather than by the stored-object verbs: `bindings`,
/// `componentstatuses`, and the subresources `pods/binding`, `pods/log`, `pods/eviction` and
/// `serviceaccounts/token`. `None` for everything else.
async fn answered(core: &Core, res: &Resource, ns: &str, t: &Target<'_>, r: &Req<'_>) -> Option<Result<Response<Body>>> {
    let post_only = || if r.method == Method::POST { Ok(()) } else { Err(ApiError::method_not_allowed(r.method.as_str())) };
    let name = t.name.unwrap_or_default();
    let answer = match (res.group.as_str(), res.plural.as_str(), t.sub) {
        ("", "bindings", None) => {
            async {
                let body = r.body_json()?;
                let pod = body.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
                let pods = core.registry.find("", "v1", "pods").expect("pods are built in");
                Ok(json(201, &core.bind(&pods, ns, &pod, &body, &r.write_options()?).await?))
            }
            .await
        }
        ("", "componentstatuses", None) => core.component_statuses(t.name).map(|v| json(200, &v)),
        ("", "pods", Some("binding")) => {
            async {
                post_only()?;
                Ok(json(201, &core.bind(res, ns, name, &r.body_json()?, &r.write_options()?).await?))
            }
            .await
        }
        ("", "pods", Some("eviction")) => {
            post_only().and_then(|()| Ok(json(201, &core.evict(res, ns, name, &r.body_json()?, r.write_options()?.dry_run)?)))
        }
        ("", "pods", Some("log")) if r.method == Method::GET => {
            core.pod_log(res, ns, name, r.q("container"), r.flag("previous")).map(|text| full(StatusCode::OK, "text/plain", text.into_bytes()))
        }
        ("", "serviceaccounts", Some("token")) => post_only().and_then(|()| Ok(json(201, &core.request_token(res, ns, name, &r.body_json()?)?))),
        _ => return None,
    };
    Some(answer)
}

struct Target<'a> {
    plural: &'a str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    sub: Option<&'a str>,
}

fn parse_target<'a>(rest: &[&'a str]) -> Option<Target<'a>> {
    let t = |plural, namespace, name, sub| Some(Target { plural, namespace, name, sub });
    match *rest {
        [plural] => t(plural, None, None, None),
        ["namespaces", ns, plural] if !matches!(plural, "status" | "finalize") => t(plural, Some(ns), None, None),
        ["namespaces", ns, plural, name] => t(plural, Some(ns), Some(name), None),
        ["namespaces", ns, plural, name, sub] => t(plural, Some(ns), Some(name), Some(sub)),
        [plural, name] => t(plural, None, Some(name), None),
        [plural, name, sub] => t(plural, None, Some(name), Some(sub)),
        _ => None,
    }
}

async fn resource(core: &Arc<Core>, group: &str, version: &str, rest: &[&str], r: &Req<'_>, user: &UserInfo) -> Result<Response<Body>> {
    let t = parse_target(rest).ok_or_else(ApiError::no_route)?;
    let res = core.registry.find(group, version, t.plural).ok_or_else(ApiError::no_route)?;
    if (!res.namespaced && t.namespace.is_some()) || (res.namespaced && t.namespace.is_none() && t.name.is_some()) {
        return Err(ApiError::no_route());
    }
    let ns = t.namespace.unwrap_or_default();
    let verb = match (r.method, t.name) {
        (&Method::GET, None) if r.flag("watch") => "watch",
        (&Method::GET, None) => "list",
        (&Method::GET, Some(_)) => "get",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, None) => "deletecollection",
        (&Method::DELETE, Some(_)) => "delete",
        _ => "",
    };
    // As upstream's RequestInfo: a list or watch of one name (fieldSelector metadata.name=X)
    // is authorized for that name, so `resourceNames` rules cover informers of one object.
    let one_name = r.q("fieldSelector").and_then(|f| f.strip_prefix("metadata.name=")).filter(|n| !n.contains(','));
    let attrs = Attributes::Resource {
        verb: verb.into(),
        group: res.group.clone(),
        resource: res.plural.clone(),
        subresource: t.sub.unwrap_or_default().into(),
        namespace: ns.into(),
        name: t.name.or(one_name).unwrap_or_default().into(),
    };
    core.access.authorize(&core.store, user, &attrs, &crate::status::qualified(&res.group, &res.plural))?;
    if t.sub.is_none() && !verb.is_empty() && !res.serves(verb) {
        return Err(ApiError::method_not_allowed(r.method.as_str()));
    }
    if res.ephemeral {
        if t.name.is_some() {
            return Err(ApiError::method_not_allowed(r.method.as_str()));
        }
        return Ok(json(201, &crate::reviews::answer(core, &res, ns, r.body_json().unwrap_or_else(|_| serde_json::json!({})), user)?));
    }
    if let Some(answer) = answered(core, &res, ns, &t, r).await {
        return answer;
    }
    let sub = match t.sub {
        None => Sub::Main,
        Some("status") if res.status => Sub::Status,
        Some("scale") if res.scale.is_some() => Sub::Scale,
        Some(name) => match res.subresource(name).map(|s| s.name) {
            Some("ephemeralcontainers") => Sub::EphemeralContainers,
            Some("approval") => Sub::Approval,
            Some("finalize") if r.method == Method::PUT => Sub::Finalize,
            Some("finalize") => return Err(ApiError::method_not_allowed(r.method.as_str())),
            Some(_) => return Err(unserved_subresource(core, &res, ns, t.name.unwrap_or_default(), name)),
            None => return Err(ApiError::no_route()),
        },
    };
    let method = r.method.clone();
    let resuming = verb == "watch" && !matches!(r.q("resourceVersion"), None | Some("") | Some("0"));
    let decision = core.faults.decide(&RequestInfo { verb, group: &res.group, resource: &res.plural, resuming });
    if !decision.latency.is_zero() {
        tokio::time::sleep(decision.latency).await;
    }
    match decision.action {
        None | Some(FaultAction::Latency(_)) | Some(FaultAction::DropWatchAfter(_)) => {}
        Some(FaultAction::Error { code, reason, message }) => {
            let mut e = ApiError::internal("");
            e.code = code;
            e.reason = reason;
            e.message = message;
            return Err(e);
        }
        Some(FaultAction::ExpireWatch) if verb == "watch" => {
            let rv = r.q("resourceVersion").unwrap_or_default();
            let e = ApiError::expired(format!("too old resource version: {rv} ({}) (injected fault)", core.store.current_rv()));
            let line = crate::wire::to_vec(&serde_json::json!({"type": "ERROR", "object": e.to_status()}));
            return Ok(full(StatusCode::OK, "application/json", line));
        }
        Some(FaultAction::ExpireWatch) => return Err(ApiError::expired("injected fault")),
        Some(FaultAction::CloseWatch) => {
            return Ok(full(StatusCode::OK, "application/json", vec![]));
        }
    }
    if let Some(storage) = core.storage_of(&res) {
        // A view over another resource's storage: convert bodies in, results out.
        let to_storage = |v: Value| crate::convert::to_storage(&res, v);
        let view = |v: Value| core.present(&res, v);
        let write_options = || r.write_options().map(|o| WriteOptions { view: Some(res.clone()), ..o });
        match (&method, t.name) {
            (&Method::POST, None) => {
                return Ok(r.object(core, &res, 201, view(core.create(&storage, ns, to_storage(r.body_json()?), &write_options()?).await?)));
            }
            (&Method::PUT, Some(name)) => {
                return Ok(r.object(
                    core,
                    &res,
                    200,
                    view(core.update(&storage, ns, name, to_storage(r.body_json()?), sub, &write_options()?).await?),
                ));
            }
            (&Method::PATCH, Some(name)) => {
                let ptype = PatchType::from_content_type(&r.content_type).ok_or_else(ApiError::unsupported_patch_type)?;
                let mut opts = write_options()?;
                if ptype == PatchType::Apply && r.q("fieldManager").is_none_or(str::is_empty) {
                    opts.field_manager.clear();
                }
                return Ok(r.object(core, &res, 200, core.patch_view(&res, &storage, ns, name, ptype, r.body, &opts).await?));
            }
            (&Method::DELETE, Some(name)) => {
                let opts = r.delete_options()?;
                let deleted = core.delete(&storage, ns, name, &opts)?;
                let code = opts.status_code(&deleted);
                return match deleted {
                    Deleted::Now(v) if is_status(&v) => Ok(json(code, &v)),
                    Deleted::Now(v) | Deleted::Pending(v) => Ok(r.object(core, &res, code, view(v))),
                };
            }
            _ => {}
        }
    }
    match (method, t.name) {
        (Method::GET, None) => {
            let lo = r.list_options(&res)?;
            resource_version_reached(core, r).await?;
            if r.flag("watch") {
                return watch_response(core, res, t.namespace, lo, r, decision.drop_watch);
            }
            let list = core.list(&res, t.namespace, &lo)?;
            if r.wants_table() {
                let items = list["items"].as_array().cloned().unwrap_or_default();
                return Ok(json(
                    200,
                    &table::to_table(&res, &items, list["metadata"].clone(), r.q("includeObject").unwrap_or("Metadata"), core.config.clock.now()),
                ));
            }
            if r.wants_metadata() {
                let items: Vec<Value> = list["items"].as_array().cloned().unwrap_or_default().iter().map(crate::wire::partial_metadata).collect();
                return Ok(json(
                    200,
                    &serde_json::json!({
                        "kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": list["metadata"], "items": items,
                    }),
                ));
            }
            Ok(json(200, &without_item_type_meta(&res, list)))
        }
        (Method::GET, Some(name)) => {
            if sub == Sub::Scale {
                return Ok(json(200, &core.get_scale(&res, ns, name)?));
            }
            Ok(r.object(core, &res, 200, core.get(&res, ns, name)?))
        }
        (Method::POST, None) => {
            let body = r.body_json()?;
            Ok(r.object(core, &res, 201, core.create(&res, ns, body, &r.write_options()?).await?))
        }
        (Method::PUT, Some(name)) => {
            if sub == Sub::Scale {
                return Ok(json(200, &core.update_scale(&res, ns, name, None, r.body, &r.write_options()?).await?));
            }
            let body = r.body_json()?;
            Ok(r.object(core, &res, 200, core.update(&res, ns, name, body, sub, &r.write_options()?).await?))
        }
        (Method::PATCH, Some(name)) => {
            let ptype = PatchType::from_content_type(&r.content_type).ok_or_else(ApiError::unsupported_patch_type)?;
            if sub == Sub::Scale {
                return Ok(json(200, &core.update_scale(&res, ns, name, Some(ptype), r.body, &r.write_options()?).await?));
            }
            let mut opts = r.write_options()?;
            if ptype == PatchType::Apply && r.q("fieldManager").is_none_or(str::is_empty) {
                opts.field_manager.clear(); // apply needs an explicit manager, as upstream
            }
            // An apply that creates the object answers 201 Created, as upstream's patcher does.
            let creates = ptype == PatchType::Apply && sub == Sub::Main && core.get(&res, ns, name).is_err();
            let object = core.patch(&res, ns, name, ptype, r.body, sub, &opts).await?;
            Ok(r.object(core, &res, if creates { 201 } else { 200 }, object))
        }
        (Method::DELETE, Some(name)) if sub == Sub::Main => {
            let opts = r.delete_options()?;
            let deleted = core.delete(&res, ns, name, &opts)?;
            let code = opts.status_code(&deleted);
            match deleted {
                Deleted::Now(v) | Deleted::Pending(v) => Ok(r.object(core, &res, code, v)),
            }
        }
        (Method::DELETE, None) => {
            let lo = r.list_options(&res)?;
            Ok(json(200, &without_item_type_meta(&res, core.delete_collection(&res, t.namespace, &lo, &r.delete_options()?)?)))
        }
        (m, _) => Err(ApiError::method_not_allowed(m.as_str())),
    }
}

/// Upstream's refusal of a field selector naming a field the resource does not select on,
/// listing the ones it does (sorted, quoted).
fn unknown_field_selector(field: &str, supported: &[&str]) -> String {
    let mut known: Vec<&str> = supported.to_vec();
    known.sort_unstable();
    let known: Vec<String> = known.iter().map(|f| format!("{f:?}")).collect();
    format!("{field:?} is not a known field selector: only {}", known.join(", "))
}

fn watch_response(
    core: &Arc<Core>,
    res: Resource,
    ns: Option<&str>,
    lo: ListOptions,
    r: &Req<'_>,
    drop: Option<(FaultId, Duration)>,
) -> Result<Response<Body>> {
    let params = WatchParams {
        resource_version: r.q("resourceVersion").unwrap_or_default().to_string(),
        send_initial_events: r.flag("sendInitialEvents"),
        bookmarks: r.flag("allowWatchBookmarks"),
        timeout: r.q("timeoutSeconds").and_then(|t| t.parse().ok()).map(Duration::from_secs),
        namespace: ns.map(String::from),
        labels: lo.labels,
        fields: lo.fields,
        table: r.wants_table().then(|| r.q("includeObject").unwrap_or("Metadata").to_string()),
        metadata_only: r.wants_metadata(),
    };
    if params.send_initial_events && r.q("resourceVersionMatch") != Some("NotOlderThan") {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![crate::status::Cause::new(
                "FieldValueForbidden",
                "Forbidden: sendInitialEvents is forbidden for watch unless resourceVersionMatch is set to NotOlderThan",
                "sendInitialEvents",
            )],
        ));
    }
    let stream = watch::watch(core.clone(), res, params)?;
    // An injected drop ends the stream after a while, as a load balancer or a restarting
    // apiserver would; counted only when it happens (not when the watch ended first).
    let faults = core.faults.clone();
    let dropped = async move {
        match drop {
            Some((id, after)) => {
                tokio::time::sleep(after).await;
                faults.count(id);
            }
            None => std::future::pending().await,
        }
    };
    let stream = stream.take_until(Box::pin(dropped));
    let body = StreamBody::new(stream.map(|b| Ok::<_, Infallible>(http_body::Frame::data(b))));
    let mut resp = Response::new(BodyExt::boxed_unsync(body));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(resp)
}

/// A list as upstream encodes it: a built-in list is encoded from Go structs whose items carry
/// an empty TypeMeta, so `apiVersion` and `kind` are on the list only; custom resources are
/// unstructured and keep them on every item.
fn without_item_type_meta(res: &Resource, mut list: Value) -> Value {
    if !res.custom {
        for item in list["items"].as_array_mut().into_iter().flatten() {
            if let Some(item) = item.as_object_mut() {
                item.remove("apiVersion");
                item.remove("kind");
            }
        }
    }
    list
}
