"""Helper functions for rmm (RMM's ``rmm.pylibrmm.helper``).

In RMM :func:`parse_bytes` is a Cython ``cdef`` function; here it is plain Python with the same
grammar, used by :func:`rmm.reinitialize` for its size arguments.
"""

from __future__ import annotations

import re

_BYTE_SIZES = {
    "b": 1,
    "": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "pb": 1000**5,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
    "pib": 1024**5,
}

# RMM's pattern: a decimal number, optional blanks, an optional case-insensitive unit.
_PATTERN = re.compile(r"^([0-9]+(?:\.[0-9]*)?)[\t ]*((?i:(?:[kmgtp]i?)?b))?$")


def parse_bytes(s: int | str) -> int:
    """Parse a size given as an int or a string such as ``"1GiB"`` into a number of bytes.

    An int is returned as it is. A string is a decimal number with an optional, case-insensitive
    unit: ``b``, SI prefixes ``kb`` .. ``pb`` (powers of 1000) or binary prefixes ``kib`` ..
    ``pib`` (powers of 1024).

    Raises
    ------
    ValueError
        If ``s`` is a string that is not a byte specification (e.g. ``"2k"``).
    TypeError
        If ``s`` is neither an int nor a string.
    """
    if isinstance(s, int):
        return s
    if not isinstance(s, str):
        raise TypeError(f"a size must be an int or a str, not {type(s).__name__}")
    match = _PATTERN.match(s)
    if match is None:
        raise ValueError(f"Could not parse {s} as a byte specification")
    suffix = match.group(2) or ""
    return int(float(match.group(1)) * _BYTE_SIZES[suffix.lower()])


__all__ = ["parse_bytes"]
