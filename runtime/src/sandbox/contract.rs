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
    fn the_controller_export_version_is_found_among_other_exports() {
        let names = ["wasi:cli/run@0.2.0", "operator:plugin/controller@0.2.1"];
        assert_eq!(exported_version(names).unwrap(), Some(Version { major: 0, minor: 2, patch: 1 }));
        assert_eq!(exported_version(["other"]).unwrap(), None);
        assert!(exported_version(["operator:plugin/controller"]).is_err());
    }
}
