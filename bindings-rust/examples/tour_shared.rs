//! The Rust part of the tour's shared stop (`scripts/tour.sh`): a `cdylib` that Python loads with
//! ctypes after `librmm.so`. It uses only the `rmm` crate's public API; because librmm is already
//! loaded when this library first asks for the current resource, `rmm::registry` routes to librmm's
//! registry, so these containers come from whatever C++ or Python made the current device resource.
//!
//! C interface (every function returns 0 on success, non-zero after printing the error; panics are
//! caught, nothing unwinds into the caller):
//! - `int rmm_tour_rust_allocate(void)`: a `DeviceBuffer` of 64 KiB and a `DeviceVector<u32>` of
//!   1000 elements (filled and read back) from the current device resource, kept until
//! - `int rmm_tour_rust_free(void)`: drops them, freeing through the resource they came from.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, PoisonError};

use rmm::prelude::*;

/// What `rmm_tour_rust_allocate` made, alive until `rmm_tour_rust_free`.
struct Held {
    buffer: DeviceBuffer,
    vector: DeviceVector<u32>,
}

static HELD: Mutex<Option<Held>> = Mutex::new(None);

const BUFFER_BYTES: usize = 64 << 10;
const VECTOR_LEN: usize = 1000;

/// Runs `f` as one C entry point: errors and panics are printed and become a non-zero status.
fn entry(what: &str, f: impl FnOnce() -> Result<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            println!("  [Rust] {what} failed: {e}");
            1
        }
        Err(_) => {
            println!("  [Rust] {what} panicked");
            2
        }
    }
}

fn allocate() -> Result<()> {
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    if held.is_some() {
        return Err(Error::invalid("already allocated: call rmm_tour_rust_free first"));
    }
    let mr = rmm::registry::current_resource()?;
    println!("  [Rust] current device resource: {} (through librmm's registry: {})", mr.name(), rmm::registry::routes_to_owner());
    let buffer = DeviceBuffer::new(BUFFER_BYTES, Stream::DEFAULT, mr.clone())?;
    println!("  [Rust] DeviceBuffer of {BUFFER_BYTES} bytes at {:#x}", buffer.as_ptr() as usize);
    let values: Vec<u32> = (0..VECTOR_LEN as u32).map(|i| i * i).collect();
    let vector = DeviceVector::from_slice(&values, Stream::DEFAULT, mr)?;
    if vector.to_vec()? != values {
        return Err(Error::invalid("DeviceVector<u32> did not read back what was written"));
    }
    println!(
        "  [Rust] DeviceVector<u32> of {VECTOR_LEN} squares ({} bytes) at {:#x}, read back intact",
        VECTOR_LEN * 4,
        vector.as_ptr() as usize
    );
    *held = Some(Held { buffer, vector });
    Ok(())
}

fn free() -> Result<()> {
    let held = HELD.lock().unwrap_or_else(PoisonError::into_inner).take();
    let Some(Held { buffer, vector }) = held else {
        return Err(Error::invalid("nothing to free: call rmm_tour_rust_allocate first"));
    };
    let bytes = buffer.size() + vector.len() * std::mem::size_of::<u32>();
    // Dropped outside the lock: freeing calls into the resource, which may be another binary's.
    drop((buffer, vector));
    println!("  [Rust] freed the DeviceBuffer and the DeviceVector ({bytes} bytes)");
    Ok(())
}

/// Allocates the Rust part's containers from the current device resource.
#[no_mangle]
pub extern "C" fn rmm_tour_rust_allocate() -> c_int {
    entry("allocate", allocate)
}

/// Frees what `rmm_tour_rust_allocate` made.
#[no_mangle]
pub extern "C" fn rmm_tour_rust_free() -> c_int {
    entry("free", free)
}
