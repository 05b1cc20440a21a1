//! End-to-end scenarios: the host as a separate process, driven through kubectl.
//!
//! One binary for all scenarios (as wasmtime's `tests/all`), one module per
//! topic: the scenarios share a build instead of linking once per file.

mod api_server_only;
mod book;
mod cronjob;
mod hotswap;
mod memcached;
mod mydeployment;
mod readme_tour;
mod scale_admission;
mod website;
