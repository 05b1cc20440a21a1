//! The guest's global allocator: a bump arena over linear memory.
//!
//! Every host call runs in a fresh instance whose memory is thrown away when
//! the call returns, so freeing is wasted work: the allocator only moves a
//! pointer forward, reclaims the most recent block when it is freed or
//! shrunk, and grows the newest block in place (the common case of a
//! `String` or `Vec` being built). When the arena is exhausted it asks for
//! more pages with `memory.grow`, so the host's memory cap still holds: a
//! growth past it traps, and the call fails as "memory limit hit".
//!
//! On by default for Wasm builds (feature `arena`); a plugin that brings
//! its own `#[global_allocator]` turns the feature off.

use core::alloc::Layout;

/// The arena's state: the next free byte and the end of the current chunk.
/// Chunks come from `grow`, which returns the start of `pages` new Wasm
/// pages, or `None` when memory cannot grow.
#[derive(Debug, Default)]
pub(crate) struct Bump {
    top: usize,
    end: usize,
}

pub(crate) const PAGE: usize = 64 << 10;
/// Bytes the arena serves before it first grows memory: a reconcile of a few
/// dozen children fits, so it needs no `memory.grow`, which the host turns
/// into an `mprotect` (and another to reset the slot after the call). Part
/// of the plugin's initial memory (4 MiB with `cargo xtask build`).
#[cfg_attr(not(all(target_arch = "wasm32", feature = "arena")), allow(dead_code))]
const FIRST_CHUNK: usize = 2 << 20;
/// Pages asked for at least per growth, so small allocations do not call
/// `memory.grow` one page at a time.
const MIN_GROWTH_PAGES: usize = 32;

impl Bump {
    /// Serves allocations from `[start, start + len)` until it is used up,
    /// then from grown pages.
    #[cfg_attr(not(all(target_arch = "wasm32", feature = "arena")), allow(dead_code))]
    pub(crate) fn start_with(&mut self, start: usize, len: usize) {
        self.top = start;
        self.end = start + len;
    }

    #[cfg_attr(not(all(target_arch = "wasm32", feature = "arena")), allow(dead_code))]
    pub(crate) fn is_unstarted(&self) -> bool {
        self.end == 0
    }

    pub(crate) fn alloc(&mut self, layout: Layout, grow: &mut impl FnMut(usize) -> Option<usize>) -> *mut u8 {
        let size = layout.size().max(1);
        let start = self.top.next_multiple_of(layout.align());
        if let Some(new_top) = start.checked_add(size)
            && self.end != 0
            && new_top <= self.end
        {
            self.top = new_top;
            return start as *mut u8;
        }
        self.alloc_grown(size, layout.align(), grow)
    }

    /// Allocates from new pages. If they follow the current chunk (nothing
    /// else grew memory meanwhile), the chunk is extended; else the rest of
    /// the old chunk is abandoned.
    fn alloc_grown(&mut self, size: usize, align: usize, grow: &mut impl FnMut(usize) -> Option<usize>) -> *mut u8 {
        let Some(need) = size.checked_add(align) else { return core::ptr::null_mut() };
        let pages = need.div_ceil(PAGE).max(MIN_GROWTH_PAGES);
        let Some(base) = grow(pages) else { return core::ptr::null_mut() };
        if base != self.end || self.end == 0 {
            self.top = base;
        }
        self.end = base + pages * PAGE;
        let start = self.top.next_multiple_of(align);
        self.top = start + size;
        start as *mut u8
    }

    /// Frees only the newest block (a LIFO pattern that temporaries follow);
    /// any other block stays until the instance is dropped.
    pub(crate) fn dealloc(&mut self, ptr: *mut u8, layout: Layout) {
        if ptr as usize + layout.size().max(1) == self.top {
            self.top = ptr as usize;
        }
    }

    pub(crate) fn realloc(&mut self, ptr: *mut u8, layout: Layout, new_size: usize, grow: &mut impl FnMut(usize) -> Option<usize>) -> *mut u8 {
        let old = layout.size().max(1);
        let new = new_size.max(1);
        let at = ptr as usize;
        // The newest block grows or shrinks where it is.
        if at + old == self.top
            && let Some(new_top) = at.checked_add(new)
            && new_top <= self.end
        {
            self.top = new_top;
            return ptr;
        }
        if new <= old {
            return ptr;
        }
        let Ok(new_layout) = Layout::from_size_align(new, layout.align()) else { return core::ptr::null_mut() };
        let moved = self.alloc(new_layout, grow);
        if !moved.is_null() {
            // SAFETY: both blocks are live, `old` bytes long at least, and
            // distinct (the new one lies above the old one's end).
            unsafe { core::ptr::copy_nonoverlapping(ptr, moved, old.min(new)) };
        }
        moved
    }
}

#[cfg(all(target_arch = "wasm32", feature = "arena"))]
mod global {
    use core::alloc::{GlobalAlloc, Layout};
    use core::cell::UnsafeCell;

    use super::{Bump, FIRST_CHUNK, PAGE};

    struct Arena(UnsafeCell<Bump>);

    /// The first chunk, in `.bss`: zeroed memory every instance starts with,
    /// so it adds no bytes to the component and nothing to copy at
    /// instantiation, and pages a call never touches cost nothing.
    #[repr(align(16))]
    struct FirstChunk(UnsafeCell<[u8; FIRST_CHUNK]>);

    // SAFETY: as `Arena`, single-threaded; only its address is taken.
    unsafe impl Sync for FirstChunk {}

    static FIRST: FirstChunk = FirstChunk(UnsafeCell::new([0; FIRST_CHUNK]));

    /// The arena, started on the first chunk at its first use.
    #[allow(clippy::mut_from_ref, reason = "single-threaded; each use of the reference ends before the next call")]
    fn bump(arena: &Arena) -> &mut Bump {
        // SAFETY: single-threaded, and no call re-enters the allocator.
        let bump = unsafe { &mut *arena.0.get() };
        if bump.is_unstarted() {
            bump.start_with(FIRST.0.get() as usize, FIRST_CHUNK);
        }
        bump
    }

    // SAFETY: plugin instances are single-threaded (no wasm threads), so the
    // cell is never touched from two threads.
    unsafe impl Sync for Arena {}

    #[global_allocator]
    static ARENA: Arena = Arena(UnsafeCell::new(Bump { top: 0, end: 0 }));

    fn grow(pages: usize) -> Option<usize> {
        let old = core::arch::wasm32::memory_grow(0, pages);
        (old != usize::MAX).then(|| old * PAGE)
    }

    unsafe impl GlobalAlloc for Arena {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            bump(self).alloc(layout, &mut grow)
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            bump(self).dealloc(ptr, layout)
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            bump(self).realloc(ptr, layout, new_size, &mut grow)
        }
        // alloc_zeroed: the default (alloc + write zeroes) is right, since
        // a block freed and reused at the top may hold old bytes.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake linear memory: `grow` hands out page-aligned addresses
    /// upwards from 1 MiB, optionally with a gap (another allocator grew).
    struct Memory {
        next: usize,
        limit: usize,
        gap: usize,
    }

    impl Memory {
        fn grow(&mut self) -> impl FnMut(usize) -> Option<usize> + '_ {
            move |pages| {
                let base = self.next + self.gap;
                let end = base + pages * PAGE;
                if end > self.limit {
                    return None;
                }
                self.next = end;
                Some(base)
            }
        }
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    #[test]
    fn allocations_are_aligned_distinct_and_bumped() {
        let mut mem = Memory { next: 1 << 20, limit: 64 << 20, gap: 0 };
        let mut bump = Bump::default();
        let a = bump.alloc(layout(3, 1), &mut mem.grow()) as usize;
        let b = bump.alloc(layout(8, 8), &mut mem.grow()) as usize;
        assert_eq!(a, 1 << 20);
        assert_eq!(b % 8, 0);
        assert!(b >= a + 3);
        assert_eq!(mem.next, (1 << 20) + MIN_GROWTH_PAGES * PAGE, "one growth served both");
    }

    #[test]
    fn the_newest_block_is_freed_and_grown_in_place() {
        let mut mem = Memory { next: 1 << 20, limit: 64 << 20, gap: 0 };
        let mut bump = Bump::default();
        let a = bump.alloc(layout(16, 8), &mut mem.grow());
        let b = bump.realloc(a, layout(16, 8), 4096, &mut mem.grow());
        assert_eq!(a, b, "the top block grows in place");
        bump.dealloc(b, layout(4096, 8));
        let c = bump.alloc(layout(16, 8), &mut mem.grow());
        assert_eq!(c, a, "freeing the top block reclaims it");
    }

    #[test]
    fn a_block_below_the_top_moves_with_its_bytes() {
        // This test writes through the pointers, so its memory is real.
        let mut backing = vec![0u8; (MIN_GROWTH_PAGES + 1) * PAGE];
        let start = backing.as_mut_ptr() as usize;
        let mut mem = Memory { next: start, limit: start + backing.len(), gap: 0 };
        let mut bump = Bump::default();
        let a = bump.alloc(layout(4, 1), &mut mem.grow());
        unsafe { a.copy_from(b"abcd".as_ptr(), 4) };
        let _b = bump.alloc(layout(4, 1), &mut mem.grow());
        let moved = bump.realloc(a, layout(4, 1), 8, &mut mem.grow());
        assert_ne!(moved, a);
        assert_eq!(unsafe { core::slice::from_raw_parts(moved, 4) }, b"abcd");
        drop(backing);
    }

    #[test]
    fn large_blocks_grow_memory_and_gaps_start_a_new_chunk() {
        let mut mem = Memory { next: 1 << 20, limit: 64 << 20, gap: 0 };
        let mut bump = Bump::default();
        let _ = bump.alloc(layout(8, 8), &mut mem.grow());
        mem.gap = PAGE;
        let big = bump.alloc(layout(3 * (1 << 20), 8), &mut mem.grow()) as usize;
        assert_eq!(big, (1 << 20) + MIN_GROWTH_PAGES * PAGE + PAGE, "starts at the new pages, past the gap");
        assert!(big + 3 * (1 << 20) <= mem.next);
    }

    #[test]
    fn a_first_chunk_serves_until_used_up_then_memory_grows() {
        let mut mem = Memory { next: 8 << 20, limit: 64 << 20, gap: 0 };
        let mut bump = Bump::default();
        assert!(bump.is_unstarted());
        bump.start_with(1 << 20, 4096);
        let a = bump.alloc(layout(4000, 8), &mut mem.grow()) as usize;
        assert_eq!(a, 1 << 20, "served from the first chunk");
        assert_eq!(mem.next, 8 << 20, "without growing memory");
        let b = bump.alloc(layout(200, 8), &mut mem.grow()) as usize;
        assert_eq!(b, 8 << 20, "past the chunk's end, from new pages");
    }

    #[test]
    fn exhausted_memory_is_a_null_pointer() {
        let mut mem = Memory { next: 1 << 20, limit: 2 << 20, gap: 0 };
        let mut bump = Bump::default();
        assert!(bump.alloc(layout(4 << 20, 8), &mut mem.grow()).is_null());
    }
}
