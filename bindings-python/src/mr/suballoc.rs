//! Sub-allocators over an upstream resource: `PoolMemoryResource`, `ArenaMemoryResource`,
//! `FixedSizeMemoryResource` and `BinningMemoryResource`, made by librmm (`native.rs`).

use std::ffi::c_int;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use rmm_core::resource::rmm_resource;
use rmm_core::Error;

use super::{adaptor, handle_of, optional_size, PyDeviceMemoryResource, PyUpstreamResourceAdaptor};
use crate::error::{to_py_err, IntoPyResult};
use crate::native::{self, adopt};

/// RMM checks sizes with RMM_EXPECTS (rmm::logic_error), which Python sees as RuntimeError.
fn logic_error(e: Error) -> PyErr {
    match e {
        Error::InvalidArgument(message) => PyRuntimeError::new_err(message),
        other => to_py_err(other),
    }
}

/// A coalescing best-fit pool over an upstream resource (RMM's `PoolMemoryResource`).
///
/// `initial_pool_size=None` takes half of the current device's free memory (0 in host mode or over
/// a host-only upstream, where the pool grows on demand); `maximum_pool_size=None` means no limit.
/// Sizes are ints or strings such as "1 GiB", multiples of 256.
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "PoolMemoryResource")]
pub(crate) struct PyPoolMemoryResource;

#[pymethods]
impl PyPoolMemoryResource {
    #[new]
    #[pyo3(signature = (upstream_mr, initial_pool_size = None, maximum_pool_size = None))]
    fn py_new(
        py: Python<'_>,
        upstream_mr: Bound<'_, PyDeviceMemoryResource>,
        initial_pool_size: Option<Bound<'_, PyAny>>,
        maximum_pool_size: Option<Bound<'_, PyAny>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let initial = native::optional(optional_size(initial_pool_size.as_ref())?);
        let maximum = native::optional(optional_size(maximum_pool_size.as_ref())?);
        let upstream = upstream_mr.get().inner.clone();
        // The initial allocation may take a while (a large cudaMalloc): other threads keep running.
        let pool = py.detach(|| {
            // SAFETY: a live borrowed upstream handle (librmm retains it); valid out-pointers.
            adopt("rmm_pool_memory_resource_new", |out, err| unsafe {
                native::rmm_pool_memory_resource_new(
                    upstream.borrow_handle(),
                    initial,
                    maximum,
                    out,
                    err,
                )
            })
        });
        Ok(adaptor(
            pool.map_err(logic_error)?,
            Some(&upstream_mr),
            Self,
        ))
    }

    /// Bytes the pool currently holds from its upstream.
    fn pool_size(slf: &Bound<'_, Self>) -> PyResult<u64> {
        let h = handle_of(slf)?;
        // SAFETY: a live borrowed handle; a valid out-pointer.
        let size = native::read("rmm_pool_memory_resource_pool_size", 0, |out, err| unsafe {
            native::rmm_pool_memory_resource_pool_size(h, out, err)
        });
        size.into_py_result()
    }
}

/// Per-thread arenas over a global arena of superblocks (RMM's `ArenaMemoryResource`).
/// `arena_size=None` takes half of the device's free memory; `dump_log_on_failure` writes the
/// arena's state to a file when an allocation fails.
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "ArenaMemoryResource")]
pub(crate) struct PyArenaMemoryResource;

#[pymethods]
impl PyArenaMemoryResource {
    #[new]
    #[pyo3(signature = (upstream_mr, arena_size = None, dump_log_on_failure = false))]
    fn py_new(
        py: Python<'_>,
        upstream_mr: Bound<'_, PyDeviceMemoryResource>,
        arena_size: Option<Bound<'_, PyAny>>,
        dump_log_on_failure: bool,
    ) -> PyResult<PyClassInitializer<Self>> {
        let size = native::optional(optional_size(arena_size.as_ref())?);
        let upstream = upstream_mr.get().inner.clone();
        let arena = py.detach(|| {
            // SAFETY: a live borrowed upstream handle (librmm retains it); valid out-pointers.
            adopt("rmm_arena_memory_resource_new", |out, err| unsafe {
                native::rmm_arena_memory_resource_new(
                    upstream.borrow_handle(),
                    size,
                    c_int::from(dump_log_on_failure),
                    out,
                    err,
                )
            })
        });
        Ok(adaptor(
            arena.map_err(logic_error)?,
            Some(&upstream_mr),
            Self,
        ))
    }
}

/// Blocks of one size carved from chunks of `blocks_to_preallocate` blocks (RMM's
/// `FixedSizeMemoryResource`); larger requests fail with MemoryError.
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "FixedSizeMemoryResource")]
pub(crate) struct PyFixedSizeMemoryResource;

#[pymethods]
impl PyFixedSizeMemoryResource {
    #[new]
    #[pyo3(signature = (upstream_mr, block_size = 1 << 20, blocks_to_preallocate = 128))]
    fn py_new(
        py: Python<'_>,
        upstream_mr: Bound<'_, PyDeviceMemoryResource>,
        block_size: usize,
        blocks_to_preallocate: usize,
    ) -> PyResult<PyClassInitializer<Self>> {
        let upstream = upstream_mr.get().inner.clone();
        let fixed = py.detach(|| {
            // SAFETY: a live borrowed upstream handle (librmm retains it); valid out-pointers.
            adopt("rmm_fixed_size_memory_resource_new", |out, err| unsafe {
                native::rmm_fixed_size_memory_resource_new(
                    upstream.borrow_handle(),
                    block_size as u64,
                    blocks_to_preallocate as u64,
                    out,
                    err,
                )
            })
        });
        Ok(adaptor(
            fixed.map_err(logic_error)?,
            Some(&upstream_mr),
            Self,
        ))
    }
}

/// Routes each request to the smallest bin that fits, else to the upstream (RMM's
/// `BinningMemoryResource`). With both exponents given, bins of 2^min .. 2^max bytes are made
/// (fixed-size resources over the upstream); `add_bin` adds more.
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "BinningMemoryResource")]
pub(crate) struct PyBinningMemoryResource {
    /// The bin resources given to `add_bin`, as RMM's `bin_mrs` (one list object, kept).
    bin_mrs: Py<PyList>,
}

impl PyBinningMemoryResource {
    /// A binning resource that Python did not make (bins given elsewhere are not listed).
    pub(crate) fn wrapped(py: Python<'_>) -> Self {
        Self {
            bin_mrs: PyList::empty(py).unbind(),
        }
    }
}

#[pymethods]
impl PyBinningMemoryResource {
    #[new]
    #[pyo3(signature = (upstream_mr, min_size_exponent = -1, max_size_exponent = -1))]
    fn py_new(
        py: Python<'_>,
        upstream_mr: Bound<'_, PyDeviceMemoryResource>,
        min_size_exponent: i8,
        max_size_exponent: i8,
    ) -> PyResult<PyClassInitializer<Self>> {
        let upstream = upstream_mr.get().inner.clone();
        let exponents = match (
            u32::try_from(min_size_exponent),
            u32::try_from(max_size_exponent),
        ) {
            (Ok(_), Ok(_)) => Some((
                c_int::from(min_size_exponent),
                c_int::from(max_size_exponent),
            )),
            _ => None,
        };
        let binning = py.detach(|| {
            // SAFETY: a live borrowed upstream handle (librmm retains it); valid out-pointers.
            adopt("rmm_binning_memory_resource_new", |out, err| unsafe {
                match exponents {
                    Some((min, max)) => native::rmm_binning_memory_resource_new_with_exponents(
                        upstream.borrow_handle(),
                        min,
                        max,
                        out,
                        err,
                    ),
                    None => {
                        native::rmm_binning_memory_resource_new(upstream.borrow_handle(), out, err)
                    }
                }
            })
        });
        Ok(adaptor(
            binning.map_err(logic_error)?,
            Some(&upstream_mr),
            Self::wrapped(py),
        ))
    }

    /// Adds a bin for requests up to `allocation_size` bytes, served by `bin_resource` (default: a
    /// fixed-size resource over the upstream).
    #[pyo3(signature = (allocation_size, bin_resource = None))]
    fn add_bin(
        slf: &Bound<'_, Self>,
        allocation_size: usize,
        bin_resource: Option<Bound<'_, PyDeviceMemoryResource>>,
    ) -> PyResult<()> {
        let py = slf.py();
        let resource = slf
            .as_any()
            .cast::<PyDeviceMemoryResource>()?
            .get()
            .inner
            .clone();
        let bin = bin_resource.as_ref().map(|r| r.get().inner.clone());
        let added = py.detach(|| {
            let bin_handle = bin
                .as_ref()
                .map_or(rmm_resource::NULL, |b| b.borrow_handle());
            // SAFETY: live borrowed handles (librmm retains the bin's), or the empty handle for "a
            // fixed-size bin over the upstream".
            native::call("rmm_binning_memory_resource_add_bin", |err| unsafe {
                native::rmm_binning_memory_resource_add_bin(
                    resource.borrow_handle(),
                    allocation_size as u64,
                    bin_handle,
                    err,
                )
            })
        });
        added.map_err(logic_error)?;
        if let Some(bin) = bin_resource {
            slf.get().bin_mrs.bind(py).append(bin)?;
        }
        Ok(())
    }

    /// The resources given to `add_bin`, in order.
    #[getter]
    fn bin_mrs(&self, py: Python<'_>) -> Py<PyList> {
        self.bin_mrs.clone_ref(py)
    }
}
