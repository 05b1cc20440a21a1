//! Plugins from a real registry (Debian's docker-registry on loopback):
//! `host push`, `host run --plugin oci://...` and its tag polling, the
//! refusals that keep the running version, the Plugin objects published
//! for flag-given plugins, interop with oras, and cosign
//! signatures made by the real cosign CLI.

mod cosign;
mod interop;
mod plugin_resource;
mod published;
mod run;
