//! Logging from a plugin. In Wasm each line goes to the host's `log` import
//! (tagged there with the plugin's name); natively it goes to the sink set
//! with [`set_native_sink`], stderr by default.
//!
//! The macros take format arguments: `info!("created {name}")`.

use std::sync::OnceLock;

pub use crate::contract::Level;

type Sink = fn(Level, &str);
static NATIVE_SINK: OnceLock<Sink> = OnceLock::new();

/// Routes native-build log lines (tests, benchmarks, native mode) somewhere
/// other than stderr. Only the first call takes effect.
pub fn set_native_sink(sink: Sink) {
    let _ = NATIVE_SINK.set(sink);
}

/// Writes one log line.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    crate::guest::log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    match NATIVE_SINK.get() {
        Some(sink) => sink(level, message),
        None => eprintln!("[{level:?}] {message}"),
    }
}

/// Logs `message` at debug level (the [`debug!`](crate::debug) macro formats).
pub fn debug(message: &str) {
    log(Level::Debug, message)
}

/// Logs `message` at info level (the [`info!`](crate::info) macro formats).
pub fn info(message: &str) {
    log(Level::Info, message)
}

/// Logs `message` at warn level (the [`warn!`](crate::warn) macro formats).
pub fn warn(message: &str) {
    log(Level::Warn, message)
}

/// Logs `message` at error level (the [`error!`](crate::error) macro formats).
pub fn error(message: &str) {
    log(Level::Error, message)
}

/// Logs `message` at trace level (the [`trace!`](crate::trace) macro formats).
pub fn trace(message: &str) {
    log(Level::Trace, message)
}

/// Logs at `Trace` with format arguments.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)+) => { $crate::log::log($crate::log::Level::Trace, &::std::format!($($arg)+)) };
}

/// Logs at `Debug` with format arguments.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)+) => { $crate::log::log($crate::log::Level::Debug, &::std::format!($($arg)+)) };
}

/// Logs at `Info` with format arguments: `info!("created {name}")`.
#[macro_export]
macro_rules! info {
    ($($arg:tt)+) => { $crate::log::log($crate::log::Level::Info, &::std::format!($($arg)+)) };
}

/// Logs at `Warn` with format arguments.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)+) => { $crate::log::log($crate::log::Level::Warn, &::std::format!($($arg)+)) };
}

/// Logs at `Error` with format arguments.
#[macro_export]
macro_rules! error {
    ($($arg:tt)+) => { $crate::log::log($crate::log::Level::Error, &::std::format!($($arg)+)) };
}
