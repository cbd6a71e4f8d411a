//! The Rust part of the tour's shared stop (`scripts/tour.sh`): a `cdylib` that Python loads with
//! ctypes after `librmm_rs.so`. It uses only the `rmm` crate's public API; because librmm is already
//! loaded when this library first asks for the current resource, `rmm::registry` routes to librmm's
//! registry, so these containers come from whatever C++ or Python made the current device resource.
//!
//! C interface (every function returns 0 on success, non-zero after printing the error; panics are
//! caught, nothing unwinds into the caller):
//! - `int rmm_tour_rust_allocate(void)`: a `DeviceBuffer` of 64 KiB and a `DeviceVector<u32>` of
//!   1000 elements (filled and read back) from the current device resource, kept until
//! - `int rmm_tour_rust_free(void)`: drops them, freeing through the resource they came from.
//! - `int rmm_tour_rust_read_view(const rmm_strided_view* view, float* out)`: reads a strided view
//!   that Python acquired (`StridedMemoryView.c_view_address`) through `rmm::view`'s slice accessors,
//!   with no Python call, and returns its float at index [1][1].

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
        return Err(Error::invalid(
            "already allocated: call rmm_tour_rust_free first",
        ));
    }
    let mr = rmm::registry::current_resource()?;
    println!(
        "  [Rust] current device resource: {} (through librmm's registry: {})",
        mr.name(),
        rmm::registry::routes_to_owner()
    );
    let buffer = DeviceBuffer::new(BUFFER_BYTES, Stream::DEFAULT, mr.clone())?;
    println!(
        "  [Rust] DeviceBuffer of {BUFFER_BYTES} bytes at {:#x}",
        buffer.as_ptr() as usize
    );
    let values: Vec<u32> = (0..VECTOR_LEN as u32).map(|i| i * i).collect();
    let vector = DeviceVector::from_slice(&values, Stream::DEFAULT, mr)?;
    if vector.to_vec()? != values {
        return Err(Error::invalid(
            "DeviceVector<u32> did not read back what was written",
        ));
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
        return Err(Error::invalid(
            "nothing to free: call rmm_tour_rust_allocate first",
        ));
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

fn read_view(view: *const rmm::view::rmm_strided_view, out: *mut f32) -> Result<()> {
    // SAFETY: Python passes the address of a view it holds acquired for the duration of this call.
    let view =
        unsafe { view.as_ref() }.ok_or_else(|| Error::invalid("the view must not be NULL"))?;
    if !view.is_live() {
        return Err(Error::invalid("the view was released"));
    }
    // SAFETY: a live view: its shape, strides and format are valid while it is acquired.
    let (shape, strides, byte_strides, format) = unsafe {
        (
            view.shape_slice(),
            view.strides_slice(),
            view.byte_strides_slice(),
            view.format_str(),
        )
    };
    println!(
        "  [Rust] rmm::view::rmm_strided_view: shape {shape:?}, strides {strides:?} items, format {format:?}, device type {}",
        view.device_type
    );
    if view.ndim != 2 || view.itemsize != 4 {
        return Err(Error::invalid("expected a 2-d float32 view"));
    }
    let at = view.ptr as i64 + byte_strides[0] + byte_strides[1];
    let mut value = [0u8; 4];
    // SAFETY: [1][1] lies inside the viewed memory (its shape is at least 2 x 2), live while acquired.
    unsafe { rmm::cuda::copy_sync(value.as_mut_ptr(), at as *const u8, 4, Stream::DEFAULT)? };
    let value = f32::from_ne_bytes(value);
    println!("  [Rust] element [1][1] = {value}");
    // SAFETY: `out` is the caller's float, or NULL.
    if let Some(slot) = unsafe { out.as_mut() } {
        *slot = value;
    }
    Ok(())
}

/// Reads a strided view of Python's from Rust (see the module docs).
#[no_mangle]
pub extern "C" fn rmm_tour_rust_read_view(
    view: *const rmm::view::rmm_strided_view,
    out: *mut f32,
) -> c_int {
    entry("read_view", || read_view(view, out))
}
