//! Host memory of Python objects through the buffer protocol (PEP 3118), checked the way RMM's
//! Cython `const unsigned char[::1]` arguments check it.
//!
//! The module is built for the stable ABI of CPython 3.10, whose limited API lacks
//! `PyObject_GetBuffer` (added to it in 3.11) although every CPython 3 exports it with the same
//! `Py_buffer` layout; pyo3 does not declare it under abi3 below 3.11, so it is declared here.

use std::ffi::{c_char, c_int, c_void, CStr};

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;

/// CPython's `Py_buffer` (unchanged since 3.3).
#[repr(C)]
pub(crate) struct RawBuffer {
    pub(crate) buf: *mut c_void,
    pub(crate) obj: *mut ffi::PyObject,
    pub(crate) len: ffi::Py_ssize_t,
    pub(crate) itemsize: ffi::Py_ssize_t,
    pub(crate) readonly: c_int,
    pub(crate) ndim: c_int,
    pub(crate) format: *mut c_char,
    pub(crate) shape: *mut ffi::Py_ssize_t,
    pub(crate) strides: *mut ffi::Py_ssize_t,
    pub(crate) suboffsets: *mut ffi::Py_ssize_t,
    pub(crate) internal: *mut c_void,
}

extern "C" {
    pub(crate) fn PyObject_GetBuffer(
        obj: *mut ffi::PyObject,
        view: *mut RawBuffer,
        flags: c_int,
    ) -> c_int;
    pub(crate) fn PyBuffer_Release(view: *mut RawBuffer);
}

/// `PyBUF_WRITABLE`.
const WRITABLE: c_int = 0x0001;
/// `PyBUF_RECORDS_RO` = `PyBUF_STRIDES | PyBUF_FORMAT`: shape, strides and format filled in.
const RECORDS_RO: c_int = 0x0018 | 0x0004;

/// An exported buffer of one-byte unsigned items, contiguous, one-dimensional; released on drop
/// (which needs the GIL: never move one into a `detach` closure, pass [`HostBuffer::addr`] instead).
pub(crate) struct HostBuffer {
    raw: Box<RawBuffer>,
}

impl HostBuffer {
    /// The buffer of `obj` (writable when `writable`). TypeError for an object without the buffer
    /// protocol (or `None`); ValueError when the items are not unsigned bytes (`format` "B"), the
    /// buffer is not one-dimensional, or it is not contiguous, as RMM's Cython signature raises.
    pub(crate) fn get(obj: &Bound<'_, PyAny>, writable: bool) -> PyResult<Self> {
        // SAFETY: an all-zero Py_buffer is a valid out-parameter (plain pointers and integers).
        let mut raw: Box<RawBuffer> = Box::new(unsafe { std::mem::zeroed() });
        let flags = RECORDS_RO | if writable { WRITABLE } else { 0 };
        // SAFETY: `obj` is a live object (the GIL is held); `raw` is a valid Py_buffer to fill.
        if unsafe { PyObject_GetBuffer(obj.as_ptr(), &mut *raw, flags) } != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        // From here `buffer` owns the export and releases it on every path.
        let buffer = Self { raw };
        buffer.check()?;
        Ok(buffer)
    }

    fn check(&self) -> PyResult<()> {
        let raw = &*self.raw;
        let format = if raw.format.is_null() {
            "B".to_owned()
        } else {
            // SAFETY: the exporter filled `format` (PyBUF_FORMAT) with a NUL-terminated string that
            // lives until the buffer is released.
            unsafe { CStr::from_ptr(raw.format) }
                .to_string_lossy()
                .into_owned()
        };
        let items = format.trim_start_matches(['@', '=', '<', '>', '!', '|']);
        if items != "B" || raw.itemsize != 1 {
            return Err(PyValueError::new_err(format!(
                "Buffer dtype mismatch, expected 'unsigned char' but got '{format}'"
            )));
        }
        if raw.ndim != 1 {
            return Err(PyValueError::new_err(format!(
                "Buffer has wrong number of dimensions (expected 1, got {})",
                raw.ndim
            )));
        }
        let stride = if raw.strides.is_null() {
            1
        } else {
            // SAFETY: with PyBUF_STRIDES the exporter fills `strides` with `ndim` (= 1) entries, or
            // leaves it null for a contiguous buffer.
            unsafe { *raw.strides }
        };
        if stride != 1 && raw.len > 1 {
            return Err(PyValueError::new_err("ndarray is not C-contiguous"));
        }
        Ok(())
    }

    /// The address of the first byte.
    pub(crate) fn addr(&self) -> usize {
        self.raw.buf as usize
    }

    /// The number of bytes.
    pub(crate) fn len(&self) -> usize {
        usize::try_from(self.raw.len).unwrap_or(0)
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: the view was filled by a successful PyObject_GetBuffer and is released once; the
        // GIL is held (the type is only used on threads attached to Python, see the type's doc).
        unsafe { PyBuffer_Release(&mut *self.raw) };
    }
}
