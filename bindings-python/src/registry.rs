//! Bindings for `rmm_core::registry`: the per-device current resource (RMM's
//! `rmm.mr.get_current_device_resource`, `set_current_device_resource` and their per-device forms).
//!
//! The core registry is the process's one registry (librmm's when librmm is loaded, see
//! `rmm_core::registry`), so C++ and Rust see what Python sets and Python sees what they set. On
//! top of it this module remembers the Python object of each device's resource: RMM's getter returns
//! the very object that was set (a subclass instance, with its Python attributes). Unlike RMM, whose
//! Python dict silently disagrees with C++ after a C++ set, the remembered object is only returned
//! while it still *is* the registry's resource; otherwise the registry's resource is wrapped anew
//! (`mr::wrap`, the most specific class known) on every call.
//!
//! Every `DeviceBuffer` without `mr=` asks for the current device's object, so that answer is
//! cached: a remembered object notes the registry generation (`rmm_core::registry::generation`, one
//! atomic load, bumped by every set or reset from any language) at which it was last found to be
//! the registry's resource, and while the generation has not moved it is returned without asking
//! the registry. Only remembered objects are cached: a wrapper made anew holds no cache, so the
//! cache never keeps alive a resource that C++ or Rust replaced.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::PyDict;
use rmm_core::cuda::DeviceId;
use rmm_core::registry;
use rmm_core::AnyResource;

use crate::error::IntoPyResult;
use crate::mr::{wrap, PyDeviceMemoryResource, PyLoggingResourceAdaptor};

/// Per device: the resource Python set last and its Python object (kept alive, as RMM's dict does).
static OBJECTS: Mutex<Option<HashMap<DeviceId, Remembered>>> = Mutex::new(None);

/// A resource as the registry holds it, the Python object that set it, and the registry generation
/// at which it was last found to be the device's resource (`None`: not since it was set).
struct Remembered {
    resource: AnyResource,
    object: Py<PyAny>,
    current_at: Option<u64>,
}

/// True when both name the same resource object, whichever binary's wrapper holds it: a resource
/// that crossed the C ABI comes back as a new wrapper around the same `{self, vtable}` handle.
fn same_resource(a: &AnyResource, b: &AnyResource) -> bool {
    let (a, b) = (a.borrow_handle(), b.borrow_handle());
    a.self_ == b.self_ && a.vtable == b.vtable
}

/// Remembers `object` for `device`; the entry it replaces is dropped after the lock is released
/// (dropping a resource may call into another binary, which may come back here).
fn remember(device: DeviceId, resource: AnyResource, object: Py<PyAny>) {
    let entry = Remembered { resource, object, current_at: None };
    let previous = OBJECTS.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert_with(HashMap::new).insert(device, entry);
    drop(previous);
}

fn get(py: Python<'_>, device: DeviceId) -> PyResult<Py<PyAny>> {
    // With the GIL: the hot path of every `DeviceBuffer` without `mr=`, where a GIL round trip
    // would double the cost. Read before the registry, so a set in between leaves a stale stamp
    // (asked again next time), never a wrong one.
    let generation = registry::generation();
    if let Some(generation) = generation {
        let cached = OBJECTS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(|objects| objects.get(&device))
            .filter(|entry| entry.current_at == Some(generation))
            .map(|entry| entry.object.clone_ref(py));
        if let Some(object) = cached {
            return Ok(object);
        }
    }
    // A lookup under the registry's lock, which is never held while calling Python.
    let current = registry::per_device_resource(device).into_py_result()?;
    let known = OBJECTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_mut()
        .and_then(|objects| objects.get_mut(&device))
        .filter(|entry| same_resource(&entry.resource, &current))
        .map(|entry| {
            entry.current_at = generation;
            entry.object.clone_ref(py)
        });
    match known {
        Some(object) => Ok(object),
        // Not remembered: a wrapper must not keep a resource that C++ or Rust replaced alive.
        None => wrap(py, current),
    }
}

fn set(py: Python<'_>, device: DeviceId, mr: &Bound<'_, PyDeviceMemoryResource>) -> PyResult<()> {
    let resource = mr.get().inner.clone();
    let for_registry = resource.clone();
    // The previous resource is dropped without the GIL: its last release may free a pool.
    py.detach(|| registry::set_per_device_resource(device, for_registry).map(drop)).into_py_result()?;
    remember(device, resource, mr.clone().into_any().unbind());
    Ok(())
}

fn current_device(_py: Python<'_>) -> PyResult<DeviceId> {
    // A cached host-mode answer or the driver's cuCtxGetDevice: no reason to release the GIL.
    registry::current_device_or_host().into_py_result()
}

/// The resource of `device`: the object Python set, else the registry's resource (set from C++ or
/// Rust, or the initial one) as an instance of the most specific class known.
/// ValueError for a device that does not exist.
#[pyfunction]
fn get_per_device_resource(py: Python<'_>, device: DeviceId) -> PyResult<Py<PyAny>> {
    get(py, device)
}

/// Makes `mr` the resource of `device`, for every language in the process. ValueError for a device
/// that does not exist, or a resource the device cannot use (host mode needs host memory).
#[pyfunction]
fn set_per_device_resource(py: Python<'_>, device: DeviceId, mr: Bound<'_, PyDeviceMemoryResource>) -> PyResult<()> {
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
fn set_current_device_resource(py: Python<'_>, mr: Bound<'_, PyDeviceMemoryResource>) -> PyResult<()> {
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
    let entries: Vec<(DeviceId, AnyResource, Py<PyAny>)> = OBJECTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map(|objects| objects.iter().map(|(d, e)| (*d, e.resource.clone(), e.object.clone_ref(py))).collect())
        .unwrap_or_default();
    let mut current: Vec<(DeviceId, Py<PyAny>)> = entries
        .into_iter()
        .filter(|(device, resource, _)| {
            registry::per_device_resource(*device).is_ok_and(|current| same_resource(resource, &current))
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
    current_device(py).and_then(|device| registry::per_device_resource(device).into_py_result()).is_ok()
}

/// Flushes every `LoggingResourceAdaptor` that is a device's current resource (RMM's private
/// `_flush_logs`).
#[pyfunction]
fn _flush_logs(py: Python<'_>) -> PyResult<()> {
    for (_, object) in remembered(py) {
        if let Ok(logging) = object.bind(py).cast::<PyLoggingResourceAdaptor>() {
            logging.get().flush_log()?;
        }
    }
    Ok(())
}

/// True when this module's registry calls go to another binary's registry (a librmm_rs.so loaded
/// before `rmm`): an rmm-rs diagnostic, not part of RMM's API.
#[pyfunction]
fn _registry_routes_to_librmm() -> bool {
    registry::routes_to_owner()
}

/// The path of the loaded librmm_rs.so (the library PyTorch's pluggable allocator opens for
/// `rmm_torch_allocate` / `rmm_torch_deallocate`), or None when none is loaded: an rmm-rs extra. In
/// the wheel it is `rmm/lib/librmm_rs.so`, loaded with the module.
#[pyfunction]
fn _librmm_path() -> Option<String> {
    // SAFETY: RTLD_NOLOAD only looks up an already loaded object; the name is NUL-terminated.
    let lib = unsafe { libc::dlopen(rmm_core::registry::owner::OWNER_SONAME.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
    if lib.is_null() {
        return None;
    }
    // SAFETY: a valid handle from dlopen and a NUL-terminated symbol name.
    let symbol = unsafe { libc::dlsym(lib, c"rmm_abi_version".as_ptr()) };
    // SAFETY: `info` is a valid out-parameter; dladdr only reads the loader's tables.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let found = !symbol.is_null() && unsafe { libc::dladdr(symbol, &mut info) } != 0 && !info.dli_fname.is_null();
    // SAFETY: dli_fname is the loader's NUL-terminated path of a loaded object, read before the
    // handle (whose reference the RTLD_NOLOAD open took) is closed.
    let path = found.then(|| unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned());
    // SAFETY: closes the reference this function's dlopen took; the library stays loaded.
    unsafe { libc::dlclose(lib) };
    path
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
