//! Nothing to use: this crate exists for its manifest, which gives the
//! workspace's dependencies one feature set in every build (see
//! xtask/src/features.rs).
