//! Who is asking: authentication, impersonation, and the record of what was refused.
//!
//! 1. A request without credentials is the embedded server's administrator (`embedded-admin`,
//!    in `system:masters`), which is what the kubeconfig the server writes uses, so kubectl and
//!    tests need no credentials.
//! 2. `Authorization: Bearer <token>` names a user registered with [`Access::add_token`], as
//!    kube-apiserver's static token file does; an unknown token is `401 Unauthorized`. (kube-rs
//!    sends tokens over the server's plain HTTP; kubectl, like all of client-go, sends
//!    credentials only over TLS, so with kubectl use `--as`.)
//! 3. `Impersonate-User` / `Impersonate-Group` (kubectl `--as` / `--as-group`, or a kubeconfig's
//!    `as:`) switch to that identity if the requester may `impersonate` it, as upstream. A
//!    service account impersonated without groups gets its upstream groups.
//!
//! Every identity other than `system:masters` is then authorized by [`crate::rbac`]; refusals
//! are counted and the latest kept, so a test can prove a workload needed nothing more than its
//! Role.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, RwLock};

use http::HeaderMap;

use crate::rbac::{self, Attributes};
use crate::status::ApiError;
use crate::store::Store;
pub use crate::user::UserInfo;

/// One refused request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub user: String,
    /// The 403 message, as the client saw it.
    pub message: String,
}

/// How many refusals are kept (the count covers all).
const KEPT_DENIALS: usize = 1000;

/// Tokens, and the record of refusals.
#[derive(Default)]
pub struct Access {
    tokens: RwLock<HashMap<String, UserInfo>>,
    denials: Mutex<(u64, VecDeque<Refusal>)>,
}

impl Access {
    /// Registers a bearer token for `user`.
    pub fn add_token(&self, token: impl Into<String>, user: UserInfo) {
        self.tokens.write().unwrap().insert(token.into(), user);
    }

    /// The user a bearer token names, if it is known.
    pub fn user_of_token(&self, token: &str) -> Option<UserInfo> {
        self.tokens.read().unwrap().get(token).cloned()
    }

    /// The identity of a request (see the module docs).
    pub fn identify(&self, store: &Store, headers: &HeaderMap) -> Result<UserInfo, ApiError> {
        let requester = match headers.get(http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
            None => UserInfo::admin(),
            Some(value) => {
                let token = value.strip_prefix("Bearer ").map(str::trim).unwrap_or_default();
                self.tokens.read().unwrap().get(token).cloned().ok_or_else(unauthorized)?
            }
        };
        let Some(user) = headers.get("impersonate-user").and_then(|v| v.to_str().ok()) else {
            if headers.contains_key("impersonate-group") {
                return Err(ApiError::internal("requested impersonation of groups without impersonating a user"));
            }
            return Ok(requester);
        };
        let groups: Vec<String> = headers.get_all("impersonate-group").iter().filter_map(|v| v.to_str().ok()).map(String::from).collect();
        let sa = user.strip_prefix("system:serviceaccount:").and_then(|rest| rest.split_once(':'));
        let mut wanted = vec![match sa {
            Some((ns, name)) => impersonate("serviceaccounts", ns, name),
            None => impersonate("users", "", user),
        }];
        wanted.extend(groups.iter().map(|g| impersonate("groups", "", g)));
        for attrs in &wanted {
            if let Attributes::Resource { resource, .. } = attrs {
                self.authorize(store, &requester, attrs, resource)?;
            }
        }
        Ok(match (sa, groups.is_empty()) {
            (Some((ns, name)), true) => UserInfo::service_account(ns, name),
            _ => UserInfo::user(user, groups),
        })
    }

    /// `Ok` if `user` may do what `attrs` says; else the 403 to answer, recorded.
    pub fn authorize(&self, store: &Store, user: &UserInfo, attrs: &Attributes, qualified_resource: &str) -> Result<(), ApiError> {
        if rbac::allows(store, user, attrs) {
            return Ok(());
        }
        let mut e = self.deny(user, attrs);
        if let Attributes::Resource { name, group, resource, .. } = attrs {
            // upstream NewForbidden: `<resource.group> "<name>" is forbidden: <why>`.
            let subject = if name.is_empty() { qualified_resource.to_string() } else { format!("{qualified_resource} {name:?}") };
            e.message = format!("{subject} is forbidden: {}", e.message);
            e.name = Some(name.clone());
            e.group = Some(group.clone());
            e.kind = Some(resource.clone());
        }
        Err(e)
    }

    fn deny(&self, user: &UserInfo, attrs: &Attributes) -> ApiError {
        let message = rbac::forbidden_message(user, attrs);
        tracing::info!(user = %user.name, %message, "forbidden");
        let mut denials = self.denials.lock().unwrap();
        denials.0 += 1;
        denials.1.push_back(Refusal { user: user.name.clone(), message: message.clone() });
        if denials.1.len() > KEPT_DENIALS {
            denials.1.pop_front();
        }
        ApiError::forbidden(message)
    }

    /// How many requests were refused since the server started.
    pub fn refused_total(&self) -> u64 {
        self.denials.lock().unwrap().0
    }

    /// The latest refusals (up to 1000), oldest first.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.denials.lock().unwrap().1.iter().cloned().collect()
    }
}

fn impersonate(resource: &str, namespace: &str, name: &str) -> Attributes {
    Attributes::Resource {
        verb: "impersonate".into(),
        group: String::new(),
        resource: resource.into(),
        subresource: String::new(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn unauthorized() -> ApiError {
    let mut e = ApiError::forbidden("Unauthorized");
    e.code = 401;
    e.reason = "Unauthorized".into();
    e
}
