//! The labels of sharding: which shard an object is on, that it is being
//! drained from it, and which ring a shard's Lease belongs to.
//!
//! The shard label's value is the shard's name; each replica's watches select
//! `shard.operator-host.dev/<ring>=<its name>`, so its caches hold only its
//! share. The ring's name is part of the key so that two host deployments
//! (two rings) can shard the same objects' neighbours without clashing; a
//! label key's name part is at most 63 characters, and so is a label value,
//! which bounds both the ring and the shard names.

use thiserror::Error;
use xxhash_rust::xxh64::xxh64;

/// The prefix of the shard label's key.
pub const SHARD_PREFIX: &str = "shard.operator-host.dev";
/// The prefix of the drain label's key.
pub const DRAIN_PREFIX: &str = "drain.operator-host.dev";
/// On a shard's Lease: the ring it is a member of.
pub const RING_LABEL: &str = "operator-host.dev/ring";

/// A ring or shard name that cannot be used in a label.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{what} {name:?} is not a valid label name (at most 63 characters of [A-Za-z0-9-_.], starting and ending alphanumeric)")]
pub struct InvalidName {
    pub what: &'static str,
    pub name: String,
}

/// The shard label's key for `ring`.
pub fn shard_label(ring: &str) -> Result<String, InvalidName> {
    valid("ring name", ring)?;
    Ok(format!("{SHARD_PREFIX}/{ring}"))
}

/// The drain label's key for `ring`.
pub fn drain_label(ring: &str) -> Result<String, InvalidName> {
    valid("ring name", ring)?;
    Ok(format!("{DRAIN_PREFIX}/{ring}"))
}

/// Where an object stands, read from its labels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// The shard label's value: the shard that reconciles the object.
    pub shard: Option<String>,
    /// The drain label's value, when present: the shard is asked to let the
    /// object go, to the shard named here (empty: to no shard in particular).
    pub drain: Option<String>,
}

impl Placement {
    /// The placement an object's labels give in `ring` (a malformed ring name
    /// reads as unassigned; the ring name is checked at start-up).
    pub fn from_labels(ring: &str, mut label: impl FnMut(&str) -> Option<String>) -> Placement {
        let shard = shard_label(ring).ok().and_then(|key| label(&key)).filter(|v| !v.is_empty());
        let drain = drain_label(ring).ok().and_then(|key| label(&key));
        Placement { shard, drain }
    }

    /// Placed on `shard` and not draining.
    pub fn on(shard: &str) -> Placement {
        Placement { shard: Some(shard.to_owned()), drain: None }
    }

    /// Placed on `shard`, draining to `to`.
    pub fn draining_to(shard: &str, to: &str) -> Placement {
        Placement { shard: Some(shard.to_owned()), drain: Some(to.to_owned()) }
    }

    /// The drain label is present.
    pub fn draining(&self) -> bool {
        self.drain.is_some()
    }
}

/// The label selector a shard's watches use.
pub fn selector(ring: &str, shard: &str) -> Result<String, InvalidName> {
    valid("shard name", shard)?;
    Ok(format!("{}={shard}", shard_label(ring)?))
}

/// A shard name for a process identity, which must be unique per process
/// start (the host's `hostname_<uuid>`: a restarted process is a new shard).
/// The name is both a label value and the name of the shard's Lease, so it
/// is lowercase alphanumerics, `-` and `.`, starting and ending alphanumeric,
/// at most 63 characters: the identity lowercased with every other character
/// made `-`; when that is longer, its first 46 characters and a hash of the
/// whole identity keep distinct identities apart.
pub fn shard_name(identity: &str) -> String {
    let cleaned: String = identity
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' { c } else { '-' })
        .collect();
    let trimmed = cleaned.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if !trimmed.is_empty() && trimmed.len() <= 63 {
        return trimmed.to_owned();
    }
    let head = trimmed.chars().take(46).collect::<String>();
    let head = head.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    let hash = format!("{:016x}", xxh64(identity.as_bytes(), 0));
    if head.is_empty() { format!("shard-{hash}") } else { format!("{head}-{hash}") }
}

fn valid(what: &'static str, name: &str) -> Result<(), InvalidName> {
    let bytes = name.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok { Ok(()) } else { Err(InvalidName { what, name: name.to_owned() }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_selector() {
        assert_eq!(shard_label("cronjob").unwrap(), "shard.operator-host.dev/cronjob");
        assert_eq!(drain_label("cronjob").unwrap(), "drain.operator-host.dev/cronjob");
        assert_eq!(selector("cronjob", "host-7d9f-abcde").unwrap(), "shard.operator-host.dev/cronjob=host-7d9f-abcde");
    }

    #[test]
    fn placement_from_labels() {
        let labels = std::collections::BTreeMap::from([
            ("shard.operator-host.dev/cronjob".to_owned(), "host-1".to_owned()),
            ("drain.operator-host.dev/cronjob".to_owned(), "host-2".to_owned()),
            ("shard.operator-host.dev/other".to_owned(), "host-9".to_owned()),
        ]);
        let get = |key: &str| labels.get(key).cloned();
        assert_eq!(Placement::from_labels("cronjob", get), Placement::draining_to("host-1", "host-2"));
        assert_eq!(Placement::from_labels("third", get), Placement::default());
    }

    #[test]
    fn bad_names_are_refused() {
        assert!(shard_label("").is_err());
        assert!(shard_label("-x").is_err());
        assert!(shard_label(&"a".repeat(64)).is_err());
        assert!(selector("r", "a b").is_err());
    }

    #[test]
    fn identities_become_label_values_and_lease_names() {
        assert_eq!(shard_name("host-0"), "host-0");
        assert_eq!(shard_name("vm_1EA61e85-6620"), "vm-1ea61e85-6620");
        let long = format!("{}_0f3c5a1e-9b1d-4c1e-8a7a-3f1f2b9c0d11", "node".repeat(12));
        let name = shard_name(&long);
        assert!(valid("shard name", &name).is_ok(), "{name}");
        assert_ne!(name, shard_name(&format!("{long}x")));
        assert!(valid("shard name", &shard_name("::")).is_ok());
        for name in [shard_name(&long), shard_name("A_b.C"), shard_name("::")] {
            let lease_name = name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
            assert!(lease_name && name.len() <= 63, "{name} is not an RFC 1123 subdomain of at most 63 characters");
        }
    }
}
