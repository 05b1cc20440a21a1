//! Registry credentials from a docker config JSON: the file `docker login`,
//! `oras login` and `podman login` write, and the `.dockerconfigjson` key of
//! a Secret of type `kubernetes.io/dockerconfigjson` (what `kubectl create
//! secret docker-registry` makes). Only inline credentials are read
//! (`auth`, or `username` + `password`, or `identitytoken`); credential
//! helpers are programs this host does not run.

use std::collections::BTreeMap;

use base64::Engine;

/// How to sign in to one registry.
#[derive(Clone, PartialEq, Eq)]
pub enum Login {
    Basic {
        username: String,
        password: String,
    },
    /// An OAuth2 refresh token (`identitytoken`), sent as a bearer token.
    Token(String),
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Login::Basic { username, .. } => write!(f, "Basic({username}, <redacted>)"),
            Login::Token(_) => write!(f, "Token(<redacted>)"),
        }
    }
}

/// Logins by registry host (`host[:port]`).
#[derive(Clone, Debug, Default)]
pub struct Credentials(BTreeMap<String, Login>);

#[derive(serde::Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

#[derive(serde::Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    identitytoken: Option<String>,
}

impl Credentials {
    /// Parses a docker config JSON (`source` names it in errors).
    pub fn from_docker_config(json: &[u8], source: &str) -> Result<Self, String> {
        let not_config = |why: String| format!("{source} is not a docker config JSON ({{\"auths\": {{...}}}}): {why}");
        // A JSON object only: serde would also read a struct from an array.
        let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| not_config(e.to_string()))?;
        if !value.is_object() {
            return Err(not_config("not an object".into()));
        }
        let config: DockerConfig = serde_json::from_value(value).map_err(|e| not_config(e.to_string()))?;
        let mut out = BTreeMap::new();
        for (key, entry) in config.auths {
            let login = if let Some(token) = entry.identitytoken.filter(|t| !t.is_empty()) {
                Login::Token(token)
            } else if let Some(auth) = entry.auth.filter(|a| !a.is_empty()) {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(auth.trim())
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| format!("{source}: the auth of {key} is not base64 of USER:PASSWORD"))?;
                let (username, password) =
                    decoded.split_once(':').ok_or_else(|| format!("{source}: the auth of {key} is not base64 of USER:PASSWORD"))?;
                Login::Basic { username: username.into(), password: password.into() }
            } else if let (Some(username), Some(password)) = (entry.username, entry.password) {
                Login::Basic { username, password }
            } else {
                continue; // a credential helper's entry: nothing inline
            };
            out.insert(registry_key(&key), login);
        }
        Ok(Self(out))
    }

    /// Adds the logins of `other` (later sources win).
    pub fn merge(&mut self, other: Credentials) {
        self.0.extend(other.0);
    }

    /// The login for `registry` (`host[:port]`), if any.
    pub fn login(&self, registry: &str) -> Option<&Login> {
        self.0.get(registry).or_else(|| (registry == "docker.io").then(|| self.0.get("index.docker.io")).flatten())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn auth(&self, registry: &str) -> oci_client::secrets::RegistryAuth {
        match self.login(registry) {
            Some(Login::Basic { username, password }) => oci_client::secrets::RegistryAuth::Basic(username.clone(), password.clone()),
            Some(Login::Token(t)) => oci_client::secrets::RegistryAuth::Bearer(t.clone()),
            None => oci_client::secrets::RegistryAuth::Anonymous,
        }
    }
}

/// `https://index.docker.io/v1/` → `index.docker.io`; `host:5000` stays.
fn registry_key(key: &str) -> String {
    let k = key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
    k.split('/').next().unwrap_or(k).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_login_files_and_kubectl_secrets_are_read() {
        let json = br#"{"auths": {
            "127.0.0.1:5000": {"auth": "dXNlcjpwYTpzcw=="},
            "https://index.docker.io/v1/": {"username": "u", "password": "p"},
            "ghcr.io": {"identitytoken": "tok"},
            "helper.example": {}
        }, "credsStore": "desktop"}"#;
        let c = Credentials::from_docker_config(json, "config.json").unwrap();
        assert_eq!(c.login("127.0.0.1:5000"), Some(&Login::Basic { username: "user".into(), password: "pa:ss".into() }));
        assert_eq!(c.login("docker.io"), Some(&Login::Basic { username: "u".into(), password: "p".into() }));
        assert_eq!(c.login("ghcr.io"), Some(&Login::Token("tok".into())));
        assert_eq!(c.login("helper.example"), None);
        assert!(!format!("{c:?}").contains("pa:ss"), "secrets are not printed");
    }

    #[test]
    fn a_malformed_file_is_named() {
        assert!(Credentials::from_docker_config(b"[]", "cfg.json").unwrap_err().contains("cfg.json is not a docker config JSON"));
        let bad = br#"{"auths": {"r": {"auth": "bm9jb2xvbg=="}}}"#;
        assert!(Credentials::from_docker_config(bad, "cfg.json").unwrap_err().contains("USER:PASSWORD"));
    }
}
