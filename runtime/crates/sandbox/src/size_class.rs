//! Calls grouped by the bytes they pass, each group in pool slots of its own.
//!
//! After each call wasmtime resets the call's pool slot in place: it finds
//! the pages still resident (PAGEMAP_SCAN) and resets them, up to the kept
//! size, so the next call does not page-fault them in again. Without
//! userfaultfd write-protection a page reads as written for as long as it
//! stays resident, so the pages one large call dirtied are reset again after
//! every later call in that slot, whatever that call touched: after a single
//! reconcile of 1,000 children (5.4 MiB dirtied), every 10-child call of that
//! plugin reset the whole 2 MiB first chunk of the guest's arena, and took
//! ~90 µs longer (`bench hook` after 1,000-child calls: 330 vs 225 µs).
//!
//! A slot keeps an affinity to the module whose instance it last held, so
//! each size class gets its own copy of the component (its own module ids),
//! made on the class's first call: a class's slots keep resident only what
//! calls of about that size dirty. Classes are a factor of 8 apart in bytes
//! passed, so the pages a class's largest call dirties are ones most of its
//! calls touch too, where keeping them resident pays.

use std::sync::{Arc, OnceLock};

use wasmtime::component::{Component, Linker};

use super::contract::Minor;
use super::pre::Pre;
use super::wasi::CallState;

/// Bytes passed below which a call is in the smallest class: a reconcile of
/// a few dozen children (a CronJob's Job is about 1.5 KB of JSON).
const SMALLEST_CLASS_BELOW: usize = 64 << 10;
/// Each class above the smallest takes calls up to this factor larger.
const CLASS_FACTOR: usize = 8;
/// Classes in all; the last one takes everything larger.
const CLASSES: usize = 3;

/// The class of a call that passes `bytes` of text (objects and arguments).
pub(super) fn class_of(bytes: usize) -> usize {
    let mut bound = SMALLEST_CLASS_BELOW;
    for class in 0..CLASSES - 1 {
        if bytes < bound {
            return class;
        }
        bound = bound.saturating_mul(CLASS_FACTOR);
    }
    CLASSES - 1
}

/// One build of a plugin, ready to instantiate in each size class.
pub(super) struct SizeClasses {
    /// The component as loaded.
    first: Pre,
    /// The other classes' copies, made on first use; `None` if that copy
    /// could not be made (those calls then share the first class's slots).
    copies: [OnceLock<Option<Pre>>; CLASSES - 1],
    linker: Linker<CallState>,
    minor: Minor,
    label: Arc<str>,
}

impl SizeClasses {
    /// `pre` was linked by `linker`.
    pub(super) fn new(pre: Pre, linker: Linker<CallState>, minor: Minor, label: &str) -> Self {
        Self { first: pre, copies: Default::default(), linker, minor, label: label.into() }
    }

    /// The build for a call passing `bytes`. A class's copy is made once, on
    /// its first call (a few milliseconds: the compiled code is copied, not
    /// compiled again); if that fails, its calls run in the first class.
    pub(super) fn for_input(&self, bytes: usize) -> &Pre {
        let Some(copy) = class_of(bytes).checked_sub(1).map(|i| &self.copies[i]) else { return &self.first };
        let made = copy.get_or_init(|| {
            self.copy()
                .inspect_err(|e| tracing::warn!(plugin = &*self.label, error = %format!("{e:#}"), "cannot copy the plugin for a size class; its calls share the first class's slots"))
                .ok()
        });
        made.as_ref().unwrap_or(&self.first)
    }

    /// A copy of the component with its own module ids, linked as the first.
    fn copy(&self) -> wasmtime::Result<Pre> {
        let component = self.first.component();
        let bytes = component.serialize()?;
        // SAFETY: the bytes are this engine's own serialization of a
        // component it compiled or loaded, unchanged, which is what
        // `deserialize` requires.
        let copy = unsafe { Component::deserialize(component.engine(), &bytes)? };
        Pre::new(&self.linker, &copy, self.minor, &self.label).map_err(wasmtime::Error::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_a_factor_of_eight_apart_and_the_last_takes_everything_larger() {
        assert_eq!(class_of(0), 0);
        assert_eq!(class_of(16_032), 0, "a 10-Job reconcile");
        assert_eq!(class_of((64 << 10) - 1), 0);
        assert_eq!(class_of(64 << 10), 1);
        assert_eq!(class_of(152_743), 1, "a 100-Job reconcile");
        assert_eq!(class_of((512 << 10) - 1), 1);
        assert_eq!(class_of(512 << 10), 2);
        assert_eq!(class_of(1_519_844), 2, "a 1,000-Job reconcile");
        assert_eq!(class_of(usize::MAX), 2);
    }
}
