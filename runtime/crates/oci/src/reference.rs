//! Where a plugin lives in a registry: `oci://REGISTRY/REPOSITORY:TAG` or
//! `oci://REGISTRY/REPOSITORY@sha256:DIGEST`, parsed once and printed back
//! the same way.

use std::fmt;
use std::str::FromStr;

/// The scheme that marks a `--plugin` value as a registry reference.
pub const SCHEME: &str = "oci://";

/// A manifest digest, `sha256:<64 lowercase hex digits>` (the only algorithm
/// registries and cosign use for manifests).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        use sha2::Digest as _;
        Self(format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes))))
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Digest {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let hex = text.strip_prefix("sha256:").ok_or_else(|| format!("digest {text:?} is not sha256:<64 hex digits>"))?;
        if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Self(format!("sha256:{}", hex.to_ascii_lowercase())))
        } else {
            Err(format!("digest {text:?} is not sha256:<64 hex digits>"))
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A plugin's place in a registry: by tag (resolved to a digest, then
/// pinned) or by digest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reference {
    /// `host[:port]`.
    pub registry: String,
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<Digest>,
}

impl Reference {
    /// The same repository at `digest` (what is actually pulled).
    pub fn at(&self, digest: &Digest) -> Reference {
        Reference { tag: None, digest: Some(digest.clone()), ..self.clone() }
    }

    /// The same repository at `tag`.
    pub fn with_tag(&self, tag: &str) -> Reference {
        Reference { tag: Some(tag.into()), digest: None, ..self.clone() }
    }

    /// The registry's host without the port.
    pub fn host(&self) -> &str {
        host_of(&self.registry)
    }

    /// The form the OCI client takes.
    pub(crate) fn to_client(&self) -> oci_client::Reference {
        match (&self.digest, &self.tag) {
            (Some(d), _) => oci_client::Reference::with_digest(self.registry.clone(), self.repository.clone(), d.to_string()),
            (None, Some(t)) => oci_client::Reference::with_tag(self.registry.clone(), self.repository.clone(), t.clone()),
            (None, None) => unreachable!("a parsed reference has a tag or a digest"),
        }
    }
}

/// `host` of `host:port` (and of `[v6]:port`).
pub(crate) fn host_of(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    registry.rsplit_once(':').map_or(registry, |(h, _)| h)
}

fn valid_repository(repo: &str) -> bool {
    // The distribution spec's path components: lowercase alphanumerics
    // separated by `.`, `_`, `__`, `-` runs, joined by `/`.
    !repo.is_empty()
        && repo.split('/').all(|c| {
            !c.is_empty()
                && c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
                && c.as_bytes()[0].is_ascii_alphanumeric()
                && c.as_bytes()[c.len() - 1].is_ascii_alphanumeric()
        })
}

fn valid_tag(tag: &str) -> bool {
    (1..=128).contains(&tag.len())
        && (tag.as_bytes()[0].is_ascii_alphanumeric() || tag.as_bytes()[0] == b'_')
        && tag.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl FromStr for Reference {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let expected = "expected oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:DIGEST";
        let rest = text.strip_prefix(SCHEME).ok_or_else(|| format!("{text:?} does not start with {SCHEME} ({expected})"))?;
        let (registry, path) = rest.split_once('/').ok_or_else(|| format!("{text:?} names no repository ({expected})"))?;
        if registry.is_empty() || registry.contains(['@', ' ']) {
            return Err(format!("{text:?} names no registry host ({expected})"));
        }
        let (name, tag, digest) = match path.split_once('@') {
            Some((name, digest)) => (name, None, Some(digest.parse::<Digest>().map_err(|e| format!("{text:?}: {e}"))?)),
            None => match path.rsplit_once(':') {
                Some((name, tag)) if !tag.contains('/') => (name, Some(tag.to_string()), None),
                _ => return Err(format!("{text:?} has neither a tag nor a digest ({expected}); a tag is never assumed")),
            },
        };
        if !valid_repository(name) {
            return Err(format!("{text:?}: repository {name:?} is not lowercase letters, digits and . _ - separated by /"));
        }
        if let Some(t) = &tag
            && !valid_tag(t)
        {
            return Err(format!("{text:?}: tag {t:?} is not 1 to 128 of letters, digits, . _ - (not starting with . or -)"));
        }
        Ok(Reference { registry: registry.to_string(), repository: name.to_string(), tag, digest })
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        match (&self.tag, &self.digest) {
            (_, Some(d)) => write!(f, "@{d}"),
            (Some(t), None) => write!(f, ":{t}"),
            (None, None) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn tags_and_digests_parse_and_print_back() {
        for text in ["oci://127.0.0.1:5000/hello-py:v1", "oci://ghcr.io/org/team/cronjob:1.2.3", &format!("oci://reg.example/p@{D}")] {
            let r: Reference = text.parse().unwrap();
            assert_eq!(r.to_string(), text);
        }
        let r: Reference = "oci://127.0.0.1:5000/a/b:v1".parse().unwrap();
        assert_eq!((r.registry.as_str(), r.repository.as_str(), r.tag.as_deref(), r.host()), ("127.0.0.1:5000", "a/b", Some("v1"), "127.0.0.1"));
        assert_eq!(r.at(&D.parse().unwrap()).to_string(), format!("oci://127.0.0.1:5000/a/b@{D}"));
        assert_eq!(host_of("[::1]:5000"), "::1");
    }

    #[test]
    fn bad_references_say_what_is_expected() {
        for (bad, says) in [
            ("127.0.0.1:5000/a:v1", "does not start with oci://"),
            ("oci://reg", "names no repository"),
            ("oci://reg/a", "neither a tag nor a digest"),
            ("oci://reg:5000/a", "neither a tag nor a digest"),
            ("oci://reg/A:v1", "is not lowercase"),
            ("oci://reg/a:-x", "tag"),
            ("oci://reg/a@sha256:12", "sha256:<64 hex digits>"),
            ("oci:///a:v1", "names no registry"),
        ] {
            let e = bad.parse::<Reference>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
