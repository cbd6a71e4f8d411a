//! DLPack data types ↔ format strings.
//!
//! [`format_of`] writes the `"<f4"`-style string of the array interface (byte order, kind, item
//! size in bytes) for every DLPack type that has one: `|b1` bool, `|i1`/`<i2`/`<i4`/`<i8`,
//! `|u1`..`<u8`, `<f2`/`<f4`/`<f8`, `<c4`/`<c8`/`<c16`, `|V<n>` opaque bytes. The types NumPy has
//! no letter for use their `ml_dtypes` names: `bfloat16`, `float8_e4m3fn`, `float4_e2m1fn`, ....
//! A vector type (lanes > 1) appends `x<lanes>` (`<f4x4`).
//!
//! [`dtype_of_format`] reads those strings back and also the buffer protocol's `struct`-module
//! codes (`"?"`, `"b"`, `"<i"`, `"=q"`, `"@d"`, `"Zf"`, ...) that NumPy and `memoryview` export.
//! Big-endian data is refused ([`Error::Unsupported`]): DLPack has no byte order and CUDA devices
//! are little-endian.

use super::dlpack::{type_code as tc, DLDataType};
use crate::error::{Error, Result};

/// The `ml_dtypes` names of the DLPack types NumPy has no letter for: (code, bits, name).
const NAMED: &[(u8, u8, &str)] = &[
    (tc::BFLOAT, 16, "bfloat16"),
    (tc::FLOAT8_E3M4, 8, "float8_e3m4"),
    (tc::FLOAT8_E4M3, 8, "float8_e4m3"),
    (tc::FLOAT8_E4M3B11FNUZ, 8, "float8_e4m3b11fnuz"),
    (tc::FLOAT8_E4M3FN, 8, "float8_e4m3fn"),
    (tc::FLOAT8_E4M3FNUZ, 8, "float8_e4m3fnuz"),
    (tc::FLOAT8_E5M2, 8, "float8_e5m2"),
    (tc::FLOAT8_E5M2FNUZ, 8, "float8_e5m2fnuz"),
    (tc::FLOAT8_E8M0FNU, 8, "float8_e8m0fnu"),
    (tc::FLOAT6_E2M3FN, 6, "float6_e2m3fn"),
    (tc::FLOAT6_E3M2FN, 6, "float6_e3m2fn"),
    (tc::FLOAT4_E2M1FN, 4, "float4_e2m1fn"),
];

/// Every scalar DLPack type this module maps (for tests and for callers that list them).
pub const ALL_DTYPES: &[DLDataType] = &[
    DLDataType::new(tc::BOOL, 8),
    DLDataType::new(tc::INT, 8),
    DLDataType::new(tc::INT, 16),
    DLDataType::new(tc::INT, 32),
    DLDataType::new(tc::INT, 64),
    DLDataType::new(tc::UINT, 8),
    DLDataType::new(tc::UINT, 16),
    DLDataType::new(tc::UINT, 32),
    DLDataType::new(tc::UINT, 64),
    DLDataType::new(tc::FLOAT, 16),
    DLDataType::new(tc::FLOAT, 32),
    DLDataType::new(tc::FLOAT, 64),
    DLDataType::new(tc::COMPLEX, 32),
    DLDataType::new(tc::COMPLEX, 64),
    DLDataType::new(tc::COMPLEX, 128),
    DLDataType::new(tc::OPAQUE_HANDLE, 8),
    DLDataType::new(tc::BFLOAT, 16),
    DLDataType::new(tc::FLOAT8_E3M4, 8),
    DLDataType::new(tc::FLOAT8_E4M3, 8),
    DLDataType::new(tc::FLOAT8_E4M3B11FNUZ, 8),
    DLDataType::new(tc::FLOAT8_E4M3FN, 8),
    DLDataType::new(tc::FLOAT8_E4M3FNUZ, 8),
    DLDataType::new(tc::FLOAT8_E5M2, 8),
    DLDataType::new(tc::FLOAT8_E5M2FNUZ, 8),
    DLDataType::new(tc::FLOAT8_E8M0FNU, 8),
    DLDataType::new(tc::FLOAT6_E2M3FN, 6),
    DLDataType::new(tc::FLOAT6_E3M2FN, 6),
    DLDataType::new(tc::FLOAT4_E2M1FN, 4),
];

/// The format string of `dtype` (see the module doc).
///
/// # Errors
/// [`Error::Unsupported`] for a code/bits pair DLPack does not define (e.g. a 12-bit integer).
pub fn format_of(dtype: DLDataType) -> Result<String> {
    let bad = || Error::Unsupported(format!("no format string for DLPack dtype {dtype:?}"));
    let bytes = dtype.bits / 8;
    let whole = dtype.bits % 8 == 0;
    let base = match dtype.code {
        tc::BOOL if dtype.bits == 8 => "|b1".to_owned(),
        tc::INT | tc::UINT if matches!(dtype.bits, 8 | 16 | 32 | 64) => {
            let order = if dtype.bits == 8 { '|' } else { '<' };
            let kind = if dtype.code == tc::INT { 'i' } else { 'u' };
            format!("{order}{kind}{bytes}")
        }
        tc::FLOAT if matches!(dtype.bits, 16 | 32 | 64) => format!("<f{bytes}"),
        tc::COMPLEX if matches!(dtype.bits, 32 | 64 | 128) => format!("<c{bytes}"),
        tc::OPAQUE_HANDLE if whole && dtype.bits > 0 => format!("|V{bytes}"),
        code => NAMED
            .iter()
            .find(|(c, b, _)| *c == code && *b == dtype.bits)
            .map(|(_, _, name)| (*name).to_owned())
            .ok_or_else(bad)?,
    };
    Ok(match dtype.lanes {
        0 => return Err(bad()),
        1 => base,
        lanes => format!("{base}x{lanes}"),
    })
}

/// The DLPack type of a format string: ours ([`format_of`]), NumPy's typestr, or a buffer-protocol
/// `struct` code (see the module doc).
///
/// # Errors
/// [`Error::InvalidArgument`] for an unknown string, [`Error::Unsupported`] for big-endian data.
pub fn dtype_of_format(format: &str) -> Result<DLDataType> {
    let unknown = || Error::invalid(format!("unknown or unsupported format string {format:?}"));
    let (base, lanes) = match format.rsplit_once('x') {
        Some((b, l)) if !b.is_empty() && l.bytes().all(|c| c.is_ascii_digit()) && !l.is_empty() => {
            (b, l.parse::<u16>().map_err(|_| unknown())?)
        }
        _ => (format, 1),
    };
    if lanes == 0 {
        return Err(unknown());
    }
    let with_lanes = |d: DLDataType| DLDataType { lanes, ..d };
    if let Some((_, (code, bits, _))) = NAMED
        .iter()
        .map(|n| (n.2, n))
        .find(|(name, _)| *name == base)
    {
        return Ok(with_lanes(DLDataType::new(*code, *bits)));
    }
    let (order, body) = match base.chars().next() {
        Some(c @ ('<' | '>' | '=' | '|' | '@' | '!')) => (Some(c), &base[1..]),
        _ => (None, base),
    };
    if matches!(order, Some('>' | '!'))
        && !matches!(body, "b" | "B" | "?" | "c" | "x")
        && !body.ends_with('1')
    {
        return Err(Error::Unsupported(format!(
            "big-endian data ({format:?}) is not supported"
        )));
    }
    // NumPy typestr: kind letter + item size in bytes.
    let mut chars = body.chars();
    if let (Some(kind), rest) = (chars.next(), chars.as_str()) {
        if !rest.is_empty() && rest.bytes().all(|c| c.is_ascii_digit()) {
            let n: u32 = rest.parse().map_err(|_| unknown())?;
            let bits = u8::try_from(n * 8).map_err(|_| unknown())?;
            let d = match (kind, n) {
                ('b', 1) => DLDataType::new(tc::BOOL, 8),
                ('i', 1 | 2 | 4 | 8) => DLDataType::new(tc::INT, bits),
                ('u', 1 | 2 | 4 | 8) => DLDataType::new(tc::UINT, bits),
                ('f', 2 | 4 | 8) => DLDataType::new(tc::FLOAT, bits),
                ('c', 4 | 8 | 16) => DLDataType::new(tc::COMPLEX, bits),
                ('V', 1..=31) => DLDataType::new(tc::OPAQUE_HANDLE, bits),
                _ => return Err(unknown()),
            };
            return Ok(with_lanes(d));
        }
    }
    // Buffer protocol (`struct` module) codes, standard or native sizes (the same on LP64 Linux).
    let d = match body {
        "?" => DLDataType::new(tc::BOOL, 8),
        "b" => DLDataType::new(tc::INT, 8),
        "B" | "c" => DLDataType::new(tc::UINT, 8),
        "h" => DLDataType::new(tc::INT, 16),
        "H" => DLDataType::new(tc::UINT, 16),
        "i" => DLDataType::new(tc::INT, 32),
        "I" => DLDataType::new(tc::UINT, 32),
        "l" if order.is_none() || order == Some('@') => DLDataType::new(tc::INT, 64),
        "L" if order.is_none() || order == Some('@') => DLDataType::new(tc::UINT, 64),
        "l" => DLDataType::new(tc::INT, 32),
        "L" => DLDataType::new(tc::UINT, 32),
        "q" | "n" => DLDataType::new(tc::INT, 64),
        "Q" | "N" => DLDataType::new(tc::UINT, 64),
        "e" => DLDataType::new(tc::FLOAT, 16),
        "f" => DLDataType::new(tc::FLOAT, 32),
        "d" => DLDataType::new(tc::FLOAT, 64),
        "Ze" => DLDataType::new(tc::COMPLEX, 32),
        "Zf" => DLDataType::new(tc::COMPLEX, 64),
        "Zd" => DLDataType::new(tc::COMPLEX, 128),
        _ => return Err(unknown()),
    };
    Ok(with_lanes(d))
}

/// Bytes per item of `dtype`, with sub-byte types counted as one byte each when `padded`
/// (`DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED`).
///
/// # Errors
/// [`Error::Unsupported`] for packed sub-byte items (no byte address per item) or zero bits/lanes.
pub fn itemsize_of(dtype: DLDataType, padded: bool) -> Result<i64> {
    let bits = u64::from(dtype.bits) * u64::from(dtype.lanes);
    if bits == 0 {
        return Err(Error::invalid(format!(
            "DLPack dtype {dtype:?} has no bits"
        )));
    }
    if dtype.bits % 8 != 0 {
        if padded && dtype.lanes == 1 {
            return Ok(1);
        }
        return Err(Error::Unsupported(format!(
            "packed sub-byte DLPack dtype {dtype:?}: items have no byte address (only padded ones are supported)"
        )));
    }
    Ok((bits / 8) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_through_its_format() {
        for &d in ALL_DTYPES {
            let f = format_of(d).unwrap();
            assert_eq!(dtype_of_format(&f).unwrap(), d, "{f}");
            let v = DLDataType { lanes: 4, ..d };
            assert_eq!(dtype_of_format(&format_of(v).unwrap()).unwrap(), v);
        }
        assert_eq!(format_of(DLDataType::new(tc::FLOAT, 32)).unwrap(), "<f4");
        assert_eq!(format_of(DLDataType::new(tc::BOOL, 8)).unwrap(), "|b1");
        assert_eq!(
            format_of(DLDataType::new(tc::COMPLEX, 128)).unwrap(),
            "<c16"
        );
        assert_eq!(
            format_of(DLDataType::new(tc::BFLOAT, 16)).unwrap(),
            "bfloat16"
        );
    }

    #[test]
    fn buffer_protocol_codes_are_read() {
        assert_eq!(
            dtype_of_format("d").unwrap(),
            DLDataType::new(tc::FLOAT, 64)
        );
        assert_eq!(dtype_of_format("<q").unwrap(), DLDataType::new(tc::INT, 64));
        assert_eq!(dtype_of_format("@l").unwrap(), DLDataType::new(tc::INT, 64));
        assert_eq!(dtype_of_format("=l").unwrap(), DLDataType::new(tc::INT, 32));
        assert_eq!(dtype_of_format("?").unwrap(), DLDataType::new(tc::BOOL, 8));
        assert_eq!(
            dtype_of_format("Zd").unwrap(),
            DLDataType::new(tc::COMPLEX, 128)
        );
        assert_eq!(dtype_of_format("B").unwrap(), DLDataType::new(tc::UINT, 8));
        assert_eq!(
            dtype_of_format(">u1").unwrap(),
            DLDataType::new(tc::UINT, 8)
        );
    }

    #[test]
    fn bad_formats_are_typed_errors() {
        assert!(matches!(dtype_of_format(">f4"), Err(Error::Unsupported(_))));
        assert!(matches!(dtype_of_format("!d"), Err(Error::Unsupported(_))));
        for bad in ["", "x", "<f3", "T{i:a:}", "i12", "<f4x0", "float9"] {
            assert!(
                matches!(dtype_of_format(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
        assert!(format_of(DLDataType::new(tc::INT, 12)).is_err());
        assert!(format_of(DLDataType::new(99, 8)).is_err());
    }

    #[test]
    fn sub_byte_items_need_padding() {
        let f4 = DLDataType::new(tc::FLOAT4_E2M1FN, 4);
        assert_eq!(itemsize_of(f4, true).unwrap(), 1);
        assert!(matches!(itemsize_of(f4, false), Err(Error::Unsupported(_))));
        assert_eq!(
            itemsize_of(DLDataType::new(tc::COMPLEX, 128), false).unwrap(),
            16
        );
        assert_eq!(
            itemsize_of(
                DLDataType {
                    lanes: 4,
                    ..DLDataType::new(tc::FLOAT, 32)
                },
                false
            )
            .unwrap(),
            16
        );
    }
}
