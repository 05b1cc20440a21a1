//! An embedded, in-memory Kubernetes-compatible API server: the cluster the host runs on by
//! default and every test runs against. kubectl and kube-rs use it as a real kube-apiserver.
//!
//! Start one with [`ApiServer::new`]; talk to it in-process with [`ApiServer::kube_client`] or
//! over HTTP with [`ApiServer::serve`] and [`ServerHandle::write_kubeconfig`]. Register admission
//! hooks on [`ApiServer::admission`]; inject time with [`Config::clock`]. Requests without
//! credentials are the administrator's; bearer tokens and impersonation are authorized by RBAC
//! (`auth`, `rbac`).
//!
//! The public surface is this page: the server and its configuration, admission, faults,
//! persistence and kubeconfig items re-exported here, and five modules for in-process clients
//! such as the simulated cluster: [`rest`] (the verbs), [`store`] (commit events),
//! [`resources`], [`selector`] and [`clock`]. Every other module is private, so what the server
//! does inside can change without a caller noticing.
//!
//! Layers, one way: `store` (objects, resourceVersions, event window) → `rest` (verb semantics)
//! → `watch` / `table` / `discovery` / `openapi` → `http` (routing) → `server` (serving).
//! Beside them, also one way: `user` (who asks) ← `rbac` (may they) ← `auth` (who is it);
//! `validation` (naming and field rules) ← `rest` ← `bootstrap` (the objects every cluster
//! starts with, and what keeps them); `wire` (body forms) ← `watch` ← `http`. No module imports
//! one that imports it back.

// `ApiError` mirrors a whole `Status` (≈160 bytes); errors are the rare path, so it is not boxed.
#![allow(clippy::result_large_err)]

mod admission;
mod auth;
mod bootstrap;
mod builtin_schema;
pub mod clock;

mod config;
mod convert;
mod crd;
mod defaults;
mod discovery;
mod faults;
mod field_validation;
mod fields;
mod http;
mod kubeconfig;
mod limits;
mod openapi;
mod openapi_v2;
mod patch;
mod persist;
mod protobuf;
mod rbac;
pub mod resources;
pub mod rest;
mod reviews;
mod schema;
pub mod selector;
mod server;
mod services;
mod status;
pub mod store;
mod surface;
mod table;
mod typed;
mod user;
mod validation;
mod warning;
mod watch;
mod wire;
mod yaml;

pub use admission::{Admission, Denial};
pub use auth::{Access, Refusal, UserInfo};
pub use clock::{Clock, SystemClock};

pub use config::Config;
pub use faults::{Fault, FaultAction, FaultId, FaultSpec, Faults, SpecError};
pub use http::Body;
pub use kubeconfig::{kubeconfig_yaml, write_kubeconfig};
pub use persist::FILE_NAME as PERSIST_FILE_NAME;
pub use persist::{PersistError, RedbBackend};
pub use protobuf::decode as decode_protobuf;
/// Validates an object against a CRD version's `openAPIV3Schema` as the server does on a
/// write (types, bounds, formats, required fields), without pruning or defaulting: the causes
/// of the refusal, empty when it passes.
pub use schema::validate as validate_against_schema;
pub use server::{ApiServer, ApiService, ServerHandle};
pub use status::{ApiError, Cause};
