//! Versioned capsules of buffers and resources: how a `DeviceBuffer` or a memory resource crosses
//! to and from C++, Rust or another extension module with no copy (RMM's
//! `DeviceBuffer.c_from_unique_ptr` / `c_release`, without Cython).
//!
//! - `"rmm.device_buffer.v1"` holds an `rmm_buffer_export*` (`rmm_core::export`, `rmm_c.h`): the
//!   memory, its stream and device, and an owning reference to its resource, with the producer's
//!   deleter. `DeviceBuffer._from_capsule` adopts it and renames the capsule
//!   `"used_rmm.device_buffer.v1"` (DLPack's convention), so a second use is a `ValueError`; a
//!   capsule nobody adopted frees the memory through its deleter when it is collected.
//!   `DeviceBuffer._to_capsule()` moves the memory out, leaving the Python buffer empty (RMM's
//!   `c_release`).
//! - `"rmm.memory_resource.v1"` holds an `rmm_resource_export*`: importing it adds a reference, so
//!   it can be imported any number of times; the capsule's destructor gives its reference back.
//!
//! Not a capsule, or a capsule of another name: `TypeError`; a consumed capsule, another version, or
//! an export whose fields do not hold together: `ValueError`.

use std::ffi::{c_char, c_void, CStr};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use rmm_core::export::{self, rmm_buffer_export, rmm_resource_export};
use rmm_core::{AnyResource, DeviceBuffer};

use crate::error::to_py_err;

/// The name of an unconsumed buffer capsule.
pub(crate) const BUFFER_CAPSULE: &CStr = c"rmm.device_buffer.v1";
/// The name a consumer gives a buffer capsule it adopted.
pub(crate) const USED_BUFFER_CAPSULE: &CStr = c"used_rmm.device_buffer.v1";
/// The name of a resource capsule.
pub(crate) const RESOURCE_CAPSULE: &CStr = c"rmm.memory_resource.v1";

/// Frees an unconsumed buffer capsule's export through its deleter (a consumed one is left alone).
unsafe extern "C" fn buffer_capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed (GIL held); the name check makes
    // sure the pointer is an export this capsule still owns.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, BUFFER_CAPSULE.as_ptr()) == 1 {
            let export = ffi::PyCapsule_GetPointer(capsule, BUFFER_CAPSULE.as_ptr()) as *mut rmm_buffer_export;
            if let Some(deleter) = export.as_ref().and_then(|e| e.deleter) {
                deleter(export);
            }
        }
    }
}

/// Gives a resource capsule's reference back.
unsafe extern "C" fn resource_capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: as above, for a resource export the capsule owns.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, RESOURCE_CAPSULE.as_ptr()) == 1 {
            let export = ffi::PyCapsule_GetPointer(capsule, RESOURCE_CAPSULE.as_ptr()) as *mut rmm_resource_export;
            if let Some(deleter) = export.as_ref().and_then(|e| e.deleter) {
                deleter(export);
            }
        }
    }
}

/// A new capsule named `name` owning `pointer` (freed by `destructor`), or the Python error.
fn new_capsule(
    py: Python<'_>,
    pointer: *mut c_void,
    name: &'static CStr,
    destructor: unsafe extern "C" fn(*mut ffi::PyObject),
) -> PyResult<Py<PyAny>> {
    // SAFETY: a non-NULL pointer and a 'static name; the destructor frees the pointer once.
    unsafe {
        let capsule = ffi::PyCapsule_New(pointer, name.as_ptr(), Some(destructor));
        if capsule.is_null() {
            // The capsule was not made: free what it would have owned.
            destructor_on_failure(pointer, name);
            return Err(PyErr::fetch(py));
        }
        Ok(Bound::from_owned_ptr(py, capsule).unbind())
    }
}

/// Gives back what a capsule that could not be made would have owned.
///
/// # Safety
/// `pointer` is the owning export of the kind that `name` names.
unsafe fn destructor_on_failure(pointer: *mut c_void, name: &CStr) {
    // SAFETY: caller contract.
    unsafe {
        if name == BUFFER_CAPSULE {
            let export = pointer as *mut rmm_buffer_export;
            if let Some(deleter) = (*export).deleter {
                deleter(export);
            }
        } else {
            let export = pointer as *mut rmm_resource_export;
            if let Some(deleter) = (*export).deleter {
                deleter(export);
            }
        }
    }
}

/// The capsule's name, or the error that says why `obj` is not the capsule `expected` names.
fn capsule_name(obj: &Bound<'_, PyAny>, expected: &CStr, used: Option<&CStr>) -> PyResult<()> {
    let want = expected.to_string_lossy();
    // SAFETY: a live object (GIL held).
    if unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) } != 1 {
        let got = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
        return Err(PyTypeError::new_err(format!("expected a PyCapsule named '{want}', got {got}")));
    }
    // SAFETY: a capsule; the name (possibly NULL) lives as long as the capsule.
    let name: *const c_char = unsafe { ffi::PyCapsule_GetName(obj.as_ptr()) };
    if name.is_null() {
        // SAFETY: clear the error PyCapsule_GetName may have set (it sets none for a NULL name).
        unsafe { ffi::PyErr_Clear() };
        return Err(PyTypeError::new_err(format!("expected a PyCapsule named '{want}', got an unnamed capsule")));
    }
    // SAFETY: a NUL-terminated name owned by the capsule.
    let name = unsafe { CStr::from_ptr(name) };
    if name == expected {
        return Ok(());
    }
    let got = name.to_string_lossy();
    if used == Some(name) {
        return Err(PyValueError::new_err(format!(
            "this '{want}' capsule was already consumed (its buffer belongs to another owner now)"
        )));
    }
    let family = want.trim_end_matches(|c: char| c.is_ascii_digit());
    if got.starts_with(family) {
        return Err(PyValueError::new_err(format!(
            "capsule '{got}' is a version this rmm does not read (it reads '{want}')"
        )));
    }
    Err(PyTypeError::new_err(format!("expected a PyCapsule named '{want}', got a capsule named '{got}'")))
}

/// Adopts the buffer of a `"rmm.device_buffer.v1"` capsule (no copy) and marks the capsule used.
pub(crate) fn buffer_from_capsule(capsule: &Bound<'_, PyAny>) -> PyResult<DeviceBuffer> {
    capsule_name(capsule, BUFFER_CAPSULE, Some(USED_BUFFER_CAPSULE))?;
    // SAFETY: a valid capsule of that name holds an rmm_buffer_export* it owns.
    let export = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), BUFFER_CAPSULE.as_ptr()) } as *mut rmm_buffer_export;
    // SAFETY: the capsule's live export (GIL held, so nobody else adopts it meanwhile); on success
    // it is consumed and the capsule renamed at once, so its destructor leaves it alone.
    let buffer = unsafe { export::import_buffer(export) }.map_err(|e| PyValueError::new_err(e.to_string()))?;
    // SAFETY: a live capsule and a 'static name.
    if unsafe { ffi::PyCapsule_SetName(capsule.as_ptr(), USED_BUFFER_CAPSULE.as_ptr()) } != 0 {
        // Cannot happen for a valid capsule; the export is gone, so the capsule must not free it.
        // SAFETY: as above.
        unsafe { ffi::PyCapsule_SetDestructor(capsule.as_ptr(), None) };
        return Err(PyErr::fetch(capsule.py()));
    }
    Ok(buffer)
}

/// A new `"rmm.device_buffer.v1"` capsule owning `buffer`'s memory (no copy).
pub(crate) fn buffer_to_capsule(py: Python<'_>, buffer: DeviceBuffer) -> PyResult<Py<PyAny>> {
    new_capsule(py, export::export_buffer(buffer).cast(), BUFFER_CAPSULE, buffer_capsule_destructor)
}

/// A new owner of the resource of a `"rmm.memory_resource.v1"` capsule (the capsule stays valid).
pub(crate) fn resource_from_capsule(capsule: &Bound<'_, PyAny>) -> PyResult<AnyResource> {
    capsule_name(capsule, RESOURCE_CAPSULE, None)?;
    // SAFETY: a valid capsule of that name holds an rmm_resource_export* it owns.
    let export = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), RESOURCE_CAPSULE.as_ptr()) } as *const rmm_resource_export;
    // SAFETY: the capsule's live export.
    unsafe { export::import_resource(export) }.map_err(|e| match e {
        rmm_core::Error::InvalidArgument(msg) => PyValueError::new_err(msg),
        other => to_py_err(other),
    })
}

/// A new `"rmm.memory_resource.v1"` capsule holding a reference to `resource`.
pub(crate) fn resource_to_capsule(py: Python<'_>, resource: AnyResource) -> PyResult<Py<PyAny>> {
    new_capsule(py, export::export_resource(resource).cast(), RESOURCE_CAPSULE, resource_capsule_destructor)
}
