//! Adaptors that add behaviour to an upstream resource: `LimitingResourceAdaptor`,
//! `LoggingResourceAdaptor`, `StatisticsResourceAdaptor`, `TrackingResourceAdaptor`,
//! `FailureCallbackResourceAdaptor` and `PrefetchResourceAdaptor`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use rmm_core::mr::statistics::Counter;
use rmm_core::mr::{
    FailureCallbackResourceAdaptor, LimitingResourceAdaptor, LoggingResourceAdaptor, PrefetchResourceAdaptor,
    StatisticsResourceAdaptor, TrackingResourceAdaptor,
};
use rmm_core::{registry, Error};

use super::{adaptor, Backend, PyDeviceMemoryResource, PyUpstreamResourceAdaptor};
use crate::error::{park, to_py_err, IntoPyResult};
use crate::owner::OwnerResource;

/// Refuses allocations that would take the bytes outstanding above `allocation_limit` (RMM's
/// `LimitingResourceAdaptor`), with MemoryError.
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "LimitingResourceAdaptor")]
pub(crate) struct PyLimitingResourceAdaptor {
    pub(super) limiting: LimitingResourceAdaptor,
}

#[pymethods]
impl PyLimitingResourceAdaptor {
    #[new]
    fn py_new(upstream_mr: Bound<'_, PyDeviceMemoryResource>, allocation_limit: usize) -> PyClassInitializer<Self> {
        let limiting = LimitingResourceAdaptor::new(upstream_mr.get().inner.clone(), allocation_limit);
        adaptor(limiting.clone(), &upstream_mr, Self { limiting })
    }

    /// Bytes allocated through this adaptor and not yet freed.
    fn get_allocated_bytes(&self) -> usize {
        self.limiting.allocated_bytes()
    }

    /// The limit given to the constructor.
    fn get_allocation_limit(&self) -> usize {
        self.limiting.allocation_limit()
    }
}

/// `<name>.dev<device><ext>` (RMM's `_append_id`: the id goes before the last extension).
fn append_device_id(file_name: &str, device: i32) -> String {
    let path = Path::new(file_name);
    // Python's os.path.splitext: an extension is a final ".xyz" that is not the whole base name.
    let ext = path.extension().filter(|_| path.file_stem().is_some_and(|s| !s.is_empty()));
    match ext.and_then(|e| e.to_str()) {
        Some(ext) => format!("{}.dev{device}.{ext}", &file_name[..file_name.len() - ext.len() - 1]),
        None => format!("{file_name}.dev{device}"),
    }
}

/// Writes a CSV line (`Time,Action,Pointer,Size,Stream`) for every allocation and free (RMM's
/// `LoggingResourceAdaptor`). The file is `log_file_name` (else the environment variable
/// `RMM_LOG_FILE`; neither is a ValueError) with `.dev<N>` inserted before the extension for the
/// current device N, made absolute.
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "LoggingResourceAdaptor")]
pub(crate) struct PyLoggingResourceAdaptor {
    logging: LoggingResourceAdaptor,
    file_name: Option<String>,
}

impl PyLoggingResourceAdaptor {
    /// A logging adaptor that Python did not make.
    pub(crate) fn wrapped(logging: LoggingResourceAdaptor) -> Self {
        let file_name = logging.file_name().map(|p| p.to_string_lossy().into_owned());
        Self { logging, file_name }
    }

    /// Writes out the buffered lines.
    pub(crate) fn flush_log(&self) -> PyResult<()> {
        self.logging.flush().into_py_result()
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
        let device = py.detach(registry::current_device_or_host).into_py_result()?;
        let name = append_device_id(&name, device);
        let absolute: String = py.import("os.path")?.call_method1("abspath", (name,))?.extract()?;
        let upstream = upstream_mr.get().inner.clone();
        let path = PathBuf::from(&absolute);
        let logging = py.detach(|| LoggingResourceAdaptor::new(upstream, &path)).into_py_result()?;
        Ok(adaptor(logging.clone(), &upstream_mr, Self { logging, file_name: Some(absolute) }))
    }

    /// Writes out the buffered lines.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.logging.flush()).into_py_result()
    }

    /// The absolute path of the log file.
    fn get_file_name(&self) -> Option<String> {
        self.file_name.clone()
    }
}

/// Counts the bytes and allocations that pass through it, in nestable frames (RMM's
/// `StatisticsResourceAdaptor`). Counters are returned as `rmm.statistics.Statistics` (the
/// pure-Python dataclass, imported when first needed).
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "StatisticsResourceAdaptor")]
pub(crate) struct PyStatisticsResourceAdaptor {
    stats: Backend<StatisticsResourceAdaptor>,
}

/// RMM's `rmm.statistics.Statistics` from a (bytes, allocations) pair of counters.
fn statistics(py: Python<'_>, (bytes, count): (Counter, Counter)) -> PyResult<Py<PyAny>> {
    let class = py.import("rmm.statistics")?.getattr("Statistics")?;
    let object = class.call1((bytes.value, count.value, bytes.peak, count.peak, bytes.total, count.total))?;
    Ok(object.unbind())
}

impl PyStatisticsResourceAdaptor {
    pub(crate) fn local(stats: StatisticsResourceAdaptor) -> Self {
        Self { stats: Backend::Local(stats) }
    }

    pub(crate) fn owner(owner: OwnerResource) -> Self {
        Self { stats: Backend::Owner(owner) }
    }

    fn counters(&self, py: Python<'_>) -> PyResult<(Counter, Counter)> {
        match &self.stats {
            Backend::Local(stats) => Ok(stats.counters()),
            Backend::Owner(owner) => py.detach(|| owner.counters()).into_py_result(),
        }
    }
}

#[pymethods]
impl PyStatisticsResourceAdaptor {
    #[new]
    fn py_new(upstream_mr: Bound<'_, PyDeviceMemoryResource>) -> PyClassInitializer<Self> {
        let stats = StatisticsResourceAdaptor::new(upstream_mr.get().inner.clone());
        adaptor(stats.clone(), &upstream_mr, Self::local(stats))
    }

    /// The counters of the current frame as an `rmm.statistics.Statistics`.
    #[getter]
    fn allocation_counts(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let counters = self.counters(py)?;
        statistics(py, counters)
    }

    /// Starts a new frame of zero counters; returns the counters from before the push.
    fn push_counters(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        // Push and pop wait for allocations in flight on other threads: without the GIL.
        let before = match &self.stats {
            Backend::Local(stats) => py.detach(|| stats.push_counters()),
            Backend::Owner(owner) => py.detach(|| owner.push_counters()).into_py_result()?,
        };
        statistics(py, before)
    }

    /// Ends the current frame, folds it into its parent and returns it (values may be negative).
    /// Raises IndexError when no frame was pushed, as RMM does.
    fn pop_counters(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let popped = match &self.stats {
            Backend::Local(stats) => py.detach(|| stats.pop_counters()),
            Backend::Owner(owner) => py.detach(|| owner.pop_counters()),
        }
        .map_err(|e| match e {
            // RMM throws std::out_of_range here, which Cython raises as IndexError.
            Error::InvalidArgument(message) => PyIndexError::new_err(message),
            other => to_py_err(other),
        })?;
        statistics(py, popped)
    }
}

/// Remembers every outstanding allocation (and, with `capture_stacks`, where it was made) (RMM's
/// `TrackingResourceAdaptor`).
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "TrackingResourceAdaptor")]
pub(crate) struct PyTrackingResourceAdaptor {
    pub(super) tracking: TrackingResourceAdaptor,
}

#[pymethods]
impl PyTrackingResourceAdaptor {
    #[new]
    #[pyo3(signature = (upstream_mr, capture_stacks = false))]
    fn py_new(upstream_mr: Bound<'_, PyDeviceMemoryResource>, capture_stacks: bool) -> PyClassInitializer<Self> {
        let tracking = TrackingResourceAdaptor::new(upstream_mr.get().inner.clone(), capture_stacks);
        adaptor(tracking.clone(), &upstream_mr, Self { tracking })
    }

    /// Bytes allocated through this adaptor and not yet freed.
    fn get_allocated_bytes(&self) -> usize {
        self.tracking.allocated_bytes()
    }

    /// The outstanding allocations, one per line (with stacks when captured), as RMM formats them.
    fn get_outstanding_allocations_str(&self, py: Python<'_>) -> String {
        py.detach(|| self.tracking.outstanding_allocations_str())
    }

    /// Writes the outstanding allocations to the debug log.
    fn log_outstanding_allocations(&self, py: Python<'_>) {
        py.detach(|| self.tracking.log_outstanding_allocations());
    }
}

/// Calls `callback(nbytes) -> bool` when the upstream runs out of memory, and retries the
/// allocation while it returns True (RMM's `FailureCallbackResourceAdaptor`). An exception from the
/// callback ends the allocation and is raised (as RuntimeError unless it is a MemoryError).
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "FailureCallbackResourceAdaptor")]
pub(crate) struct PyFailureCallbackResourceAdaptor {
    callback: Py<PyAny>,
}

#[pymethods]
impl PyFailureCallbackResourceAdaptor {
    #[new]
    fn py_new(upstream_mr: Bound<'_, PyDeviceMemoryResource>, callback: Py<PyAny>) -> PyClassInitializer<Self> {
        let func = callback.clone_ref(upstream_mr.py());
        let on_failure = move |bytes: usize| -> bool {
            Python::attach(|py| match func.call1(py, (bytes,)).and_then(|r| r.bind(py).is_truthy()) {
                Ok(retry) => retry,
                Err(e) => {
                    park(e);
                    false
                }
            })
        };
        let mr = FailureCallbackResourceAdaptor::new(upstream_mr.get().inner.clone(), Arc::new(on_failure));
        adaptor(mr, &upstream_mr, Self { callback })
    }

    /// The callback given to the constructor (an rmm-rs extra).
    #[getter]
    fn callback(&self, py: Python<'_>) -> Py<PyAny> {
        self.callback.clone_ref(py)
    }
}

/// Prefetches every allocation of managed memory to the current device on the allocation's stream
/// (RMM's `PrefetchResourceAdaptor`).
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "PrefetchResourceAdaptor")]
pub(crate) struct PyPrefetchResourceAdaptor;

#[pymethods]
impl PyPrefetchResourceAdaptor {
    #[new]
    fn py_new(upstream_mr: Bound<'_, PyDeviceMemoryResource>) -> PyClassInitializer<Self> {
        adaptor(PrefetchResourceAdaptor::new(upstream_mr.get().inner.clone()), &upstream_mr, Self)
    }
}
