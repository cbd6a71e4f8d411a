//! `rmm._rmm`: the compiled half of the Python package `rmm`.
//!
//! One Rust file per core module (`cuda.rs` ↔ `rmm_core::cuda`, `mr.rs` ↔ `rmm_core::mr`,
//! `registry.rs` ↔ `rmm_core::registry`), errors mapped in one place (`error.rs`), librmm's own
//! accessors for resources that C++ made in `owner.rs`. The pure-Python package in `python/rmm/`
//! arranges these names into RMM's public modules (`rmm.mr`, ...); user code never imports
//! `rmm._rmm` directly.

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
    Ok(())
}
