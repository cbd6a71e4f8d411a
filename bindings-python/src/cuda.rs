//! Bindings for `rmm_core::cuda`: host-mode query and device memory information.

use pyo3::prelude::*;
use rmm_core::cuda;

use crate::error::IntoPyResult;

/// True when no usable CUDA driver or device is present and only host memory works
/// (an rmm-rs extension; RMM itself has no host mode).
#[pyfunction]
fn is_host_mode() -> bool {
    cuda::is_host_mode()
}

/// `(free, total)` bytes of device memory on the current device (`rmm.mr.available_device_memory`).
///
/// Raises RuntimeError in host mode.
#[pyfunction]
fn available_device_memory(py: Python<'_>) -> PyResult<(usize, usize)> {
    py.detach(|| cuda::current_device().and_then(cuda::mem_info))
        .into_py_result()
}

/// Number of CUDA devices (RuntimeError in host mode).
#[pyfunction]
fn get_device_count() -> PyResult<i32> {
    cuda::device_count().into_py_result()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(is_host_mode, m)?)?;
    m.add_function(wrap_pyfunction!(available_device_memory, m)?)?;
    m.add_function(wrap_pyfunction!(get_device_count, m)?)?;
    Ok(())
}
