//! How many heaps glibc's malloc keeps for `host run`: one.
//!
//! glibc gives each thread that meets a locked heap an arena of its own, up
//! to eight per core. The host's threads are few (tokio's workers, the epoch
//! ticker), but every Wasm call runs through `block_in_place`, which hands
//! the worker's queue to a fresh thread: a burst of reconciles (a start-up
//! with a thousand parents) briefly runs dozens of threads, and the arenas
//! they opened keep their freed pages. With 1,000 CronJobs and 1,000 Jobs
//! cached, an idle host held 44-46 MiB with the default and 38-40 MiB with
//! one arena (peak 55-57 MiB against 45). Allocation is mostly per-thread
//! caches (tcache) either way; the lock is taken for refills only.
//!
//! `MALLOC_ARENA_MAX` or `GLIBC_TUNABLES` in the environment win: an
//! operator who set either keeps that setting.

/// Limits malloc to one arena unless the environment chose otherwise. Call
/// before the runtime's threads start.
pub fn limit() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() && std::env::var_os("GLIBC_TUNABLES").is_none() {
        // SAFETY: mallopt only sets a parameter of malloc, under malloc's
        // own lock; it touches no memory of ours.
        let ok = unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
        if ok != 1 {
            tracing::debug!("mallopt(M_ARENA_MAX, 1) refused; malloc keeps its default arenas");
        }
    }
}
