//! A Rust library with its own copy of rmm-core that makes a pool and sets it as the process's
//! current device resource (`scripts/bench-python-setter.py` loads it with ctypes after `import rmm`,
//! so `rmm::registry` routes to librmm's registry): the "Rust set it" case of that benchmark.
//!
//! C interface: `int rmm_bench_rust_set_pool(uint64_t initial_pool_size)` makes a
//! `PoolMemoryResource` of that initial size over a `CudaMemoryResource` (a `SystemMemoryResource`
//! in host mode) and makes it the current device resource; 0 on success, non-zero after printing
//! the error. Panics are caught, nothing unwinds into the caller.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

use rmm::mr::{CudaMemoryResource, SystemMemoryResource};
use rmm::prelude::*;
use rmm::PoolBuilder;

fn set_pool(initial_pool_size: u64) -> Result<()> {
    let initial = usize::try_from(initial_pool_size)
        .map_err(|_| Error::invalid("initial_pool_size does not fit"))?;
    let pool = if rmm::cuda::is_host_mode() {
        PoolBuilder::new(SystemMemoryResource::new())
    } else {
        PoolBuilder::new(CudaMemoryResource::new())
    }
    .initial_size(initial)
    .build()?;
    // The previous resource is dropped here, outside any lock.
    rmm::registry::set_current_resource(AnyResource::new(pool))?;
    Ok(())
}

/// Makes a pool of `initial_pool_size` bytes in this library's rmm-core the current device resource.
#[no_mangle]
pub extern "C" fn rmm_bench_rust_set_pool(initial_pool_size: u64) -> c_int {
    match catch_unwind(AssertUnwindSafe(|| set_pool(initial_pool_size))) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            eprintln!("rmm_bench_rust_set_pool: {e}");
            1
        }
        Err(_) => {
            eprintln!("rmm_bench_rust_set_pool panicked");
            2
        }
    }
}
