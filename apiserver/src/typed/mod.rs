//! Objects walked along their schema, as upstream's structured-merge-diff (`sigs.k8s.io/
//! structured-merge-diff/v6`, which kube-apiserver's field manager is built on) walks them:
//! - [`shape`]: what a schema says a point of an object is (scalar, struct, granular or atomic
//!   map, atomic list, set, or list keyed by some of its items' fields);
//! - [`topology`]: upstream's list and map types for a built-in schema source that lacks them;
//! - [`path`]: field paths and sets;
//! - [`edit`]: removing a path from an object;
//! - [`walk`]: the field set of an applied configuration, and the comparison of an object
//!   before and after a write.
//!
//! [`crate::fields`] makes managedFields and server-side apply of these.

pub mod edit;
pub mod path;
pub mod shape;
mod topology;
pub mod walk;

pub use path::{FieldPath, FieldSet, PathElem, path_string};
pub use shape::Node;
pub use walk::{Comparison, TypeErrors, compare, field_set};
