//! The one place where `rmm_core::Error` becomes a Python exception.
//!
//! | core error | Python exception |
//! | --- | --- |
//! | `OutOfMemory` | `MemoryError` (as RMM raises for `rmm::out_of_memory`) |
//! | `InvalidArgument` | `ValueError` |
//! | `Cuda`, `NoDriver`, `NoDevice`, `Unsupported` | `RuntimeError` |
//!
//! The message is the core error's `Display` text, so Python sees the same words as Rust and C++.

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::PyErr;
use rmm_core::Error;

/// The Python exception for a core error.
pub(crate) fn to_py_err(error: Error) -> PyErr {
    let message = error.to_string();
    match error {
        Error::OutOfMemory { .. } => PyMemoryError::new_err(message),
        Error::InvalidArgument(_) => PyValueError::new_err(message),
        Error::Cuda { .. } | Error::NoDriver(_) | Error::NoDevice(_) | Error::Unsupported(_) => {
            PyRuntimeError::new_err(message)
        }
    }
}

/// `.into_py_result()` on a core `Result`: the idiom every binding method ends with.
pub(crate) trait IntoPyResult<T> {
    fn into_py_result(self) -> pyo3::PyResult<T>;
}

impl<T> IntoPyResult<T> for rmm_core::Result<T> {
    fn into_py_result(self) -> pyo3::PyResult<T> {
        self.map_err(to_py_err)
    }
}
