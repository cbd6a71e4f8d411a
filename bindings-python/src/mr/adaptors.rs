//! Adaptors that add behaviour to an upstream resource: `AlignedResourceAdaptor`,
//! `LimitingResourceAdaptor`, `LoggingResourceAdaptor`, `StatisticsResourceAdaptor`,
//! `TrackingResourceAdaptor`, `ThreadSafeResourceAdaptor`, `FailureCallbackResourceAdaptor` and
//! `PrefetchResourceAdaptor`, made by librmm (`native.rs`) and read through its accessors.

use std::ffi::{c_int, c_void, CString};
use std::path::Path;

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use rmm_core::registry::owner::rmm_counter;
use rmm_core::resource::rmm_resource;
use rmm_core::{registry, AnyResource, Error, Result, DEFAULT_ALIGNMENT};

use super::{adaptor, handle_of, PyDeviceMemoryResource, PyUpstreamResourceAdaptor};
use crate::error::{park, to_py_err, IntoPyResult};
use crate::native::{self, adopt};

/// A new adaptor over `upstream` from the librmm constructor `name`, called through `new` with the
/// upstream's borrowed handle (librmm retains it) and the out- and error pointers.
fn over(
    upstream: &Bound<'_, PyDeviceMemoryResource>,
    name: &'static str,
    new: impl FnOnce(rmm_resource, *mut rmm_resource, *mut rmm_core::resource::rmm_error) -> c_int,
) -> Result<AnyResource> {
    let handle = upstream.get().handle();
    adopt(name, |out, err| new(handle, out, err))
}

/// An adaptor class whose only constructor argument is `upstream_mr`, made by the librmm
/// constructor `$new` (the thread-safe, prefetch and recording adaptors).
macro_rules! upstream_only_adaptor {
    ($(#[$doc:meta])* $class:ident, $name:literal, $new:ident) => {
        $(#[$doc])*
        #[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = $name)]
        pub(crate) struct $class;

        #[pymethods]
        impl $class {
            #[new]
            fn py_new(
                upstream_mr: Bound<'_, PyDeviceMemoryResource>,
            ) -> PyResult<PyClassInitializer<Self>> {
                // SAFETY: valid arguments and out-pointers (see `over`).
                let mr = over(&upstream_mr, stringify!($new), |up, out, err| unsafe {
                    native::$new(up, out, err)
                });
                Ok(adaptor(mr.into_py_result()?, Some(&upstream_mr), Self))
            }
        }
    };
}

/// A size an accessor of the adaptor `object` writes through one out-pointer.
fn read_u64(
    object: &Bound<'_, impl pyo3::PyClass>,
    name: &'static str,
    read: unsafe extern "C" fn(rmm_resource, *mut u64, *mut rmm_core::resource::rmm_error) -> c_int,
) -> PyResult<u64> {
    let h = handle_of(object)?;
    // SAFETY: `read` is the accessor `name` of rmm_c.h; a live borrowed handle; a valid out-pointer.
    native::read(name, 0, |out, err| unsafe { read(h, out, err) }).into_py_result()
}

/// Aligns allocations of at least `alignment_threshold` bytes to `alignment` (a power of two; RMM's
/// `aligned_resource_adaptor`, an rmm-rs extra in Python).
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "AlignedResourceAdaptor")]
pub(crate) struct PyAlignedResourceAdaptor;

#[pymethods]
impl PyAlignedResourceAdaptor {
    #[new]
    #[pyo3(signature = (upstream_mr, alignment = DEFAULT_ALIGNMENT, alignment_threshold = None))]
    fn py_new(
        upstream_mr: Bound<'_, PyDeviceMemoryResource>,
        alignment: usize,
        alignment_threshold: Option<usize>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let threshold = native::optional(alignment_threshold);
        // SAFETY: valid arguments and out-pointers (see `over`).
        let mr = over(
            &upstream_mr,
            "rmm_aligned_resource_adaptor_new",
            |up, out, err| unsafe {
                native::rmm_aligned_resource_adaptor_new(up, alignment as u64, threshold, out, err)
            },
        );
        Ok(adaptor(mr.into_py_result()?, Some(&upstream_mr), Self))
    }
}

upstream_only_adaptor! {
    /// One lock around every call into the upstream (RMM's `thread_safe_resource_adaptor`, an rmm-rs
    /// extra in Python).
    PyThreadSafeResourceAdaptor, "ThreadSafeResourceAdaptor", rmm_thread_safe_resource_adaptor_new
}

/// Refuses allocations that would take the bytes outstanding above `allocation_limit` (RMM's
/// `LimitingResourceAdaptor`), with MemoryError.
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "LimitingResourceAdaptor")]
pub(crate) struct PyLimitingResourceAdaptor;

#[pymethods]
impl PyLimitingResourceAdaptor {
    #[new]
    fn py_new(
        upstream_mr: Bound<'_, PyDeviceMemoryResource>,
        allocation_limit: usize,
    ) -> PyResult<PyClassInitializer<Self>> {
        // SAFETY: valid arguments and out-pointers (see `over`).
        let mr = over(
            &upstream_mr,
            "rmm_limiting_resource_adaptor_new",
            |up, out, err| unsafe {
                native::rmm_limiting_resource_adaptor_new(
                    up,
                    allocation_limit as u64,
                    DEFAULT_ALIGNMENT as u64,
                    out,
                    err,
                )
            },
        );
        Ok(adaptor(mr.into_py_result()?, Some(&upstream_mr), Self))
    }

    /// Bytes allocated through this adaptor and not yet freed.
    fn get_allocated_bytes(slf: &Bound<'_, Self>) -> PyResult<u64> {
        read_u64(
            slf,
            "rmm_limiting_resource_adaptor_get_allocated_bytes",
            native::rmm_limiting_resource_adaptor_get_allocated_bytes,
        )
    }

    /// The limit given to the constructor.
    fn get_allocation_limit(slf: &Bound<'_, Self>) -> PyResult<u64> {
        read_u64(
            slf,
            "rmm_limiting_resource_adaptor_get_allocation_limit",
            native::rmm_limiting_resource_adaptor_get_allocation_limit,
        )
    }
}

/// `<name>.dev<device><ext>` (RMM's `_append_id`: the id goes before the last extension).
fn append_device_id(file_name: &str, device: i32) -> String {
    let path = Path::new(file_name);
    // Python's os.path.splitext: an extension is a final ".xyz" that is not the whole base name.
    let ext = path
        .extension()
        .filter(|_| path.file_stem().is_some_and(|s| !s.is_empty()));
    match ext.and_then(|e| e.to_str()) {
        Some(ext) => format!(
            "{}.dev{device}.{ext}",
            &file_name[..file_name.len() - ext.len() - 1]
        ),
        None => format!("{file_name}.dev{device}"),
    }
}

/// Writes a CSV line (`Time,Action,Pointer,Size,Stream`) for every allocation and free (RMM's
/// `LoggingResourceAdaptor`). The file is `log_file_name` (else the environment variable
/// `RMM_LOG_FILE`; neither is a ValueError) with `.dev<N>` inserted before the extension for the
/// current device N, made absolute.
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "LoggingResourceAdaptor")]
pub(crate) struct PyLoggingResourceAdaptor;

impl PyLoggingResourceAdaptor {
    /// Writes out the buffered lines of the adaptor `object`.
    pub(crate) fn flush_log(object: &Bound<'_, Self>) -> PyResult<()> {
        let h = handle_of(object)?;
        // SAFETY: a live borrowed handle.
        native::call("rmm_logging_resource_adaptor_flush", |err| unsafe {
            native::rmm_logging_resource_adaptor_flush(h, err)
        })
        .into_py_result()
    }
}

#[pymethods]
impl PyLoggingResourceAdaptor {
    #[new]
    #[pyo3(signature = (upstream_mr, log_file_name = None))]
    fn py_new(
        py: Python<'_>,
        upstream_mr: Bound<'_, PyDeviceMemoryResource>,
        log_file_name: Option<Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let name: String = match log_file_name.filter(|n| !n.is_none()) {
            Some(name) => py.import("os")?.call_method1("fspath", (name,))?.extract()?,
            None => std::env::var("RMM_LOG_FILE").ok().filter(|n| !n.is_empty()).ok_or_else(|| {
                PyValueError::new_err(
                    "RMM log file must be specified either using log_file_name= argument or RMM_LOG_FILE environment variable",
                )
            })?,
        };
        let device = py
            .detach(registry::current_device_or_host)
            .into_py_result()?;
        let name = append_device_id(&name, device);
        let absolute: String = py
            .import("os.path")?
            .call_method1("abspath", (name,))?
            .extract()?;
        let path = CString::new(absolute)
            .map_err(|_| PyValueError::new_err("the log file name contains a NUL"))?;
        let upstream = upstream_mr.get().inner.clone();
        let mr = py.detach(|| {
            // SAFETY: a live borrowed upstream handle (librmm retains it), a NUL-terminated file name
            // that outlives the call, valid out-pointers.
            adopt("rmm_logging_resource_adaptor_new", |out, err| unsafe {
                native::rmm_logging_resource_adaptor_new(
                    upstream.borrow_handle(),
                    path.as_ptr(),
                    0,
                    out,
                    err,
                )
            })
        });
        Ok(adaptor(mr.into_py_result()?, Some(&upstream_mr), Self))
    }

    /// Writes out the buffered lines.
    fn flush(slf: &Bound<'_, Self>) -> PyResult<()> {
        let h = handle_of(slf)?;
        // The flush writes a file: without the GIL. The handle stays valid: `slf` holds it.
        let h = SendHandle(h);
        slf.py()
            .detach(move || {
                let h = h;
                // SAFETY: a live borrowed handle.
                native::call("rmm_logging_resource_adaptor_flush", |err| unsafe {
                    native::rmm_logging_resource_adaptor_flush(h.0, err)
                })
            })
            .into_py_result()
    }

    /// The absolute path of the log file (None for an adaptor that logs to something else).
    fn get_file_name(slf: &Bound<'_, Self>) -> PyResult<Option<String>> {
        let h = handle_of(slf)?;
        // SAFETY: a live borrowed handle; `buf` holds `capacity` bytes.
        let name = native::read_text(
            "rmm_logging_resource_adaptor_get_file_name",
            |buf, capacity, length, err| unsafe {
                native::rmm_logging_resource_adaptor_get_file_name(h, buf, capacity, length, err)
            },
        );
        Ok(Some(name.into_py_result()?).filter(|n| !n.is_empty()))
    }
}

/// A borrowed handle carried into a call without the GIL, while its Python object (which holds the
/// resource) stays alive in the caller's frame.
struct SendHandle(rmm_resource);

// SAFETY: a handle names a resource usable from any thread (rmm_c.h); the object that keeps it
// alive outlives the call that carries it.
unsafe impl Send for SendHandle {}

/// Counts the bytes and allocations that pass through it, in nestable frames (RMM's
/// `StatisticsResourceAdaptor`). Counters are returned as `rmm.statistics.Statistics` (the
/// pure-Python dataclass, imported when first needed).
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "StatisticsResourceAdaptor")]
pub(crate) struct PyStatisticsResourceAdaptor;

/// RMM's `rmm.statistics.Statistics` from a (bytes, allocations) pair of counters.
fn statistics(py: Python<'_>, (bytes, count): (rmm_counter, rmm_counter)) -> PyResult<Py<PyAny>> {
    let class = py.import("rmm.statistics")?.getattr("Statistics")?;
    let object = class.call1((
        bytes.value,
        count.value,
        bytes.peak,
        count.peak,
        bytes.total,
        count.total,
    ))?;
    Ok(object.unbind())
}

impl PyStatisticsResourceAdaptor {
    /// Push or pop (`which`) of the counters, without the GIL: they wait for allocations in flight
    /// on other threads.
    fn push_or_pop(
        slf: &Bound<'_, Self>,
        name: &'static str,
        which: unsafe extern "C" fn(
            rmm_resource,
            *mut rmm_counter,
            *mut rmm_counter,
            *mut rmm_core::resource::rmm_error,
        ) -> c_int,
    ) -> PyResult<Result<(rmm_counter, rmm_counter)>> {
        let h = SendHandle(handle_of(slf)?);
        Ok(slf.py().detach(move || {
            let h = h;
            // SAFETY: `which` is the accessor `name` of rmm_c.h; a live borrowed handle; valid
            // out-pointers.
            native::read_counter_pair(name, |bytes, allocations, err| unsafe {
                which(h.0, bytes, allocations, err)
            })
        }))
    }
}

#[pymethods]
impl PyStatisticsResourceAdaptor {
    #[new]
    fn py_new(
        upstream_mr: Bound<'_, PyDeviceMemoryResource>,
    ) -> PyResult<PyClassInitializer<Self>> {
        // SAFETY: valid arguments and out-pointers (see `over`).
        let mr = over(
            &upstream_mr,
            "rmm_statistics_resource_adaptor_new",
            |up, out, err| unsafe { native::rmm_statistics_resource_adaptor_new(up, out, err) },
        );
        Ok(adaptor(mr.into_py_result()?, Some(&upstream_mr), Self))
    }

    /// The counters of the current frame as an `rmm.statistics.Statistics`.
    #[getter]
    fn allocation_counts(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let h = handle_of(slf)?;
        let counter = |name,
                       get: unsafe extern "C" fn(
            rmm_resource,
            *mut rmm_counter,
            *mut rmm_core::resource::rmm_error,
        ) -> c_int| {
            // SAFETY: `get` is the accessor `name` of rmm_c.h; a live borrowed handle; a valid
            // out-pointer.
            native::read(name, rmm_counter::default(), |out, err| unsafe {
                get(h, out, err)
            })
            .into_py_result()
        };
        let bytes = counter(
            "rmm_statistics_resource_adaptor_get_bytes_counter",
            native::rmm_statistics_resource_adaptor_get_bytes_counter,
        )?;
        let allocations = counter(
            "rmm_statistics_resource_adaptor_get_allocations_counter",
            native::rmm_statistics_resource_adaptor_get_allocations_counter,
        )?;
        statistics(slf.py(), (bytes, allocations))
    }

    /// Starts a new frame of zero counters; returns the counters from before the push.
    fn push_counters(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let before = Self::push_or_pop(
            slf,
            "rmm_statistics_resource_adaptor_push_counters",
            native::rmm_statistics_resource_adaptor_push_counters,
        )?
        .into_py_result()?;
        statistics(slf.py(), before)
    }

    /// Ends the current frame, folds it into its parent and returns it (values may be negative).
    /// Raises IndexError when no frame was pushed, as RMM does.
    fn pop_counters(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let popped = Self::push_or_pop(
            slf,
            "rmm_statistics_resource_adaptor_pop_counters",
            native::rmm_statistics_resource_adaptor_pop_counters,
        )?
        .map_err(|e| match e {
            // RMM throws std::out_of_range here, which Cython raises as IndexError.
            Error::InvalidArgument(message) => PyIndexError::new_err(message),
            other => to_py_err(other),
        })?;
        statistics(slf.py(), popped)
    }
}

/// Remembers every outstanding allocation (and, with `capture_stacks`, where it was made) (RMM's
/// `TrackingResourceAdaptor`).
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "TrackingResourceAdaptor")]
pub(crate) struct PyTrackingResourceAdaptor;

#[pymethods]
impl PyTrackingResourceAdaptor {
    #[new]
    #[pyo3(signature = (upstream_mr, capture_stacks = false))]
    fn py_new(
        upstream_mr: Bound<'_, PyDeviceMemoryResource>,
        capture_stacks: bool,
    ) -> PyResult<PyClassInitializer<Self>> {
        // SAFETY: valid arguments and out-pointers (see `over`).
        let mr = over(
            &upstream_mr,
            "rmm_tracking_resource_adaptor_new",
            |up, out, err| unsafe {
                native::rmm_tracking_resource_adaptor_new(up, c_int::from(capture_stacks), out, err)
            },
        );
        Ok(adaptor(mr.into_py_result()?, Some(&upstream_mr), Self))
    }

    /// Bytes allocated through this adaptor and not yet freed.
    fn get_allocated_bytes(slf: &Bound<'_, Self>) -> PyResult<u64> {
        read_u64(
            slf,
            "rmm_tracking_resource_adaptor_get_allocated_bytes",
            native::rmm_tracking_resource_adaptor_get_allocated_bytes,
        )
    }

    /// The outstanding allocations, one per line (with stacks when captured), as RMM formats them.
    fn get_outstanding_allocations_str(slf: &Bound<'_, Self>) -> PyResult<String> {
        let h = SendHandle(handle_of(slf)?);
        slf.py()
            .detach(move || {
                let h = h;
                // SAFETY: a live borrowed handle; `buf` holds `capacity` bytes.
                native::read_text(
                    "rmm_tracking_resource_adaptor_get_outstanding_allocations_str",
                    |buf, capacity, length, err| unsafe {
                        native::rmm_tracking_resource_adaptor_get_outstanding_allocations_str(
                            h.0, buf, capacity, length, err,
                        )
                    },
                )
            })
            .into_py_result()
    }

    /// Writes the outstanding allocations to the debug log.
    fn log_outstanding_allocations(slf: &Bound<'_, Self>) -> PyResult<()> {
        let h = SendHandle(handle_of(slf)?);
        slf.py()
            .detach(move || {
                let h = h;
                // SAFETY: a live borrowed handle.
                native::call(
                    "rmm_tracking_resource_adaptor_log_outstanding_allocations",
                    |err| unsafe {
                        native::rmm_tracking_resource_adaptor_log_outstanding_allocations(h.0, err)
                    },
                )
            })
            .into_py_result()
    }
}

/// Calls `callback(nbytes) -> bool` when the upstream runs out of memory, and retries the
/// allocation while it returns True (RMM's `FailureCallbackResourceAdaptor`). An exception from the
/// callback ends the allocation and is raised (as RuntimeError unless it is a MemoryError).
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "FailureCallbackResourceAdaptor")]
pub(crate) struct PyFailureCallbackResourceAdaptor {
    /// The Python function, shared with librmm's context (None for an adaptor made outside Python);
    /// it takes part in cycle collection.
    pub(super) callback: Option<super::SharedCallables<Py<PyAny>>>,
}

/// `rmm_failure_callback`: calls the Python function; an exception ends the allocation and is
/// parked for the binding call that started it.
unsafe extern "C" fn failure_callback(bytes: usize, context: *mut c_void) -> c_int {
    // SAFETY: librmm passes the context made in `py_new`, alive until released.
    let shared = unsafe { &*(context as *const super::SharedCallables<Py<PyAny>>) };
    let retry = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Python::attach(|py| {
            // A function the cycle collector took cannot ask for a retry.
            let Some(func) = shared.with(|f| f.clone_ref(py)) else {
                return false;
            };
            match func
                .call1(py, (bytes,))
                .and_then(|r| r.bind(py).is_truthy())
            {
                Ok(retry) => retry,
                Err(e) => {
                    park(e);
                    false
                }
            }
        })
    }));
    c_int::from(retry.unwrap_or(false))
}

/// `rmm_failure_callback_release`: drops the Python function (with the GIL).
unsafe extern "C" fn release_failure_callback(context: *mut c_void) {
    // SAFETY: the box made in `py_new`, released once by librmm.
    let func = unsafe { Box::from_raw(context as *mut super::SharedCallables<Py<PyAny>>) };
    Python::attach(move |_| drop(func));
}

#[pymethods]
impl PyFailureCallbackResourceAdaptor {
    #[new]
    fn py_new(
        upstream_mr: Bound<'_, PyDeviceMemoryResource>,
        callback: Py<PyAny>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let callback = super::SharedCallables::new(callback);
        let context = Box::into_raw(Box::new(callback.share()));
        // SAFETY: functions of this module that never unwind and accept `context` until librmm
        // releases it with `release_failure_callback` (also on failure); see `over`.
        let mr = over(
            &upstream_mr,
            "rmm_failure_callback_resource_adaptor_new",
            |up, out, err| unsafe {
                native::rmm_failure_callback_resource_adaptor_new(
                    up,
                    Some(failure_callback),
                    context.cast(),
                    Some(release_failure_callback),
                    out,
                    err,
                )
            },
        );
        Ok(adaptor(
            mr.into_py_result()?,
            Some(&upstream_mr),
            Self {
                callback: Some(callback),
            },
        ))
    }

    fn __traverse__(
        &self,
        visit: pyo3::PyVisit<'_>,
    ) -> std::result::Result<(), pyo3::PyTraverseError> {
        match &self.callback {
            Some(callback) => callback.traverse(&visit, |f| vec![f]),
            None => Ok(()),
        }
    }

    fn __clear__(&self) {
        if let Some(callback) = &self.callback {
            callback.clear();
        }
    }

    /// The callback given to the constructor (an rmm-rs extra; None for an adaptor made outside
    /// Python).
    #[getter]
    fn callback(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.callback
            .as_ref()
            .and_then(|c| c.with(|f| f.clone_ref(py)))
    }
}

upstream_only_adaptor! {
    /// Prefetches every allocation of managed memory to the current device on the allocation's stream
    /// (RMM's `PrefetchResourceAdaptor`).
    PyPrefetchResourceAdaptor, "PrefetchResourceAdaptor", rmm_prefetch_resource_adaptor_new
}

upstream_only_adaptor! {
    /// Reports every allocation, free and out-of-memory failure through it to the memory timeline
    /// while the timeline records (an rmm-rs extra; `rmm.timeline.start` puts one over each device's
    /// resource by itself).
    PyRecordingResourceAdaptor, "RecordingResourceAdaptor", rmm_recording_resource_adaptor_new
}
