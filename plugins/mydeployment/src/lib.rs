//! under construction
