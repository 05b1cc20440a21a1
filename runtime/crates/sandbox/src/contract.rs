//! Which version of `operator:plugin` a component was built against, and
//! whether this host can run it.

use operator_plugin_sdk::CONTRACT_VERSION;

/// The package a plugin must export `controller` from.
pub const PACKAGE: &str = "operator:plugin";

/// The exported interface's name without version, e.g. as in
/// `operator:plugin/controller@0.1.0`.
pub const CONTROLLER_INTERFACE: &str = "operator:plugin/controller";

/// A semver triple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl Version {
    pub fn parse(text: &str) -> Option<Self> {
        let core = text.split(['-', '+']).next()?;
        let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
        let v = Version { major: parts.next()??, minor: parts.next()??, patch: parts.next()?? };
        parts.next().is_none().then_some(v)
    }

    /// Compatible as cargo reads semver: same major, and for 0.x the same minor.
    pub fn compatible_with(self, other: Version) -> bool {
        self.major == other.major && (self.major != 0 || self.minor == other.minor)
    }

    /// The range this version accepts, e.g. `0.1.x` or `1.x`.
    pub fn compatible_range(self) -> String {
        if self.major == 0 { format!("0.{}.x", self.minor) } else { format!("{}.x", self.major) }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The contract version this host implements.
pub fn host_version() -> Version {
    Version::parse(CONTRACT_VERSION).expect("CONTRACT_VERSION is semver")
}

/// The contract minors this host binds side by side: a component of any of
/// them runs, converted at the edge to one internal representation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Minor {
    /// 0.1.x: parent and children.
    V0_1,
    /// 0.2.x: 0.1 plus related kinds.
    V0_2,
    /// 0.3.x: 0.2 plus desired state applied server-side.
    V0_3,
    /// 0.4.x: 0.3 plus a requeue's priority.
    V0_4,
}

/// Every minor, oldest first, as the version a component declares.
pub const SUPPORTED: [(Minor, Version); 4] = [
    (Minor::V0_1, Version { major: 0, minor: 1, patch: 0 }),
    (Minor::V0_2, Version { major: 0, minor: 2, patch: 0 }),
    (Minor::V0_3, Version { major: 0, minor: 3, patch: 0 }),
    (Minor::V0_4, Version { major: 0, minor: 4, patch: 0 }),
];

/// The minor a component of version `found` is run as, if any.
pub fn minor_of(found: Version) -> Option<Minor> {
    SUPPORTED.iter().find(|(_, v)| v.compatible_with(found)).map(|(m, _)| *m)
}

/// What this host accepts, for an error message: `0.1.x, 0.2.x, 0.3.x, 0.4.x`.
pub fn supported_ranges() -> String {
    SUPPORTED.iter().map(|(_, v)| v.compatible_range()).collect::<Vec<_>>().join(", ")
}

/// Finds the version of the `controller` interface among a component's
/// export names. `Ok(None)` means the component does not export it at all.
pub fn exported_version<'a>(export_names: impl IntoIterator<Item = &'a str>) -> Result<Option<Version>, String> {
    for name in export_names {
        if let Some(rest) = name.strip_prefix(CONTROLLER_INTERFACE) {
            return match rest.strip_prefix('@') {
                Some(v) => Version::parse(v).map(Some).ok_or_else(|| format!("export `{name}` has a malformed version")),
                None if rest.is_empty() => Err(format!("export `{name}` carries no version")),
                None => continue,
            };
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_major_versions_are_compatible_only_within_a_minor() {
        let v = |s| Version::parse(s).unwrap();
        assert!(v("0.1.0").compatible_with(v("0.1.7")));
        assert!(!v("0.1.0").compatible_with(v("0.2.0")));
        assert!(v("1.2.0").compatible_with(v("1.9.1")));
        assert!(!v("1.2.0").compatible_with(v("2.0.0")));
        assert_eq!(v("0.1.0").compatible_range(), "0.1.x");
    }

    #[test]
    fn the_host_runs_every_known_minor_and_refuses_others() {
        let v = |s| Version::parse(s).unwrap();
        assert_eq!(minor_of(v("0.1.0")), Some(Minor::V0_1));
        assert_eq!(minor_of(v("0.1.3")), Some(Minor::V0_1));
        assert_eq!(minor_of(v("0.2.0")), Some(Minor::V0_2));
        assert_eq!(minor_of(v("0.2.9")), Some(Minor::V0_2));
        assert_eq!(minor_of(v("0.3.0")), Some(Minor::V0_3));
        assert_eq!(minor_of(v("0.4.0")), Some(Minor::V0_4));
        assert_eq!(minor_of(v("0.4.2")), Some(Minor::V0_4));
        assert_eq!(minor_of(v("0.5.0")), None);
        assert_eq!(minor_of(v("1.0.0")), None);
        assert_eq!(supported_ranges(), "0.1.x, 0.2.x, 0.3.x, 0.4.x");
        // The newest minor is the one the SDK implements.
        assert!(host_version().compatible_with(SUPPORTED[SUPPORTED.len() - 1].1));
    }

    #[test]
    fn the_controller_export_version_is_found_among_other_exports() {
        let names = ["wasi:cli/run@0.2.0", "operator:plugin/controller@0.2.1"];
        assert_eq!(exported_version(names).unwrap(), Some(Version { major: 0, minor: 2, patch: 1 }));
        assert_eq!(exported_version(["other"]).unwrap(), None);
        assert!(exported_version(["operator:plugin/controller"]).is_err());
    }
}
