//! The process heap under glibc's malloc: its free pages handed back to the
//! OS once start-up is over and after each background compile, and one
//! arena for the whole process.
//!
//! glibc's allocator keeps what a process freed for reuse: after start-up
//! that is Cranelift's working memory when plugins were compiled (hundreds
//! of MiB for a few plugins) and the parsed pages of the initial lists, none
//! of which an idle host needs again. The sandbox, which compiles, and the
//! manager, which knows when start-up is over, both trim through here. `malloc_trim` releases the free pages
//! of every arena (not only the top of the heap); the allocator works as
//! before and maps pages again when it needs them.

/// Releases free heap pages to the OS (glibc only; elsewhere nothing).
pub fn release_free_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists under its locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Limits malloc to one arena unless the environment chose otherwise
/// (`MALLOC_ARENA_MAX` or `GLIBC_TUNABLES` win). Call before the runtime's
/// threads start.
///
/// glibc gives each thread that meets a locked heap an arena of its own, up
/// to eight per core. Every Wasm call runs through `block_in_place`, which
/// hands the worker's queue to a fresh thread: a burst of reconciles (a
/// start-up with a thousand parents) briefly runs dozens of threads, and the
/// arenas they opened keep their freed pages. With 1,000 CronJobs and 1,000
/// Jobs cached, an idle host held 44-46 MiB with the default and 38-40 MiB
/// with one arena (peak 55-57 MiB against 45). Allocation is mostly
/// per-thread caches (tcache) either way; the lock is taken for refills only.
pub fn limit_arenas() {
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
