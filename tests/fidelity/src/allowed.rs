//! The allowed differences (`tests/fidelity/allowed.yaml`): each known
//! difference named by exchange and JSON path, with its cause. A cause is
//! one thing the embedded server deliberately does not do (or does not do
//! yet), described once; the same descriptions make apiserver/README.md's
//! "Not faithful (yet)" list, so the two cannot drift.
//!
//! An entry names one difference. Only a cause marked `feature` (one named
//! part of Kubernetes the embedded cluster does not have, whose absence
//! shows in many fields of the same exchange) may name a whole exchange
//! with `path: "*"`; such an entry stays in use while its exchange occurs,
//! since what it covers may vary from run to run (what a controller has
//! done by the time of a read).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::compare::Difference;

#[derive(Debug, thiserror::Error)]
pub enum AllowedError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Allowed {
    pub causes: Vec<Cause>,
    #[serde(default)]
    pub differences: Vec<Entry>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Cause {
    /// A short kebab-case name.
    pub name: String,
    /// One sentence: what the embedded server does differently and why.
    pub description: String,
    /// A named feature the embedded cluster does not have: its entries may name a whole exchange.
    #[serde(default)]
    pub feature: bool,
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub exchange: String,
    pub path: String,
    pub cause: String,
}

impl Allowed {
    pub fn default_path() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("allowed.yaml")
    }

    /// Reads and checks the list: every entry's cause exists, `*` only for
    /// a feature, no entry twice.
    pub fn load(path: &Path) -> Result<Allowed, AllowedError> {
        let text = std::fs::read_to_string(path).map_err(|source| AllowedError::Read { path: path.to_path_buf(), source })?;
        let invalid = |message: String| AllowedError::Invalid { path: path.to_path_buf(), message };
        let allowed: Allowed = serde_saphyr::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        for (i, entry) in allowed.differences.iter().enumerate() {
            let cause = allowed.cause(&entry.cause).ok_or_else(|| invalid(format!("entry {i} names the unknown cause {:?}", entry.cause)))?;
            if entry.path.contains('*') && !(cause.feature && entry.path == "*") {
                return Err(invalid(format!(
                    "entry {i}: only a `feature` cause may name a whole exchange (path \"*\"); {:?} is not one",
                    cause.name
                )));
            }
            if allowed.differences[..i].contains(entry) {
                return Err(invalid(format!("entry {i} is listed twice")));
            }
        }
        Ok(allowed)
    }

    pub fn cause(&self, name: &str) -> Option<&Cause> {
        self.causes.iter().find(|c| c.name == name)
    }

    /// The entry that allows `d`, if any.
    pub fn matching(&self, d: &Difference) -> Option<&Entry> {
        self.differences.iter().find(|e| e.exchange == d.exchange && (e.path == d.path || e.path == "*"))
    }

    /// apiserver/README.md's generated "Not faithful (yet)" list.
    pub fn readme_block(&self) -> String {
        self.causes.iter().map(|c| format!("- `{}`: {}\n", c.name, c.description)).collect()
    }
}

/// The marks around the generated block in apiserver/README.md.
pub const README_BEGIN: &str = "<!-- fidelity:not-faithful:begin (generated from tests/fidelity/allowed.yaml by `cargo xtask fidelity`) -->\n";
pub const README_END: &str = "<!-- fidelity:not-faithful:end -->";

pub fn readme_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../apiserver/README.md")
}

/// The README's block as it stands, or `None` when the marks are missing.
pub fn readme_block_in(readme: &str) -> Option<&str> {
    let start = readme.find(README_BEGIN)? + README_BEGIN.len();
    let end = start + readme[start..].find(README_END)?;
    Some(&readme[start..end])
}

/// `readme` with its block replaced by `block`.
pub fn with_readme_block(readme: &str, block: &str) -> Option<String> {
    let start = readme.find(README_BEGIN)? + README_BEGIN.len();
    let end = start + readme[start..].find(README_END)?;
    Some(format!("{}{block}{}", &readme[..start], &readme[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("allowed.yaml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn a_whole_exchange_is_allowed_only_for_a_feature() {
        let (_d, path) = write("causes:\n- {name: a, description: d}\ndifferences:\n- {exchange: x, path: '*', cause: a}\n");
        let e = Allowed::load(&path).unwrap_err().to_string();
        assert!(e.contains("only a `feature` cause"), "{e}");
        let (_d, path) = write("causes:\n- {name: a, description: d, feature: true}\ndifferences:\n- {exchange: x, path: '*', cause: a}\n");
        let allowed = Allowed::load(&path).unwrap();
        let d = Difference { exchange: "x".into(), path: "$.y".into(), real: 1.into(), embedded: 2.into() };
        assert!(allowed.matching(&d).is_some());
    }

    #[test]
    fn unknown_causes_and_patterns_are_refused() {
        let (_d, path) = write("causes: []\ndifferences:\n- {exchange: x, path: '$.a', cause: nope}\n");
        assert!(Allowed::load(&path).unwrap_err().to_string().contains("unknown cause"));
        let (_d, path) = write("causes:\n- {name: a, description: d, feature: true}\ndifferences:\n- {exchange: x, path: '$.items[*]', cause: a}\n");
        assert!(Allowed::load(&path).is_err());
    }

    #[test]
    fn the_readme_block_is_found_and_replaced() {
        let readme = format!("# T\n{README_BEGIN}- old\n{README_END}\nrest\n");
        assert_eq!(readme_block_in(&readme), Some("- old\n"));
        let new = with_readme_block(&readme, "- new\n").unwrap();
        assert_eq!(readme_block_in(&new), Some("- new\n"));
        assert!(new.ends_with("rest\n"));
    }
}
