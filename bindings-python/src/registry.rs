//! The per-device current resource (RMM's `rmm.mr.get_current_device_resource`,
//! `set_current_device_resource` and their per-device forms), in librmm's registry: the process's
//! one, so C++ and Rust see what Python sets and Python sees what they set.
//!
//! Python's getter returns a Python object, and every `DeviceBuffer` without `mr=` asks for it, so
//! each device's answer is cached with the registry generation at which it was found
//! (`rmm_registry_generation`, one atomic load, bumped by every set or reset from any language):
//! while the generation has not moved, the cached object is returned without asking the registry.
//! The object is the one Python set (RMM's getter returns the very object that was set, a subclass
//! instance with its Python attributes) while that still *is* the registry's resource; otherwise the
//! one [`mr::wrap`](crate::mr::wrap) gives (the object alive for that resource, or a new one of its
//! class). Whoever set the resource, the answer costs the same. The cache holds the current object
//! until the generation moves, so a resource that C++ or Rust replaced is let go at Python's next
//! lookup.

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use rmm_core::cuda::DeviceId;
use rmm_core::{registry, AnyResource};

use crate::error::IntoPyResult;
use crate::mr::{remember_object, wrap, PyDeviceMemoryResource, PyLoggingResourceAdaptor};
use crate::native;

/// Per device: what Python set, and the cached answer of the getter.
static SLOTS: Mutex<Option<HashMap<DeviceId, Slot>>> = Mutex::new(None);

#[derive(Default)]
struct Slot {
    /// The resource Python set last and its Python object (kept alive, as RMM's dict does).
    set: Option<(AnyResource, Py<PyAny>)>,
    /// The object of the device's resource and the registry generation at which it was.
    current: Option<(Py<PyAny>, u64)>,
}

fn with_slot<R>(device: DeviceId, f: impl FnOnce(&mut Slot) -> R) -> R {
    f(SLOTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashMap::new)
        .entry(device)
        .or_default())
}

/// True when both name the same resource object: a resource that crossed the C ABI comes back as a
/// new wrapper around the same `{self, vtable}` handle.
fn same_resource(a: &AnyResource, b: &AnyResource) -> bool {
    let (a, b) = (a.borrow_handle(), b.borrow_handle());
    a.self_ == b.self_ && a.vtable == b.vtable
}

fn device_arg(device: DeviceId) -> c_int {
    device as c_int
}

/// RuntimeError for a device id that names no device. RMM's getter and setter take any id (an
/// unknown one is undefined behaviour in its C++); where RMM refuses a device, CUDA's
/// `cudaErrorInvalidDevice` reaches Python as RuntimeError, so rmm-rs refuses with that class.
fn check_device(device: DeviceId) -> PyResult<()> {
    let count = if rmm_core::cuda::is_host_mode() {
        Ok(1)
    } else {
        rmm_core::cuda::device_count()
    };
    match count {
        Ok(count) if (0..count).contains(&device) => Ok(()),
        Ok(count) => Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
            "CUDA error at: rmm-rs: cudaErrorInvalidDevice invalid device ordinal: device {device} does not exist ({count} device(s) present{})",
            if rmm_core::cuda::is_host_mode() { ", host mode" } else { "" }
        ))),
        Err(e) => Err(crate::error::to_py_err(e)),
    }
}

fn get(py: Python<'_>, device: DeviceId) -> PyResult<Py<PyAny>> {
    // With the GIL: the hot path of every `DeviceBuffer` without `mr=`, where a GIL round trip
    // would double the cost. Read before the registry, so a set in between leaves a stale stamp
    // (asked again next time), never a wrong one; 0 means the registry cannot tell.
    let generation = native::registry_generation();
    if generation != 0 {
        let cached = with_slot(device, |slot| {
            slot.current
                .as_ref()
                .filter(|(_, at)| *at == generation)
                .map(|(object, _)| object.clone_ref(py))
        });
        if let Some(object) = cached {
            return Ok(object);
        }
    }
    // A lookup under the registry's lock, which is never held while calling Python.
    let current = native::per_device_resource(device_arg(device)).into_py_result()?;
    let set = with_slot(device, |slot| {
        slot.set
            .as_ref()
            .filter(|(resource, _)| same_resource(resource, &current))
            .map(|(_, object)| object.clone_ref(py))
    });
    let object = match set {
        Some(object) => object,
        None => wrap(py, current)?,
    };
    // The object it replaces is dropped after the lock is released (dropping a resource may call
    // into another binary, which may come back here).
    let replaced = with_slot(device, |slot| {
        std::mem::replace(
            &mut slot.current,
            (generation != 0).then(|| (object.clone_ref(py), generation)),
        )
    });
    drop(replaced);
    Ok(object)
}

fn set(py: Python<'_>, device: DeviceId, mr: &Bound<'_, PyDeviceMemoryResource>) -> PyResult<()> {
    let resource = mr.get().inner.clone();
    // The previous resource is dropped without the GIL: its last release may free a pool.
    py.detach(|| native::set_per_device_resource(device_arg(device), &resource).map(drop))
        .into_py_result()?;
    remember_object(mr)?;
    let object = mr.clone().into_any().unbind();
    let replaced = with_slot(device, |slot| {
        (slot.set.replace((resource, object)), slot.current.take())
    });
    drop(replaced);
    Ok(())
}

/// The resource of the current device (the default of `StridedMemoryView.to_device`).
pub(crate) fn current_resource(py: Python<'_>) -> PyResult<AnyResource> {
    let device = current_device(py)?;
    native::per_device_resource(device_arg(device)).into_py_result()
}

fn current_device(_py: Python<'_>) -> PyResult<DeviceId> {
    // A cached host-mode answer or the driver's cuCtxGetDevice: no reason to release the GIL.
    registry::current_device_or_host().into_py_result()
}

/// The resource of `device`: the object Python set, else the registry's resource (set from C++ or
/// Rust, or the initial one) as an instance of the most specific class known.
/// RuntimeError for a device that does not exist.
#[pyfunction]
fn get_per_device_resource(py: Python<'_>, device: DeviceId) -> PyResult<Py<PyAny>> {
    check_device(device)?;
    get(py, device)
}

/// Makes `mr` the resource of `device`, for every language in the process. RuntimeError for a
/// device that does not exist, ValueError for a resource the device cannot use (host mode needs
/// host memory).
#[pyfunction]
fn set_per_device_resource(
    py: Python<'_>,
    device: DeviceId,
    mr: Bound<'_, PyDeviceMemoryResource>,
) -> PyResult<()> {
    check_device(device)?;
    set(py, device, &mr)
}

/// `get_per_device_resource` of the current device (device 0 in host mode).
#[pyfunction]
fn get_current_device_resource(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let device = current_device(py)?;
    get(py, device)
}

/// `set_per_device_resource` on the current device (device 0 in host mode).
#[pyfunction]
fn set_current_device_resource(
    py: Python<'_>,
    mr: Bound<'_, PyDeviceMemoryResource>,
) -> PyResult<()> {
    let device = current_device(py)?;
    set(py, device, &mr)
}

/// The Python object of the current device's resource (what `get_current_device_resource()`
/// returns): the default `mr` of a `DeviceBuffer`.
pub(crate) fn current_resource_object(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let device = current_device(py)?;
    get(py, device)
}

/// The Python objects set per device that are still the registry's resources, by device.
fn remembered(py: Python<'_>) -> Vec<(DeviceId, Py<PyAny>)> {
    let entries: Vec<(DeviceId, AnyResource, Py<PyAny>)> = SLOTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map(|slots| {
            slots
                .iter()
                .filter_map(|(d, slot)| {
                    slot.set
                        .as_ref()
                        .map(|(r, o)| (*d, r.clone(), o.clone_ref(py)))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut current: Vec<(DeviceId, Py<PyAny>)> = entries
        .into_iter()
        .filter(|(device, resource, _)| {
            native::per_device_resource(device_arg(*device))
                .is_ok_and(|current| same_resource(resource, &current))
        })
        .map(|(device, _, object)| (device, object))
        .collect();
    current.sort_by_key(|(device, _)| *device);
    current
}

/// `{device: resource}` for every device whose resource was set from Python and still is the
/// device's resource (RMM's private per-device dict, which `enable_logging`, `disable_logging` and
/// `get_log_filenames` walk): an rmm-rs extra for the pure-Python half.
#[pyfunction]
fn _per_device_resources(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let dict = PyDict::new(py);
    for (device, object) in remembered(py) {
        dict.set_item(device, object)?;
    }
    Ok(dict)
}

/// True when every device resource is usable (RMM's `is_initialized`: every resource set from Python
/// holds a resource, which every resource of this module does; false only when the current device's
/// resource cannot be obtained).
#[pyfunction]
fn is_initialized(py: Python<'_>) -> bool {
    current_device(py)
        .and_then(|device| native::per_device_resource(device_arg(device)).into_py_result())
        .is_ok()
}

/// Flushes every `LoggingResourceAdaptor` that is a device's current resource (RMM's private
/// `_flush_logs`).
#[pyfunction]
fn _flush_logs(py: Python<'_>) -> PyResult<()> {
    for (_, object) in remembered(py) {
        if let Ok(logging) = object.bind(py).cast::<PyLoggingResourceAdaptor>() {
            PyLoggingResourceAdaptor::flush_log(logging)?;
        }
    }
    Ok(())
}

/// True when this module's copy of rmm-core routes its registry calls to librmm's registry (always,
/// once librmm is loaded; the module's own calls go to librmm directly): an rmm-rs diagnostic, not
/// part of RMM's API.
#[pyfunction]
fn _registry_routes_to_librmm() -> bool {
    registry::routes_to_owner()
}

/// The path of the native library (librmm_rs.so, which PyTorch's pluggable allocator opens for
/// `rmm_torch_allocate` / `rmm_torch_deallocate`): an rmm-rs extra. In the wheel it is
/// `rmm/lib/librmm_rs.so`, loaded with the module; None only if the loader cannot name it.
#[pyfunction]
fn _librmm_path() -> Option<String> {
    native::library_path()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(get_per_device_resource, m)?)?;
    m.add_function(wrap_pyfunction!(set_per_device_resource, m)?)?;
    m.add_function(wrap_pyfunction!(get_current_device_resource, m)?)?;
    m.add_function(wrap_pyfunction!(set_current_device_resource, m)?)?;
    m.add_function(wrap_pyfunction!(_registry_routes_to_librmm, m)?)?;
    m.add_function(wrap_pyfunction!(is_initialized, m)?)?;
    m.add_function(wrap_pyfunction!(_librmm_path, m)?)?;
    m.add_function(wrap_pyfunction!(_per_device_resources, m)?)?;
    m.add_function(wrap_pyfunction!(_flush_logs, m)?)?;
    Ok(())
}
