//! The fragmentation figure of the out-of-memory errors of pools and arenas.

/// `"free: F bytes, largest free block: L bytes (fragmentation P%)"`, where fragmentation is the
/// share of free bytes outside the largest free block (0% when all free memory is one block; near
/// 100% when it is scattered in small pieces).
///
/// ```ignore
/// assert_eq!(free_space(1000, 250), "free: 1000 bytes, largest free block: 250 bytes (fragmentation 75.0%)");
/// ```
pub(crate) fn free_space(free: usize, largest: usize) -> String {
    let fragmentation = if free == 0 {
        0.0
    } else {
        100.0 * (free - largest.min(free)) as f64 / free as f64
    };
    format!(
        "free: {free} bytes, largest free block: {largest} bytes (fragmentation {fragmentation:.1}%)"
    )
}

#[cfg(test)]
mod tests {
    use super::free_space;

    #[test]
    fn names_free_bytes_largest_block_and_share_outside_it() {
        assert_eq!(
            free_space(1000, 250),
            "free: 1000 bytes, largest free block: 250 bytes (fragmentation 75.0%)"
        );
        assert!(free_space(0, 0).ends_with("(fragmentation 0.0%)"));
        assert!(free_space(4096, 4096).ends_with("(fragmentation 0.0%)"));
    }
}
