//! Service account tokens: `serviceaccounts/{name}/token` (an `authentication.k8s.io/v1`
//! TokenRequest) issues a JWT shaped as upstream's (`RS256` header; `iss`, `sub`, `aud`, `exp`,
//! `iat`, `nbf`, `jti` and the `kubernetes.io` claim), and `TokenReview` answers who it names.
//!
//! Without key material, the signature is random bytes: a token is genuine because the server
//! issued it (it is registered with [`crate::auth::Access`] and then accepted as a bearer token),
//! not because of its signature. A TokenReview also checks expiry and that the service account
//! still exists with the uid the token names, as upstream's legacy checks do.

use super::*;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Duration, Utc};

/// Upstream's default `--service-account-issuer` and API audience on most clusters.
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// `spec.expirationSeconds` when unset (upstream: 1 hour).
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// Upstream refuses durations under 10 minutes.
const MIN_EXPIRATION_SECONDS: i64 = 600;

fn b64(v: &Value) -> String {
    URL_SAFE_NO_PAD.encode(v.to_string())
}

impl Core {
    /// POST `serviceaccounts/{name}/token`: a TokenRequest answered with `status.token`.
    pub fn request_token(&self, sa_res: &Resource, ns: &str, name: &str, body: &Value) -> Result<Value> {
        let sa = self.store.get(&self.key(sa_res, ns, name)).ok_or_else(|| ApiError::not_found("", "serviceaccounts", name))?;
        let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
        let seconds = spec.get("expirationSeconds").and_then(Value::as_i64).unwrap_or(DEFAULT_EXPIRATION_SECONDS);
        if seconds < MIN_EXPIRATION_SECONDS {
            return Err(ApiError::invalid(
                "authentication.k8s.io",
                "TokenRequest",
                name,
                vec![Cause::new(
                    "FieldValueInvalid",
                    format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
                    "spec.expirationSeconds",
                )],
            ));
        }
        let audiences: Vec<Value> = match spec.get("audiences").and_then(Value::as_array) {
            Some(a) if !a.is_empty() => a.clone(),
            _ => vec![json!(ISSUER)],
        };
        let now = self.config.clock.now();
        let expires = now + Duration::seconds(seconds);
        let uid = sa.pointer("/metadata/uid").cloned().unwrap_or_default();
        let jti = uuid::Uuid::new_v4().to_string();
        let header = json!({"alg": "RS256", "kid": "embedded"});
        let claims = json!({
            "aud": audiences, "exp": expires.timestamp(), "iat": now.timestamp(), "iss": ISSUER, "jti": jti,
            "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": uid}},
            "nbf": now.timestamp(), "sub": format!("system:serviceaccount:{ns}:{name}"),
        });
        let signature: Vec<u8> = (0..8).flat_map(|_| *uuid::Uuid::new_v4().as_bytes()).collect();
        let token = format!("{}.{}.{}", b64(&header), b64(&claims), URL_SAFE_NO_PAD.encode(signature));
        self.access.add_token(token.clone(), crate::auth::UserInfo::service_account(ns, name));
        Ok(json!({
            "kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
            "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": spec.get("boundObjectRef").cloned().unwrap_or(Value::Null)},
            "status": {"token": token, "expirationTimestamp": timestamp(expires)},
        }))
    }

    /// The `status` of a TokenReview of `token`.
    pub fn review_token(&self, token: &str) -> Value {
        let refused = |why: &str| json!({"user": {}, "error": format!("[invalid bearer token, {why}]")});
        let Some(user) = self.access.user_of_token(token) else { return refused("token lookup failed") };
        let Some(claims) =
            token.split('.').nth(1).and_then(|c| URL_SAFE_NO_PAD.decode(c).ok()).and_then(|c| serde_json::from_slice::<Value>(&c).ok())
        else {
            // A static token (Access::add_token): no claims to check.
            return json!({"authenticated": true, "user": {"username": user.name, "groups": user.groups}});
        };
        let exp = claims["exp"].as_i64().and_then(|s| DateTime::<Utc>::from_timestamp(s, 0));
        if exp.is_some_and(|e| e <= self.config.clock.now()) {
            return refused("service account token has expired");
        }
        let ns = claims.pointer("/kubernetes.io/namespace").and_then(Value::as_str).unwrap_or_default();
        let name = claims.pointer("/kubernetes.io/serviceaccount/name").and_then(Value::as_str).unwrap_or_default();
        let uid = claims.pointer("/kubernetes.io/serviceaccount/uid").cloned().unwrap_or_default();
        let key = ObjectKey {
            gr: crate::resources::GroupResource { group: String::new(), resource: "serviceaccounts".into() },
            namespace: ns.into(),
            name: name.into(),
        };
        match self.store.get(&key) {
            Some(sa) if sa.pointer("/metadata/uid") == Some(&uid) => {}
            _ => return refused("service account token has been invalidated"),
        }
        json!({
            "authenticated": true,
            "user": {
                "username": user.name, "uid": uid, "groups": user.groups,
                "extra": {"authentication.kubernetes.io/credential-id": [format!("JTI={}", claims["jti"].as_str().unwrap_or_default())]},
            },
            "audiences": claims["aud"],
        })
    }
}
