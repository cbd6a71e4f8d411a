//! `rmm._rmm`: the compiled half of the Python package `rmm`.
//!
//! One Rust file per area, each class declaring RMM's module path (`module = ...`) so reprs and
//! pickles name RMM's modules:
//! - `native.rs`: the C entry points of librmm, the process's one engine, which makes every
//!   resource, holds the registry and creates streams for Python (as for C++);
//! - `mr/` (`rmm.pylibrmm.memory_resource`): `mod.rs` the base classes, size arguments and `wrap`
//!   (the object for a resource of any kind); `base.rs` resources without upstream; `suballoc.rs`
//!   pool, arena, fixed-size, binning; `adaptors.rs` the adaptors;
//! - `buffer.rs` ↔ `rmm_core::buffer` (`rmm.pylibrmm.device_buffer`), over `hostbuf.rs` (the buffer
//!   protocol);
//! - `stream.rs`: streams (`rmm.pylibrmm.stream`, `.cuda_stream_pool`), created by librmm;
//! - `logger.rs`: librmm's debug log (`rmm.pylibrmm.logger`);
//! - `registry.rs`: librmm's registry (the current device resource); `cuda.rs` ↔ `rmm_core::cuda`
//!   devices;
//! - `view.rs` ↔ `rmm_core::view`: `rmm.StridedMemoryView` and DLPack (also `DeviceBuffer.__dlpack__`);
//! - `error.rs`: errors mapped in one place.
//!
//! The pure-Python package in `python/rmm/` arranges these names into RMM's public modules (`rmm.mr`,
//! `rmm.pylibrmm.*`, ...); user code never imports `rmm._rmm` directly.

use pyo3::prelude::*;

mod buffer;
mod cuda;
mod error;
mod hostbuf;
mod logger;
mod mr;
mod native;
mod registry;
mod stream;
mod view;

/// The extension module. Flat on purpose: the Python package decides where each name lives.
#[pymodule]
fn _rmm(m: &Bound<'_, PyModule>) -> PyResult<()> {
    native::check_abi().map_err(|e| pyo3::exceptions::PyImportError::new_err(e.to_string()))?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    cuda::register(m)?;
    stream::register(m)?;
    mr::register(m)?;
    registry::register(m)?;
    buffer::register(m)?;
    logger::register(m)?;
    view::register(m)?;
    Ok(())
}
