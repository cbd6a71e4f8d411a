//! Sub-allocators over an upstream resource: `PoolMemoryResource`, `ArenaMemoryResource`,
//! `FixedSizeMemoryResource` and `BinningMemoryResource`.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyList;
use rmm_core::mr::{ArenaMemoryResource, BinningMemoryResource, FixedSizeMemoryResource, PoolMemoryResource};
use rmm_core::Error;

use super::{adaptor, optional_size, Backend, PyDeviceMemoryResource, PyUpstreamResourceAdaptor};
use crate::error::{to_py_err, IntoPyResult};
use crate::owner::OwnerResource;

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
pub(crate) struct PyPoolMemoryResource {
    pool: Backend<PoolMemoryResource>,
}

impl PyPoolMemoryResource {
    pub(crate) fn local(pool: PoolMemoryResource) -> Self {
        Self { pool: Backend::Local(pool) }
    }

    pub(crate) fn owner(owner: OwnerResource) -> Self {
        Self { pool: Backend::Owner(owner) }
    }
}

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
        let initial = optional_size(initial_pool_size.as_ref())?;
        let maximum = optional_size(maximum_pool_size.as_ref())?;
        let upstream = upstream_mr.get().inner.clone();
        // The initial allocation may take a while (a large cudaMalloc): other threads keep running.
        let pool = py.detach(|| PoolMemoryResource::new(upstream, initial, maximum)).map_err(logic_error)?;
        Ok(adaptor(pool.clone(), &upstream_mr, Self::local(pool)))
    }

    /// Bytes the pool currently holds from its upstream.
    fn pool_size(&self) -> PyResult<usize> {
        match &self.pool {
            Backend::Local(pool) => Ok(pool.pool_size()),
            Backend::Owner(owner) => owner.pool_size().into_py_result(),
        }
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
        let size = optional_size(arena_size.as_ref())?;
        let upstream = upstream_mr.get().inner.clone();
        let arena = py.detach(|| ArenaMemoryResource::new(upstream, size, dump_log_on_failure)).map_err(logic_error)?;
        Ok(adaptor(arena, &upstream_mr, Self))
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
        let fixed =
            py.detach(|| FixedSizeMemoryResource::new(upstream, block_size, blocks_to_preallocate)).map_err(logic_error)?;
        Ok(adaptor(fixed, &upstream_mr, Self))
    }
}

/// Routes each request to the smallest bin that fits, else to the upstream (RMM's
/// `BinningMemoryResource`). With both exponents given, bins of 2^min .. 2^max bytes are made
/// (fixed-size resources over the upstream); `add_bin` adds more.
#[pyclass(extends = PyUpstreamResourceAdaptor, frozen, module = "rmm.pylibrmm.memory_resource", name = "BinningMemoryResource")]
pub(crate) struct PyBinningMemoryResource {
    binning: BinningMemoryResource,
    /// The bin resources given to `add_bin`, as RMM's `bin_mrs` (one list object, kept).
    bin_mrs: Py<PyList>,
}

impl PyBinningMemoryResource {
    /// A binning resource that Python did not make (bins given elsewhere are not listed).
    pub(crate) fn wrapped(py: Python<'_>, binning: BinningMemoryResource) -> PyResult<Self> {
        Ok(Self { binning, bin_mrs: PyList::empty(py).unbind() })
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
        let binning = match (u32::try_from(min_size_exponent), u32::try_from(max_size_exponent)) {
            (Ok(min), Ok(max)) if min_size_exponent != -1 && max_size_exponent != -1 => {
                py.detach(|| BinningMemoryResource::with_exponents(upstream, min, max)).map_err(logic_error)?
            }
            _ => BinningMemoryResource::new(upstream),
        };
        let class = Self::wrapped(py, binning.clone())?;
        Ok(adaptor(binning, &upstream_mr, class))
    }

    /// Adds a bin for requests up to `allocation_size` bytes, served by `bin_resource` (default: a
    /// fixed-size resource over the upstream).
    #[pyo3(signature = (allocation_size, bin_resource = None))]
    fn add_bin(
        &self,
        py: Python<'_>,
        allocation_size: usize,
        bin_resource: Option<Bound<'_, PyDeviceMemoryResource>>,
    ) -> PyResult<()> {
        let resource = bin_resource.as_ref().map(|r| r.get().inner.clone());
        py.detach(|| self.binning.add_bin(allocation_size, resource)).map_err(logic_error)?;
        if let Some(bin) = bin_resource {
            self.bin_mrs.bind(py).append(bin)?;
        }
        Ok(())
    }

    /// The resources given to `add_bin`, in order.
    #[getter]
    fn bin_mrs(&self, py: Python<'_>) -> Py<PyList> {
        self.bin_mrs.clone_ref(py)
    }
}
