//! Who a request is: the authenticated identity ([`UserInfo`]) that
//! authentication (the `auth` module) finds and authorization (`rbac`)
//! judges. Its own module so that authorization needs nothing of
//! authentication: `auth` uses `rbac`, never the reverse.

/// An authenticated identity, as upstream's `user.Info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The identity of requests that carry no credentials.
    pub fn admin() -> Self {
        Self { name: "embedded-admin".into(), groups: vec!["system:masters".into(), "system:authenticated".into()] }
    }

    /// A user with the given groups (plus `system:authenticated`, which every user has).
    pub fn user(name: impl Into<String>, groups: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let mut groups: Vec<String> = groups.into_iter().map(Into::into).collect();
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        Self { name: name.into(), groups }
    }

    /// A service account's identity: `system:serviceaccount:NS:NAME` in the groups
    /// `system:serviceaccounts` and `system:serviceaccounts:NS`.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self::user(
            format!("system:serviceaccount:{namespace}:{name}"),
            ["system:serviceaccounts".to_string(), format!("system:serviceaccounts:{namespace}")],
        )
    }
}
