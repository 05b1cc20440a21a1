//! The per-call resource limiter: caps each linear memory and table of a
//! plugin instance and remembers *that* it refused, so a trap caused by the
//! cap is reported as "memory limit hit" rather than a generic trap.

use wasmtime::ResourceLimiter;

/// Limits for one Store (one call).
pub(crate) struct CallLimiter {
    memory_bytes: usize,
    table_elements: usize,
    /// Set when a growth past the cap was refused.
    pub(crate) memory_cap_hit: Option<usize>,
}

impl CallLimiter {
    pub(crate) fn new(memory_bytes: usize, table_elements: usize) -> Self {
        Self { memory_bytes, table_elements, memory_cap_hit: None }
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.memory_cap_hit = Some(desired);
            // Trap rather than return -1 from memory.grow: a Rust guest would
            // abort on allocation failure anyway, and a trap names the cause.
            wasmtime::bail!("memory limit of {} bytes exceeded (wanted {desired})", self.memory_bytes);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= self.table_elements)
    }
}
