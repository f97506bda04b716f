//! kmock patch: a memory budget for one decode (see vendor/README.md).
//!
//! Every element of an array takes at least one byte on the wire but `size_of::<T>()` bytes
//! once decoded (72 for a Metadata topic), and every tagged field two bytes on the wire but an
//! entry of a B-tree map once decoded. [`with_budget`] bounds what one decode may allocate:
//! each array charges `len * size_of::<T>()` before it is allocated, each tagged field
//! [`TAGGED_FIELD_BYTES`], and a decode whose charges exceed the budget fails. Strings and
//! byte fields are slices of the frame and cost nothing more. Outside [`with_budget`] nothing
//! is charged (upstream behaviour).

use std::cell::Cell;
use std::mem::size_of;

use anyhow::{bail, Result};

/// What a tagged field costs once decoded: an `(i32, Bytes)` entry of a `BTreeMap` and its
/// share of a B-tree node, which appends leave about half full.
pub const TAGGED_FIELD_BYTES: usize = 2 * size_of::<(i32, bytes::Bytes)>();

thread_local! {
    /// `(budget, bytes left)` of the decode running on this thread, if it has a budget.
    static BUDGET: Cell<Option<(usize, usize)>> = const { Cell::new(None) };
}

/// Runs `decode` with `bytes` of memory allowed for the arrays and tagged fields it decodes
/// on this thread; a charge past the budget makes that decode fail with an error saying so.
/// The previous budget, if any, is restored afterwards (also when `decode` panics).
pub fn with_budget<R>(bytes: usize, decode: impl FnOnce() -> R) -> R {
    struct Restore(Option<(usize, usize)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BUDGET.with(|b| b.set(self.0));
        }
    }
    let _restore = Restore(BUDGET.with(|b| b.replace(Some((bytes, bytes)))));
    decode()
}

/// Charges `bytes` against the budget in force, if any.
///
/// # Errors
/// When the budget in force has fewer than `bytes` left.
pub fn charge(bytes: usize) -> Result<()> {
    BUDGET.with(|b| match b.get() {
        None => Ok(()),
        Some((budget, left)) if bytes <= left => {
            b.set(Some((budget, left - bytes)));
            Ok(())
        }
        Some((budget, _)) => bail!(
            "decoding needs more than its memory budget of {budget} bytes (decode budget exceeded)"
        ),
    })
}

/// Charges an array of `len` elements of `T`, before it is allocated.
///
/// # Errors
/// As [`charge`].
pub fn charge_array<T>(len: usize) -> Result<()> {
    charge(len.saturating_mul(size_of::<T>()))
}

/// Charges `count` tagged fields, before they are read.
///
/// # Errors
/// As [`charge`].
pub fn charge_tagged_fields(count: u32) -> Result<()> {
    charge((count as usize).saturating_mul(TAGGED_FIELD_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_past_the_budget_fails_and_the_budget_ends_with_its_scope() {
        with_budget(100, || {
            charge(60).unwrap();
            assert!(charge(41)
                .unwrap_err()
                .to_string()
                .contains("decode budget exceeded"));
            charge(40).unwrap();
        });
        charge(usize::MAX).unwrap();
    }
}
