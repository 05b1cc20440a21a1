//! Cargo resolves a package's build-dependencies only when it has a build
//! script: this one makes the manifest's `[build-dependencies]` pin the
//! features of what proc macros and build scripts use.

fn main() {}
