//! `rmm._rmm`: the compiled half of the Python package `rmm`.
//!
//! One Rust file per area, each class declaring RMM's module path (`module = ...`) so reprs and
//! pickles name RMM's modules:
//! - `mr/` ↔ `rmm_core::mr` (`rmm.pylibrmm.memory_resource`): `mod.rs` the base classes, size
//!   arguments and `wrap`; `base.rs` resources without upstream; `suballoc.rs` pool, arena,
//!   fixed-size, binning; `adaptors.rs` the adaptors;
//! - `buffer.rs` ↔ `rmm_core::buffer` (`rmm.pylibrmm.device_buffer`), over `hostbuf.rs` (the buffer
//!   protocol);
//! - `stream.rs` ↔ `rmm_core::cuda` streams (`rmm.pylibrmm.stream`, `.cuda_stream_pool`);
//! - `logger.rs` ↔ `rmm_core::debug_log` (`rmm.pylibrmm.logger`);
//! - `registry.rs` ↔ `rmm_core::registry`; `cuda.rs` ↔ `rmm_core::cuda` devices;
//! - `view.rs` ↔ `rmm_core::view`: `rmm.StridedMemoryView` and DLPack (also `DeviceBuffer.__dlpack__`);
//! - `error.rs`: errors mapped in one place; `owner.rs`: librmm's own accessors for resources
//!   that C++ made.
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
mod owner;
mod registry;
mod stream;
mod view;

/// The extension module. Flat on purpose: the Python package decides where each name lives.
#[pymodule]
fn _rmm(m: &Bound<'_, PyModule>) -> PyResult<()> {
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
