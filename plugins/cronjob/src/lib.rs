//! under construction
pub mod schedule;
