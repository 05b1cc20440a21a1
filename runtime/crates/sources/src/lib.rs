//! Where plugins come from and how a new version goes live.
//!
//! - [`hotswap`]: new plugin versions from ConfigMaps, files and OCI registries, trust, shadow runs of staged candidates, rollback.
//! - [`record`]: the on-disk log of reconcile calls, and the comparison of two answers (replay, shadow).
//! - [`plugin_resource`]: the `Plugin` custom resource: plugins declared as objects, their status written back.
//! - [`status`]: the host's state at a glance (`host status`, `/status`).

pub mod hotswap;
pub mod plugin_resource;
pub mod record;
pub mod status;

use operator_api::api_error;
use operator_api::error_chain;
use operator_api::events;
use operator_clock as clock;
use operator_controller as controller;
use operator_manager as manager;
use operator_metrics as metrics;
use operator_metrics::activity;
use operator_metrics::outcomes;
use operator_sandbox as sandbox;
use operator_sandbox::registry;
