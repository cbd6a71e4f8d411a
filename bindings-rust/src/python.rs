//! Python interop (feature `pyo3`): versioned capsules of buffers and resources, how a
//! [`DeviceBuffer`] or a resource crosses to and from Python's `rmm` (and C++) with no copy (RMM's
//! `DeviceBuffer.c_from_unique_ptr` / `c_release`, without Cython). The `rmm` Python package itself
//! is built on these functions.
//!
//! ```ignore
//! // (Not compiled as a doc test: it needs a Python interpreter to link with; the `rmm` Python
//! // package's own tests run these functions.)
//! use pyo3::prelude::*;
//! use rmm::prelude::*;
//! # fn demo(py: Python<'_>) -> PyResult<()> {
//! // Rust -> Python: an rmm.DeviceBuffer that owns the memory.
//! let mr = rmm::registry::current_resource().map_err(rmm::python::to_py_err)?;
//! let buf = DeviceBuffer::from_host(b"from Rust", Stream::DEFAULT, mr).map_err(rmm::python::to_py_err)?;
//! let obj = rmm::python::buffer_into_py(py, buf)?;
//! // Python -> Rust: the memory back (the Python object is left empty, as RMM's c_release).
//! let back: DeviceBuffer = rmm::python::buffer_from_py(&obj)?;
//! assert_eq!(back.size(), 9);
//! # Ok(()) }
//! ```
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

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use rmm_core::export::{self, rmm_buffer_export, rmm_resource_export};
use rmm_core::{AnyResource, DeviceBuffer};

pub use crate::interop::{
    BUFFER_CAPSULE_NAME as BUFFER_CAPSULE, RESOURCE_CAPSULE_NAME as RESOURCE_CAPSULE,
    USED_BUFFER_CAPSULE_NAME as USED_BUFFER_CAPSULE,
};

/// Frees an unconsumed buffer capsule's export through its deleter (a consumed one is left alone).
unsafe extern "C" fn buffer_capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed (GIL held); the name check makes
    // sure the pointer is an export this capsule still owns.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, BUFFER_CAPSULE.as_ptr()) == 1 {
            let export = ffi::PyCapsule_GetPointer(capsule, BUFFER_CAPSULE.as_ptr())
                as *mut rmm_buffer_export;
            export::free_buffer_export(export);
        }
    }
}

/// Gives a resource capsule's reference back.
unsafe extern "C" fn resource_capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: as above, for a resource export the capsule owns.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, RESOURCE_CAPSULE.as_ptr()) == 1 {
            let export = ffi::PyCapsule_GetPointer(capsule, RESOURCE_CAPSULE.as_ptr())
                as *mut rmm_resource_export;
            export::free_resource_export(export);
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
            export::free_buffer_export(pointer.cast());
        } else {
            export::free_resource_export(pointer.cast());
        }
    }
}

/// The name of `obj`'s type for an error message (`?` when it has none).
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// The capsule's name, or the error that says why `obj` is not the capsule `expected` names.
fn capsule_name(obj: &Bound<'_, PyAny>, expected: &CStr, used: Option<&CStr>) -> PyResult<()> {
    let want = expected.to_string_lossy();
    // SAFETY: a live object (GIL held).
    if unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) } != 1 {
        let got = type_name(obj);
        return Err(PyTypeError::new_err(format!(
            "expected a PyCapsule named '{want}', got {got}"
        )));
    }
    // SAFETY: a capsule; the name (possibly NULL) lives as long as the capsule.
    let name: *const c_char = unsafe { ffi::PyCapsule_GetName(obj.as_ptr()) };
    if name.is_null() {
        // SAFETY: clear the error PyCapsule_GetName may have set (it sets none for a NULL name).
        unsafe { ffi::PyErr_Clear() };
        return Err(PyTypeError::new_err(format!(
            "expected a PyCapsule named '{want}', got an unnamed capsule"
        )));
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
    Err(PyTypeError::new_err(format!(
        "expected a PyCapsule named '{want}', got a capsule named '{got}'"
    )))
}

/// Adopts the buffer of a `"rmm.device_buffer.v1"` capsule (no copy) and marks the capsule used.
///
/// # Errors
/// `TypeError` for anything but that capsule; `ValueError` for a used capsule, another version, or
/// an export whose fields do not hold together.
pub fn buffer_from_capsule(capsule: &Bound<'_, PyAny>) -> PyResult<DeviceBuffer> {
    capsule_name(capsule, BUFFER_CAPSULE, Some(USED_BUFFER_CAPSULE))?;
    // SAFETY: a valid capsule of that name holds an rmm_buffer_export* it owns.
    let export = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), BUFFER_CAPSULE.as_ptr()) }
        as *mut rmm_buffer_export;
    // SAFETY: the capsule's live export (GIL held, so nobody else adopts it meanwhile); on success
    // it is consumed and the capsule renamed at once, so its destructor leaves it alone.
    let buffer = unsafe { export::import_buffer(export) }
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
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
///
/// # Errors
/// The Python error when the capsule cannot be made (the memory is then freed).
pub fn buffer_to_capsule(py: Python<'_>, buffer: DeviceBuffer) -> PyResult<Py<PyAny>> {
    new_capsule(
        py,
        export::export_buffer(buffer).cast(),
        BUFFER_CAPSULE,
        buffer_capsule_destructor,
    )
}

/// A new owner of the resource of a `"rmm.memory_resource.v1"` capsule (the capsule stays valid).
///
/// # Errors
/// `TypeError` for anything but that capsule; `ValueError` for another version or an invalid
/// handle.
pub fn resource_from_capsule(capsule: &Bound<'_, PyAny>) -> PyResult<AnyResource> {
    capsule_name(capsule, RESOURCE_CAPSULE, None)?;
    // SAFETY: a valid capsule of that name holds an rmm_resource_export* it owns.
    let export = unsafe { ffi::PyCapsule_GetPointer(capsule.as_ptr(), RESOURCE_CAPSULE.as_ptr()) }
        as *const rmm_resource_export;
    // SAFETY: the capsule's live export.
    unsafe { export::import_resource(export) }.map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A new `"rmm.memory_resource.v1"` capsule holding a reference to `resource`.
///
/// # Errors
/// The Python error when the capsule cannot be made.
pub fn resource_to_capsule(py: Python<'_>, resource: AnyResource) -> PyResult<Py<PyAny>> {
    new_capsule(
        py,
        export::export_resource(resource).cast(),
        RESOURCE_CAPSULE,
        resource_capsule_destructor,
    )
}

/// `buf` as a new `rmm.DeviceBuffer` that owns its memory (no copy): `DeviceBuffer._from_capsule`
/// of Python's `rmm`, which must be importable.
///
/// # Errors
/// The import's or the call's Python error (the memory is then freed).
pub fn buffer_into_py<'py>(py: Python<'py>, buf: DeviceBuffer) -> PyResult<Bound<'py, PyAny>> {
    let capsule = buffer_to_capsule(py, buf)?;
    py.import("rmm")?
        .getattr("DeviceBuffer")?
        .call_method1("_from_capsule", (capsule,))
}

/// The memory of `obj`, an `rmm.DeviceBuffer` (left empty, as RMM's `c_release`) or a
/// `"rmm.device_buffer.v1"` capsule, as a [`DeviceBuffer`] (no copy).
///
/// # Errors
/// `TypeError` for another object; as [`buffer_from_capsule`] otherwise.
pub fn buffer_from_py(obj: &Bound<'_, PyAny>) -> PyResult<DeviceBuffer> {
    // SAFETY: a live object (GIL held).
    if unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) } == 1 {
        return buffer_from_capsule(obj);
    }
    if !obj.hasattr("_to_capsule")? {
        let got = type_name(obj);
        return Err(PyTypeError::new_err(format!(
            "expected an rmm.DeviceBuffer or a 'rmm.device_buffer.v1' capsule, got {got}"
        )));
    }
    buffer_from_capsule(&obj.call_method0("_to_capsule")?)
}

/// `resource` as a Python memory resource sharing the same object (the most specific class
/// Python's `rmm` knows for it).
///
/// # Errors
/// The import's or the call's Python error.
pub fn resource_into_py<'py>(
    py: Python<'py>,
    resource: &AnyResource,
) -> PyResult<Bound<'py, PyAny>> {
    let capsule = resource_to_capsule(py, resource.clone())?;
    py.import("rmm.mr")?
        .getattr("DeviceMemoryResource")?
        .call_method1("_from_capsule", (capsule,))
}

/// The resource of `obj`, a Python memory resource or a `"rmm.memory_resource.v1"` capsule, as a
/// new owner.
///
/// # Errors
/// `TypeError` for another object; as [`resource_from_capsule`] otherwise.
pub fn resource_from_py(obj: &Bound<'_, PyAny>) -> PyResult<AnyResource> {
    // SAFETY: a live object (GIL held).
    if unsafe { ffi::PyCapsule_CheckExact(obj.as_ptr()) } == 1 {
        return resource_from_capsule(obj);
    }
    if !obj.hasattr("_to_capsule")? {
        let got = type_name(obj);
        return Err(PyTypeError::new_err(format!(
            "expected an rmm memory resource or a 'rmm.memory_resource.v1' capsule, got {got}"
        )));
    }
    resource_from_capsule(&obj.call_method0("_to_capsule")?)
}

/// An rmm error as the Python exception RMM raises for it: `MemoryError` for
/// [`rmm_core::Error::OutOfMemory`], `ValueError` for [`rmm_core::Error::InvalidArgument`],
/// `RuntimeError` otherwise.
pub fn to_py_err(error: rmm_core::Error) -> PyErr {
    match error {
        rmm_core::Error::OutOfMemory { .. } => PyMemoryError::new_err(error.to_string()),
        rmm_core::Error::InvalidArgument(msg) => PyValueError::new_err(msg),
        other => PyRuntimeError::new_err(other.to_string()),
    }
}
