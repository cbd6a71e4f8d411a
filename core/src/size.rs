//! Sizes written as text, as RMM's Python API accepts them (`"1GiB"`, `"512 MB"`, `"100"`).

use crate::{Error, Result};

/// Parses a byte size the way RMM's `rmm.pylibrmm.helper.parse_bytes` does: a decimal number
/// (digits, optionally `.` and more digits; no sign, no exponent), optional spaces or tabs, and an
/// optional case-insensitive unit: `b`, `kb`..`pb` (powers of 1000) or `kib`..`pib` (powers of
/// 1024). No unit means bytes. The result is the product truncated toward zero.
///
/// ```
/// use rmm_core::size::parse_bytes;
/// assert_eq!(parse_bytes("1GiB").unwrap(), 1 << 30);
/// assert_eq!(parse_bytes("1.5 kb").unwrap(), 1500);
/// assert_eq!(parse_bytes("100").unwrap(), 100);
/// assert!(parse_bytes("MiB").is_err());
/// assert!(parse_bytes("1e3").is_err());
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`] ("Could not parse ... as a byte specification") for any other text,
/// and for a size that does not fit in `usize`.
pub fn parse_bytes(text: &str) -> Result<usize> {
    let cannot = || Error::invalid(format!("Could not parse {text} as a byte specification"));
    let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    if digits_end == 0 {
        return Err(cannot());
    }
    let mut number_end = digits_end;
    if text[number_end..].starts_with('.') {
        number_end += 1;
        number_end += text[number_end..].find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len() - number_end);
    }
    let (number, rest) = text.split_at(number_end);
    let unit = rest.trim_start_matches([' ', '\t']).to_ascii_lowercase();
    let multiplier: f64 = match unit.as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "pb" => 1e15,
        "kib" => 1024f64,
        "mib" => 1024f64.powi(2),
        "gib" => 1024f64.powi(3),
        "tib" => 1024f64.powi(4),
        "pib" => 1024f64.powi(5),
        _ => return Err(cannot()),
    };
    let value: f64 = number.parse().map_err(|_| cannot())?;
    let bytes = (value * multiplier).trunc();
    if !bytes.is_finite() || bytes >= usize::MAX as f64 {
        return Err(cannot());
    }
    // Exact for integers below 2^53; larger products keep f64's precision, as RMM's float does.
    Ok(bytes as usize)
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn accepts_what_rmms_pattern_accepts() {
        assert_eq!(parse_bytes("0").unwrap(), 0);
        assert_eq!(parse_bytes("256").unwrap(), 256);
        assert_eq!(parse_bytes("2.").unwrap(), 2);
        assert_eq!(parse_bytes("1 MiB").unwrap(), 1 << 20);
        assert_eq!(parse_bytes("1\tmib").unwrap(), 1 << 20);
        assert_eq!(parse_bytes("3KB").unwrap(), 3000);
        assert_eq!(parse_bytes("2b").unwrap(), 2);
        assert_eq!(parse_bytes("0.5GiB").unwrap(), 1 << 29);
        assert_eq!(parse_bytes("1tib").unwrap(), 1 << 40);
    }

    #[test]
    fn rejects_what_rmms_pattern_rejects() {
        for bad in ["", "MiB", " 1MiB", "1 0 MiB", "1e3kb", "-1", "+1", ".5", "2k", "1 MiB ", "1iB", "abc", "1ib"] {
            let err = parse_bytes(bad).unwrap_err().to_string();
            assert!(err.contains("Could not parse"), "{bad:?}: {err}");
        }
    }
}
