//! [`CxxDeviceBuffer`]: our C++ `rmm::device_buffer` in a crate's own `#[cxx::bridge]`, passed as
//! `UniquePtr<device_buffer>` both ways, and moved to and from the Rust [`DeviceBuffer`] with no
//! copy ([`buffer_from_cxx`], [`buffer_into_cxx`]).
//!
//! The C++ half is `<rmm/cxx_device_buffer.hpp>`: include it in the C++ the bridge compiles with
//! (it defines the `delete` behind `UniquePtr`'s drop and the two moves), and link librmm, which
//! `rmm::device_buffer` itself calls (examples/cxx-bridge links the `rmm-c-abi` crate, librmm as an
//! rlib). The functions here are `#[inline]`: a crate that enables the `cxx` feature but never names
//! `CxxDeviceBuffer` needs neither.
//!
//! ```ignore
//! #[cxx::bridge]
//! mod ffi {
//!     unsafe extern "C++" {
//!         include!("rmm/cxx_device_buffer.hpp");
//!         include!("my_crate/include/lib.hpp");
//!         #[namespace = "rmm"]
//!         type device_buffer = rmm::cxx::CxxDeviceBuffer;
//!         // C++: std::unique_ptr<rmm::device_buffer> make(std::size_t n);
//!         fn make(n: usize) -> Result<UniquePtr<device_buffer>>;
//!         // C++: std::size_t consume(std::unique_ptr<rmm::device_buffer> buf);
//!         fn consume(buf: UniquePtr<device_buffer>) -> usize;
//!     }
//! }
//! let rust: rmm::DeviceBuffer = rmm::cxx::buffer_from_cxx(ffi::make(1024)?)?; // no copy
//! ffi::consume(rmm::cxx::buffer_into_cxx(rust)?);                              // no copy
//! ```

use std::ffi::{c_int, c_void};
use std::fmt;
use std::marker::{PhantomData, PhantomPinned};
use std::mem::MaybeUninit;
use std::ptr;

use ::cxx::memory::UniquePtrTarget;
use ::cxx::UniquePtr;
use rmm_core::resource::status::{error_from_c, rmm_error, RMM_OK};
use rmm_core::{DeviceBuffer, Error, Result};

use crate::interop::BufferExport;

/// The C++ `rmm::device_buffer` (of `<rmm/device_buffer.hpp>`), as a `cxx::ExternType` of kind
/// Opaque: a bridge declares `#[namespace = "rmm"] type device_buffer = rmm::cxx::CxxDeviceBuffer;`
/// and passes `UniquePtr<device_buffer>` (C++ `std::unique_ptr<rmm::device_buffer>`) both ways.
/// Rust never holds one by value; dropping the `UniquePtr` deletes it in C++ (freeing its memory
/// through its resource, on its stream).
#[repr(C)]
pub struct CxxDeviceBuffer {
    _opaque: [u8; 0],
    // Neither Send nor Sync nor Unpin: a C++ object only reached through a pointer.
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

impl fmt::Debug for CxxDeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rmm::device_buffer@{:p}", self)
    }
}

// SAFETY: `rmm::device_buffer` is a C++ class that Rust only handles behind pointers (kind Opaque).
unsafe impl ::cxx::ExternType for CxxDeviceBuffer {
    type Id = ::cxx::type_id!("rmm::device_buffer");
    type Kind = ::cxx::kind::Opaque;
}

// Defined by <rmm/cxx_device_buffer.hpp> in the C++ the crate's bridge compiles with.
unsafe extern "C" {
    fn rmm_cxx_device_buffer_delete(buf: *mut CxxDeviceBuffer);
    fn rmm_cxx_device_buffer_into_export(
        owned: *mut CxxDeviceBuffer,
        out: *mut *mut c_void,
        err: *mut rmm_error,
    ) -> c_int;
    fn rmm_cxx_device_buffer_from_export(
        export: *mut c_void,
        out: *mut *mut CxxDeviceBuffer,
        err: *mut rmm_error,
    ) -> c_int;
}

// SAFETY: the `UniquePtr` representation is the owned pointer itself. cxx only moves raw pointers
// across a bridge (`UniquePtr::into_raw` into a call, `from_raw` out of one), and C++ rebuilds the
// `std::unique_ptr` from them, so the representation only has to be consistent here: `__null` is
// the null pointer, `__raw` stores the pointer, `__get`/`__release` read it back, and `__drop`
// deletes a non-null one exactly once, in C++, as `std::unique_ptr`'s destructor would.
unsafe impl UniquePtrTarget for CxxDeviceBuffer {
    fn __typename(f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("rmm::device_buffer")
    }

    #[inline]
    fn __null() -> MaybeUninit<*mut c_void> {
        MaybeUninit::new(ptr::null_mut())
    }

    #[inline]
    unsafe fn __raw(raw: *mut Self) -> MaybeUninit<*mut c_void> {
        MaybeUninit::new(raw.cast())
    }

    #[inline]
    unsafe fn __get(repr: MaybeUninit<*mut c_void>) -> *const Self {
        // SAFETY: every representation is written by __null or __raw.
        unsafe { repr.assume_init() }.cast_const().cast()
    }

    #[inline]
    unsafe fn __release(repr: MaybeUninit<*mut c_void>) -> *mut Self {
        // SAFETY: as above; the caller forgets the UniquePtr, so the pointer is handed on once.
        unsafe { repr.assume_init() }.cast()
    }

    #[inline]
    unsafe fn __drop(repr: MaybeUninit<*mut c_void>) {
        // SAFETY: as above; the UniquePtr owns the object (or is null) and is dropped once.
        let buf: *mut Self = unsafe { repr.assume_init() }.cast();
        if !buf.is_null() {
            // SAFETY: an owned `rmm::device_buffer*` made with `new` (by C++ or by
            // `buffer_into_cxx`), deleted once.
            unsafe { rmm_cxx_device_buffer_delete(buf) };
        }
    }
}

/// Moves the memory of a C++ `std::unique_ptr<rmm::device_buffer>` into a Rust [`DeviceBuffer`],
/// with no copy: same pointer, size, capacity, alignment, stream and device; the memory is freed
/// once, when the Rust buffer (or whoever it moves to next) drops it, through the resource that
/// made it.
///
/// # Errors
/// [`Error::InvalidArgument`] for a null `UniquePtr`, or when librmm cannot export the buffer; the
/// C++ buffer is consumed (freed) in every case.
#[inline]
pub fn buffer_from_cxx(buf: UniquePtr<CxxDeviceBuffer>) -> Result<DeviceBuffer> {
    if buf.is_null() {
        return Err(Error::invalid(
            "a null std::unique_ptr<rmm::device_buffer> has no memory to move",
        ));
    }
    let (mut export, mut err) = (ptr::null_mut(), rmm_error::new());
    // SAFETY: an owned, non-null `rmm::device_buffer*` (the UniquePtr gives it up), consumed by the
    // call; valid out-pointers.
    let status =
        unsafe { rmm_cxx_device_buffer_into_export(buf.into_raw(), &mut export, &mut err) };
    if status != RMM_OK {
        return Err(error_from_c(
            status,
            &err,
            "rmm::device_buffer",
            "rmm_device_buffer_export",
        ));
    }
    // SAFETY: on success `export` is an owning `rmm_buffer_export*` that only we hold.
    unsafe { BufferExport::from_raw(export) }
        .ok_or_else(|| Error::invalid("librmm exported the buffer as NULL"))?
        .into_buffer()
}

/// Moves a Rust [`DeviceBuffer`] into a new C++ `std::unique_ptr<rmm::device_buffer>`, with no copy;
/// the C++ buffer's `memory_resource()` is the Rust buffer's resource, and the memory is freed once,
/// when C++ (or whoever it moves to next) drops it, through that resource on the buffer's stream.
///
/// # Errors
/// [`Error::OutOfMemory`] / [`Error::InvalidArgument`] when librmm cannot adopt the export; the
/// memory is freed then.
#[inline]
pub fn buffer_into_cxx(buf: DeviceBuffer) -> Result<UniquePtr<CxxDeviceBuffer>> {
    let export = BufferExport::new(buf).into_raw();
    let (mut out, mut err) = (ptr::null_mut(), rmm_error::new());
    // SAFETY: an owning export, consumed by the call in every case; valid out-pointers.
    let status = unsafe { rmm_cxx_device_buffer_from_export(export, &mut out, &mut err) };
    if status != RMM_OK {
        return Err(error_from_c(
            status,
            &err,
            "rmm::device_buffer",
            "rmm_device_buffer_import",
        ));
    }
    // SAFETY: on success `out` is a new, owned `rmm::device_buffer*` made with `new`.
    Ok(unsafe { UniquePtr::from_raw(out) })
}
