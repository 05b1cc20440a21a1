//! What can go wrong when loading or calling a plugin. Traps, the plugin's
//! own errors and host failures never blur together: each is its own
//! variant, with a short `kind()` used as a metric label.

use std::time::Duration;

use operator_plugin_sdk::ReconcileError;

use super::cache::CacheError;

/// A plugin could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read plugin file {path}")]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("plugin {plugin} is not a WebAssembly component: {detail}")]
    NotAComponent { plugin: String, detail: String },
    #[error("plugin {plugin} does not compile: {detail}")]
    Compile { plugin: String, detail: String },
    #[error(
        "plugin {plugin} was built against operator:plugin@{found}; this host supports operator:plugin@{supported} (rebuild the plugin with an SDK for contract {supported})"
    )]
    ContractMismatch { plugin: String, found: String, supported: String },
    #[error("plugin {plugin} does not export operator:plugin/controller (exports: {exports}); is it built with the operator plugin SDK?")]
    MissingExport { plugin: String, exports: String },
    #[error("plugin {plugin} imports {import}, which the sandbox does not provide")]
    Link { plugin: String, import: String },
    #[error("plugin {plugin} has an invalid manifest: {detail}")]
    Manifest { plugin: String, detail: String },
    #[error("plugin {plugin} failed while describing itself: {source}")]
    ManifestCall {
        plugin: String,
        #[source]
        source: Box<CallError>,
    },
    #[error(transparent)]
    Cache(#[from] CacheError),
}

impl LoadError {
    pub fn kind(&self) -> &'static str {
        match self {
            LoadError::Read { .. } => "read",
            LoadError::NotAComponent { .. } => "not_a_component",
            LoadError::Compile { .. } => "compile",
            LoadError::ContractMismatch { .. } => "contract_mismatch",
            LoadError::MissingExport { .. } => "missing_export",
            LoadError::Link { .. } => "link",
            LoadError::Manifest { .. } => "manifest",
            LoadError::ManifestCall { .. } => "manifest_call",
            LoadError::Cache(_) => "cache",
        }
    }
}

/// A call into a plugin failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The plugin returned an error of its own (not a trap).
    #[error("plugin {plugin} reported {error}")]
    Plugin { plugin: String, error: ReconcileError },
    #[error("plugin {plugin} exceeded its deadline of {deadline:?} in {op}")]
    DeadlineExceeded { plugin: String, op: &'static str, deadline: Duration },
    #[error("plugin {plugin} hit its memory limit of {limit} bytes in {op}")]
    MemoryLimit { plugin: String, op: &'static str, limit: usize },
    #[error("plugin {plugin} panicked in {op}: {message}")]
    Panic { plugin: String, op: &'static str, message: String },
    #[error("plugin {plugin} trapped in {op}: {message}")]
    Trap { plugin: String, op: &'static str, message: String },
    #[error("plugin {plugin} returned invalid output from {op}: {detail}")]
    InvalidOutput { plugin: String, op: &'static str, detail: String },
    #[error("plugin {plugin} could not be instantiated: {detail}")]
    Instantiate { plugin: String, detail: String },
    #[error("the host is shutting down")]
    ShuttingDown,
}

impl CallError {
    /// A short label for metrics and conditions.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Plugin { .. } => "plugin_error",
            CallError::DeadlineExceeded { .. } => "deadline",
            CallError::MemoryLimit { .. } => "memory",
            CallError::Panic { .. } => "panic",
            CallError::Trap { .. } => "trap",
            CallError::InvalidOutput { .. } => "invalid_output",
            CallError::Instantiate { .. } => "instantiate",
            CallError::ShuttingDown => "shutdown",
        }
    }

    /// The UpperCamelCase reason used for Events and conditions.
    pub fn reason(&self) -> String {
        match self {
            CallError::Plugin { error, .. } => error.reason.clone(),
            CallError::DeadlineExceeded { .. } => "PluginDeadlineExceeded".into(),
            CallError::MemoryLimit { .. } => "PluginMemoryLimit".into(),
            CallError::Panic { .. } => "PluginPanicked".into(),
            CallError::Trap { .. } => "PluginTrapped".into(),
            CallError::InvalidOutput { .. } => "PluginInvalidOutput".into(),
            CallError::Instantiate { .. } => "PluginInstantiateFailed".into(),
            CallError::ShuttingDown => "ShuttingDown".into(),
        }
    }

    /// Whether calling again later may help. A trap may depend on the input
    /// and is retried with backoff; a plugin error says so itself.
    pub fn retryable(&self) -> bool {
        match self {
            CallError::Plugin { error, .. } => error.retryable,
            _ => true,
        }
    }
}
