//! Alignment helpers (RMM's `aligned.hpp`).

use crate::error::{Error, Result};

/// The alignment every resource guarantees by default, in bytes (`CUDA_ALLOCATION_ALIGNMENT`).
pub const DEFAULT_ALIGNMENT: usize = 256;

/// True when `n` is a power of two (0 is not).
pub const fn is_pow2(n: usize) -> bool {
    n != 0 && n & (n - 1) == 0
}

/// Checks that `alignment` is a power of two.
///
/// # Errors
/// [`Error::InvalidArgument`] otherwise.
pub fn check_alignment(alignment: usize) -> Result<()> {
    if is_pow2(alignment) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "alignment {alignment} is not a power of two"
        )))
    }
}

/// Checks an alignment for a base resource, which guarantees at most [`DEFAULT_ALIGNMENT`]
/// (RMM's `is_supported_base_resource_alignment`).
///
/// # Errors
/// [`Error::InvalidArgument`] for a non-power-of-two or an alignment above 256.
pub fn check_base_alignment(alignment: usize, resource: &str) -> Result<()> {
    check_alignment(alignment)?;
    if alignment > DEFAULT_ALIGNMENT {
        return Err(Error::invalid(format!(
            "{resource} guarantees {DEFAULT_ALIGNMENT}-byte alignment, {alignment} was requested \
             (wrap it in an aligned adaptor)"
        )));
    }
    Ok(())
}

/// Rounds `n` up to a multiple of `alignment` (a power of two), or `None` on overflow.
pub const fn align_up(n: usize, alignment: usize) -> Option<usize> {
    match n.checked_add(alignment - 1) {
        Some(v) => Some(v & !(alignment - 1)),
        None => None,
    }
}

/// Rounds `n` down to a multiple of `alignment` (a power of two).
pub const fn align_down(n: usize, alignment: usize) -> usize {
    n & !(alignment - 1)
}

/// True when `n` is a multiple of `alignment` (a power of two).
pub const fn is_aligned(n: usize, alignment: usize) -> bool {
    n & (alignment - 1) == 0
}

/// True when `ptr` is aligned to `alignment` (a power of two).
pub fn is_pointer_aligned<T>(ptr: *const T, alignment: usize) -> bool {
    is_aligned(ptr as usize, alignment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn powers_of_two() {
        assert!(!is_pow2(0));
        assert!(is_pow2(1) && is_pow2(256) && is_pow2(1 << 63));
        assert!(!is_pow2(3) && !is_pow2(257));
        assert!(check_alignment(0).is_err());
        assert!(check_alignment(48).is_err());
        assert!(check_base_alignment(512, "x").is_err());
        assert!(check_base_alignment(128, "x").is_ok());
    }

    #[test]
    fn align_up_reports_overflow() {
        assert_eq!(align_up(usize::MAX, 256), None);
        assert_eq!(align_up(0, 256), Some(0));
        assert_eq!(align_up(1, 256), Some(256));
    }

    proptest! {
        #[test]
        fn align_up_is_smallest_aligned_not_below(n in 0usize..(1 << 60), shift in 0u32..20) {
            let a = 1usize << shift;
            let up = align_up(n, a).unwrap();
            prop_assert!(is_aligned(up, a));
            prop_assert!(up >= n && up - n < a);
            let down = align_down(n, a);
            prop_assert!(is_aligned(down, a) && down <= n && n - down < a);
        }
    }
}
