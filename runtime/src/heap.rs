//! Hands the heap's free pages back to the OS once start-up is over.
//!
//! glibc's allocator keeps what a process freed for reuse: after start-up
//! that is Cranelift's working memory when plugins were compiled (hundreds
//! of MiB for a few plugins) and the parsed pages of the initial lists, none
//! of which an idle host needs again. `malloc_trim` releases the free pages
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
