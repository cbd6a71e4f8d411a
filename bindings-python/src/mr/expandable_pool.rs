//! `rmm.mr.experimental.ExpandablePoolMemoryResource` (not an RMM type; issue 28): librmm's
//! expandable pool, and `ImportedAllocation`, another process's allocation of one mapped here.

use std::ffi::{c_int, c_void};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{handle_of, leaf, optional_size, PyDeviceMemoryResource};
use crate::error::IntoPyResult;
use crate::native::{self, adopt, rmm_expandable_pool_statistics};
use crate::stream::StreamArg;
use rmm_core::AnyResource;

/// A stream-ordered pool on one reserved range of virtual addresses of the current device (host
/// memory in host mode): it grows in place by whole granules, `trim()` gives back every granule
/// that lies wholly in free memory (between live blocks too), and a live allocation can be exported
/// to another process. Experimental: not an RMM type.
///
/// `initial_size`: bytes mapped at once (default none); `maximum_size`: the most bytes it ever
/// holds, its reservation (default twice the device's memory); `release_threshold`: mapped bytes
/// kept when frees give idle granules back (default none: everything stays mapped until `trim()`);
/// `peer_devices`: devices that get access to its memory. Sizes are ints or strings such as "1 GiB".
#[pyclass(extends = PyDeviceMemoryResource, frozen, module = "rmm.pylibrmm.memory_resource.experimental", name = "ExpandablePoolMemoryResource")]
pub(crate) struct PyExpandablePoolMemoryResource;

#[pymethods]
impl PyExpandablePoolMemoryResource {
    #[new]
    #[pyo3(signature = (initial_size = None, maximum_size = None, release_threshold = None, peer_devices = None))]
    fn py_new(
        py: Python<'_>,
        initial_size: Option<Bound<'_, PyAny>>,
        maximum_size: Option<Bound<'_, PyAny>>,
        release_threshold: Option<Bound<'_, PyAny>>,
        peer_devices: Option<Vec<i32>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let initial = native::optional(optional_size(initial_size.as_ref())?);
        let maximum = native::optional(optional_size(maximum_size.as_ref())?);
        let threshold = native::optional(optional_size(release_threshold.as_ref())?);
        let peers = peer_devices.unwrap_or_default();
        // Mapping the initial size may take a while: other threads keep running.
        let pool = py.detach(|| {
            // SAFETY: `peers` is readable for its length; valid out-pointers.
            adopt(
                "rmm_expandable_pool_memory_resource_new",
                |out, err| unsafe {
                    native::rmm_expandable_pool_memory_resource_new(
                        initial,
                        maximum,
                        threshold,
                        peers.as_ptr(),
                        peers.len(),
                        out,
                        err,
                    )
                },
            )
        });
        Ok(leaf(pool.into_py_result()?, Self))
    }

    /// The pool's counters: a dict of `reserved_bytes`, `granularity`, `mapped_bytes`,
    /// `peak_mapped_bytes`, `used_bytes`, `free_mapped_bytes`, `releasable_bytes`, `books_bytes`,
    /// `free_blocks`, `largest_free_block`, `cached_bytes`, `growth_steps`, `granules_mapped`,
    /// `granules_released`.
    fn statistics<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let h = handle_of(slf)?;
        // SAFETY: a live borrowed handle; a valid out-pointer.
        let s = native::read(
            "rmm_expandable_pool_memory_resource_statistics",
            rmm_expandable_pool_statistics::default(),
            |out, err| unsafe {
                native::rmm_expandable_pool_memory_resource_statistics(h, out, err)
            },
        )
        .into_py_result()?;
        let d = PyDict::new(slf.py());
        let fields = [
            ("reserved_bytes", s.reserved_bytes),
            ("granularity", s.granularity),
            ("mapped_bytes", s.mapped_bytes),
            ("peak_mapped_bytes", s.peak_mapped_bytes),
            ("used_bytes", s.used_bytes),
            ("free_mapped_bytes", s.free_mapped_bytes),
            ("releasable_bytes", s.releasable_bytes),
            ("books_bytes", s.books_bytes),
            ("free_blocks", s.free_blocks),
            ("largest_free_block", s.largest_free_block),
            ("cached_bytes", s.cached_bytes),
            ("growth_steps", s.growth_steps),
            ("granules_mapped", s.granules_mapped),
            ("granules_released", s.granules_released),
        ];
        for (name, value) in fields {
            d.set_item(name, value)?;
        }
        Ok(d)
    }

    /// Bytes mapped now (device memory the pool holds).
    fn mapped_bytes(slf: &Bound<'_, Self>) -> PyResult<u64> {
        let h = handle_of(slf)?;
        // SAFETY: a live borrowed handle; a valid out-pointer.
        native::read(
            "rmm_expandable_pool_memory_resource_mapped_bytes",
            0,
            |out, err| unsafe {
                native::rmm_expandable_pool_memory_resource_mapped_bytes(h, out, err)
            },
        )
        .into_py_result()
    }

    /// Bytes handed out now (requests rounded up to 256).
    fn used_bytes(slf: &Bound<'_, Self>) -> PyResult<u64> {
        let h = handle_of(slf)?;
        // SAFETY: a live borrowed handle; a valid out-pointer.
        native::read(
            "rmm_expandable_pool_memory_resource_used_bytes",
            0,
            |out, err| unsafe {
                native::rmm_expandable_pool_memory_resource_used_bytes(h, out, err)
            },
        )
        .into_py_result()
    }

    /// Gives back every mapped granule that lies wholly in free memory (between live blocks too),
    /// after the work queued on the streams that freed into it; returns the bytes released.
    fn trim(slf: &Bound<'_, Self>) -> PyResult<u64> {
        let pool = owner(slf)?;
        slf.py()
            .detach(|| {
                // SAFETY: a handle `pool` keeps live; a valid out-pointer.
                native::read(
                    "rmm_expandable_pool_memory_resource_trim",
                    0,
                    |out, err| unsafe {
                        native::rmm_expandable_pool_memory_resource_trim(
                            pool.borrow_handle(),
                            out,
                            err,
                        )
                    },
                )
            })
            .into_py_result()
    }

    /// The release threshold in bytes, or None.
    fn release_threshold(slf: &Bound<'_, Self>) -> PyResult<Option<u64>> {
        let h = handle_of(slf)?;
        // SAFETY: a live borrowed handle; a valid out-pointer.
        let t = native::read(
            "rmm_expandable_pool_memory_resource_release_threshold",
            0,
            |out, err| unsafe {
                native::rmm_expandable_pool_memory_resource_release_threshold(h, out, err)
            },
        )
        .into_py_result()?;
        Ok((t != native::SIZE_NONE).then_some(t))
    }

    /// Sets the release threshold (None: none); it applies from the next free on.
    #[pyo3(signature = (nbytes))]
    fn set_release_threshold(
        slf: &Bound<'_, Self>,
        nbytes: Option<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let h = handle_of(slf)?;
        let bytes = native::optional(optional_size(nbytes.as_ref())?);
        // SAFETY: a live borrowed handle.
        native::call(
            "rmm_expandable_pool_memory_resource_set_release_threshold",
            |err| unsafe {
                native::rmm_expandable_pool_memory_resource_set_release_threshold(h, bytes, err)
            },
        )
        .into_py_result()
    }

    /// Exports the live allocation at `ptr` of `nbytes` (as allocated) to another process over the
    /// connected Unix socket `socket_fd` (an int, or an object with `fileno()`; it stays the
    /// caller's): synchronizes `stream` (where its bytes were last written), then sends its shareable
    /// handles. The other process maps it with `ImportedAllocation.receive`. Keep the allocation
    /// until the other process is done with it. ValueError when `ptr` is not a live allocation of
    /// `nbytes` of this pool; RuntimeError when its memory carries no shareable handle.
    #[pyo3(signature = (ptr, nbytes, socket_fd, stream = StreamArg::Default))]
    fn export_allocation(
        slf: &Bound<'_, Self>,
        ptr: usize,
        nbytes: usize,
        socket_fd: Bound<'_, PyAny>,
        stream: StreamArg,
    ) -> PyResult<()> {
        let pool = owner(slf)?;
        let fd = file_descriptor(&socket_fd)?;
        let stream = stream.stream(slf.py());
        slf.py()
            .detach(|| {
                // SAFETY: a handle `pool` keeps live; the pool checks `ptr`; `fd` is the caller's socket.
                native::call("rmm_expandable_pool_memory_resource_export", |err| unsafe {
                    native::rmm_expandable_pool_memory_resource_export(
                        pool.borrow_handle(),
                        ptr as *mut c_void,
                        nbytes,
                        stream.as_raw() as *mut c_void,
                        fd,
                        err,
                    )
                })
            })
            .into_py_result()
    }
}

/// The pool as an owner (to hold while the GIL is released).
fn owner(slf: &Bound<'_, PyExpandablePoolMemoryResource>) -> PyResult<AnyResource> {
    Ok(slf
        .as_any()
        .cast::<PyDeviceMemoryResource>()?
        .get()
        .inner
        .clone())
}

/// An int file descriptor, or the `fileno()` of a socket object.
fn file_descriptor(obj: &Bound<'_, PyAny>) -> PyResult<c_int> {
    match obj.extract::<c_int>() {
        Ok(fd) => Ok(fd),
        Err(_) => obj.call_method0("fileno")?.extract(),
    }
}

/// An allocation of another process's `ExpandablePoolMemoryResource`, mapped into this one with no
/// copy (`ImportedAllocation.receive(socket_fd)`). `ptr` and `size` describe it; `close()` (or
/// garbage collection) unmaps it.
#[pyclass(
    module = "rmm.pylibrmm.memory_resource.experimental",
    name = "ImportedAllocation"
)]
pub(crate) struct PyImportedAllocation {
    span: *mut c_void,
    ptr: usize,
    size: usize,
}

// SAFETY: the span handle is librmm's (thread-safe) and is only freed once, under `&mut self`.
unsafe impl Send for PyImportedAllocation {}
// SAFETY: shared access reads only the two plain fields.
unsafe impl Sync for PyImportedAllocation {}

#[pymethods]
impl PyImportedAllocation {
    /// Receives an allocation another process exported (`export_allocation`) from the connected
    /// Unix socket `socket_fd` and maps it here.
    #[staticmethod]
    fn receive(py: Python<'_>, socket_fd: Bound<'_, PyAny>) -> PyResult<Self> {
        let fd = file_descriptor(&socket_fd)?;
        let (span, ptr, size) = py
            .detach(|| {
                let (mut span, mut ptr, mut size) =
                    (std::ptr::null_mut(), std::ptr::null_mut(), 0usize);
                // SAFETY: valid out-pointers; `fd` is the caller's socket.
                native::call("rmm_imported_span_receive", |err| unsafe {
                    native::rmm_imported_span_receive(fd, &mut span, &mut ptr, &mut size, err)
                })
                .map(|()| (span as usize, ptr as usize, size))
            })
            .into_py_result()?;
        Ok(Self {
            span: span as *mut c_void,
            ptr,
            size,
        })
    }

    /// The first byte's address in this process (0 once closed).
    #[getter]
    fn ptr(&self) -> usize {
        self.ptr
    }

    /// The size in bytes.
    #[getter]
    fn size(&self) -> usize {
        self.size
    }

    /// Unmaps the allocation (again: nothing).
    fn close(&mut self) {
        // SAFETY: from rmm_imported_span_receive, freed once (NULL afterwards).
        unsafe {
            native::rmm_imported_span_free(std::mem::replace(&mut self.span, std::ptr::null_mut()))
        };
        self.ptr = 0;
    }
}

impl Drop for PyImportedAllocation {
    fn drop(&mut self) {
        self.close();
    }
}
