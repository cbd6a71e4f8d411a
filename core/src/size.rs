//! Sizes written as text, as RMM's Python API accepts them (`"1GiB"`, `"512 MB"`, `"100"`).

use crate::{Error, Result};

/// Parses a byte size the way RMM's `rmm.pylibrmm.helper.parse_bytes` does: a decimal number
/// (digits, optionally `.` and more digits; no sign, no exponent), optional spaces or tabs, and an
/// optional case-insensitive unit: `b`, `kb`..`pb` (powers of 1000) or `kib`..`pib` (powers of
/// 1024). No unit means bytes. One trailing newline is allowed (RMM's pattern ends in `$`, which
/// matches before one). The result is the product truncated toward zero, as RMM's
/// `int(float(number) * multiplier)`: `"256.9"` is 256 bytes and `"0.1 KiB"` 102 in RMM too, so the
/// Python API, a drop-in, keeps that; [`parse_bytes_exact`] refuses such sizes instead.
///
/// Where RMM raises, this errs too: a unit alone (`"kib"`, `"MiB"`), `"2k"`, a sign, an exponent.
/// Where RMM's own conversion fails (its multiplier is a C `int`, so `"1 TB"`, `"1 TiB"` and the
/// `pb`/`pib` units raise `OverflowError` there), this returns the size.
///
/// ```
/// use rmm_core::size::parse_bytes;
/// assert_eq!(parse_bytes("1GiB").unwrap(), 1 << 30);
/// assert_eq!(parse_bytes("1.5 kb").unwrap(), 1500);
/// assert_eq!(parse_bytes("100").unwrap(), 100);
/// assert_eq!(parse_bytes("256.9").unwrap(), 256);
/// assert!(parse_bytes("MiB").is_err());
/// assert!(parse_bytes("kib").is_err());
/// assert!(parse_bytes("1e3").is_err());
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`] ("Could not parse ... as a byte specification") for any other text,
/// and for a size that does not fit in `usize`.
pub fn parse_bytes(text: &str) -> Result<usize> {
    let (int, frac, multiplier) = split(text)?;
    let number = if frac.is_empty() {
        int.to_owned()
    } else {
        format!("{int}.{frac}")
    };
    let value: f64 = number.parse().map_err(|_| cannot(text))?;
    let bytes = (value * multiplier as f64).trunc();
    if !bytes.is_finite() || bytes >= usize::MAX as f64 {
        return Err(cannot(text));
    }
    // Exact for integers below 2^53; larger products keep f64's precision, as RMM's float does.
    Ok(bytes as usize)
}

/// [`parse_bytes`]'s grammar, computed exactly in decimal, refusing a size that is not a whole
/// number of bytes: `"256.9"`, `"0.1 KiB"` (102.4 bytes) and `"1.0000001 kb"` are errors, `"1.5 kb"`
/// and `"0.5 KiB"` are 1500 and 512. For Rust callers that want a mistake in a size to be an error
/// rather than silently truncated (the Python API follows RMM and truncates).
///
/// ```
/// use rmm_core::size::parse_bytes_exact;
/// assert_eq!(parse_bytes_exact("0.5 KiB").unwrap(), 512);
/// assert!(parse_bytes_exact("256.9").unwrap_err().to_string().contains("not a whole number of bytes"));
/// ```
///
/// # Errors
/// [`Error::InvalidArgument`]: what [`parse_bytes`] refuses, a fraction of a byte, or a size that
/// does not fit in `usize`.
pub fn parse_bytes_exact(text: &str) -> Result<usize> {
    let (int, frac, multiplier) = split(text)?;
    let too_large = || {
        Error::invalid(format!(
            "{} is too large a byte count",
            text.trim_end_matches('\n')
        ))
    };
    // value = digits / 10^len(frac); bytes = digits * multiplier / 10^len(frac), in u128.
    let frac = frac.trim_end_matches('0');
    let digits: u128 = format!("{int}{frac}")
        .trim_start_matches('0')
        .parse()
        .or_else(|e: std::num::ParseIntError| match e.kind() {
            std::num::IntErrorKind::Empty => Ok(0),
            _ => Err(too_large()),
        })?;
    let scale = 10u128
        .checked_pow(u32::try_from(frac.len()).map_err(|_| too_large())?)
        .ok_or_else(too_large)?;
    let product = digits
        .checked_mul(multiplier as u128)
        .ok_or_else(too_large)?;
    if product % scale != 0 {
        let fraction = format!("{:0width$}", product % scale, width = frac.len());
        return Err(Error::invalid(format!(
            "{} is not a whole number of bytes ({}.{} bytes)",
            text.trim_end_matches('\n'),
            product / scale,
            fraction.trim_end_matches('0')
        )));
    }
    usize::try_from(product / scale).map_err(|_| too_large())
}

fn cannot(text: &str) -> Error {
    Error::invalid(format!("Could not parse {text} as a byte specification"))
}

/// RMM's pattern `^([0-9]+(?:\.[0-9]*)?)[\t ]*((?i:(?:[kmgtp]i?)?b))?$`: the integer digits, the
/// fraction digits and the unit's multiplier.
fn split(text: &str) -> Result<(&str, &str, u64)> {
    // Python's `$` also matches before one final newline.
    let body = text.strip_suffix('\n').unwrap_or(text);
    let int_end = body
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(body.len());
    if int_end == 0 {
        return Err(cannot(text));
    }
    let (int, mut rest) = body.split_at(int_end);
    let mut frac = "";
    if let Some(after) = rest.strip_prefix('.') {
        let end = after
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(after.len());
        (frac, rest) = after.split_at(end);
    }
    let multiplier: u64 = match rest
        .trim_start_matches([' ', '\t'])
        .to_ascii_lowercase()
        .as_str()
    {
        "" | "b" => 1,
        "kb" => 1000,
        "mb" => 1000u64.pow(2),
        "gb" => 1000u64.pow(3),
        "tb" => 1000u64.pow(4),
        "pb" => 1000u64.pow(5),
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "pib" => 1 << 50,
        _ => return Err(cannot(text)),
    };
    Ok((int, frac, multiplier))
}

#[cfg(test)]
mod tests {
    use super::{parse_bytes, parse_bytes_exact};

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
        for bad in [
            "", "MiB", " 1MiB", "1 0 MiB", "1e3kb", "-1", "+1", ".5", "2k", "1 MiB ", "1iB", "abc",
            "1ib", "kib", "KiB", "b", "kb", "1\n\n", "\n", "1 MiB\n ", "1_000", "１",
        ] {
            let err = parse_bytes(bad).unwrap_err().to_string();
            assert!(err.contains("Could not parse"), "{bad:?}: {err}");
            let err = parse_bytes_exact(bad).unwrap_err().to_string();
            assert!(err.contains("Could not parse"), "{bad:?}: {err}");
        }
    }

    /// RMM's Python `parse_bytes` is `int(float(number) * multiplier)`: fractions of a byte are
    /// truncated there, so the drop-in truncates too.
    #[test]
    fn fractions_of_a_byte_truncate_as_in_rmm() {
        assert_eq!(parse_bytes("256.9").unwrap(), 256);
        assert_eq!(parse_bytes("256.9 b").unwrap(), 256);
        assert_eq!(parse_bytes("0.1 KiB").unwrap(), 102);
        assert_eq!(parse_bytes("0.9").unwrap(), 0);
        // Python's `$` matches before one final newline: "1MiB\n" is a size in RMM too.
        assert_eq!(parse_bytes("1MiB\n").unwrap(), 1 << 20);
    }

    #[test]
    fn the_exact_parser_refuses_fractions_of_a_byte() {
        for (text, bytes) in [
            ("256", 256),
            ("256.0", 256),
            ("256.", 256),
            ("1.5 kb", 1500),
            ("0.3 kb", 300),
            ("0.5 KiB", 512),
            ("0.25GiB", 1 << 28),
            ("007 b", 7),
            ("0", 0),
            ("0.000", 0),
        ] {
            assert_eq!(parse_bytes_exact(text).unwrap(), bytes, "{text}");
        }
        for (text, shown) in [
            ("256.9", "256.9 bytes"),
            ("0.1 KiB", "102.4 bytes"),
            ("1.0001 kb", "1000.1 bytes"),
            ("0.5", "0.5 bytes"),
        ] {
            let err = parse_bytes_exact(text).unwrap_err().to_string();
            assert!(
                err.contains("not a whole number of bytes") && err.contains(shown),
                "{text}: {err}"
            );
        }
        assert!(
            parse_bytes_exact("99999999999999999999999999999999999999999 PiB")
                .unwrap_err()
                .to_string()
                .contains("too large")
        );
        assert!(parse_bytes_exact("16384 PiB")
            .unwrap_err()
            .to_string()
            .contains("too large"));
    }
}
