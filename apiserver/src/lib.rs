//! An embedded, in-memory Kubernetes-compatible API server: the cluster the host runs on by
//! default and every test runs against. kubectl and kube-rs use it as a real kube-apiserver.
//!
//! Start one with [`ApiServer::new`]; talk to it in-process with [`ApiServer::kube_client`] or
//! over HTTP with [`ApiServer::serve`] and [`ServerHandle::write_kubeconfig`]. Register admission
//! hooks on [`ApiServer::admission`]; inject time with [`Config::clock`]. Requests without
//! credentials are the administrator's; bearer tokens and impersonation are authorized by RBAC
//! ([`auth`], [`rbac`]).
//!
//! Layers, one way: `store` (objects, resourceVersions, event window) → `rest` (verb semantics)
//! → `watch` / `table` / `discovery` / `openapi` → `http` (routing) → `server` (serving).
//! Beside them, also one way: `user` (who asks) ← `rbac` (may they) ← `auth` (who is it);
//! `validation` (naming and field rules) ← `rest` ← `bootstrap` (the objects every cluster
//! starts with, and what keeps them); `wire` (body forms) ← `watch` ← `http`. No module imports
//! one that imports it back.

// `ApiError` mirrors a whole `Status` (≈160 bytes); errors are the rare path, so it is not boxed.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod auth;
pub mod bootstrap;
pub mod builtin_schema;
pub mod clock;

pub mod config;
pub mod convert;
pub mod crd;
pub mod defaults;
pub mod discovery;
pub mod faults;
pub mod fields;
pub mod http;
pub mod kubeconfig;
pub mod limits;
pub mod openapi;
pub mod patch;
pub mod persist;
pub mod protobuf;
pub mod rbac;
pub mod resources;
pub mod rest;
pub mod reviews;
pub mod schema;
pub mod selector;
pub mod server;
pub mod services;
pub mod status;
pub mod store;
pub mod table;
pub mod user;
pub mod validation;
pub mod watch;
pub mod wire;
pub mod yaml;

pub use admission::{Admission, Denial};
pub use auth::{Access, Refusal, UserInfo};
pub use clock::{Clock, SystemClock};

pub use config::Config;
pub use faults::{Fault, FaultAction, FaultId, FaultSpec, Faults};
pub use kubeconfig::{kubeconfig_yaml, write_kubeconfig};
pub use persist::{PersistError, RedbBackend};
pub use server::{ApiServer, ApiService, ServerHandle};
pub use status::{ApiError, Cause};
