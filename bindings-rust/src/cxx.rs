//! cxx interop (feature `cxx`): our resources in a crate's own `#[cxx::bridge]`, for C++ code that
//! takes `rmm::device_async_resource_ref`.
//!
//! [`ResourceHandle`] is a `cxx::ExternType` (kind Trivial) for the C++ type
//! `rmm::rs::resource_handle` of `<rmm/cxx.hpp>`: a borrowed `{self, vtable}` handle to one of our
//! resources, passed by value, which is itself a CCCL resource, so the C++ side hands it on as a
//! `device_async_resource_ref`. Allocation calls the Rust resource's own functions through the
//! handle's vtable: no librmm, no copy of the resource; a Rust error comes back as the C++
//! exception `rmm::out_of_memory` / `rmm::bad_alloc`, and to Rust as `Err` from a bridge function
//! that returns `Result`. Compile the C++ half with `cxx-build`, adding `bindings-cpp/include` (or
//! `rmm.get_include()` from the wheel) and the CCCL headers to its include path.
//!
//! ```ignore
//! #[cxx::bridge]
//! mod ffi {
//!     unsafe extern "C++" {
//!         include!("rmm/cxx.hpp");
//!         include!("my_crate/include/scale.hpp");
//!         #[namespace = "rmm::rs"]
//!         type resource_handle<'a> = rmm::cxx::ResourceHandle<'a>;
//!         // C++: std::size_t fill(rmm::rs::resource_handle mr, std::size_t n)
//!         //      { return library_fill(rmm::device_async_resource_ref{mr}, n); }
//!         fn fill<'a>(mr: resource_handle<'a>, n: usize) -> Result<usize>;
//!     }
//! }
//! let mr = rmm::registry::current_resource()?;
//! let sum = ffi::fill(rmm::cxx::ResourceHandle::new(&mr), 1 << 20)?;
//! ```
//! examples/cxx-bridge is a complete, tested crate.
//!
//! Buffers: [`CxxDeviceBuffer`] is the C++ `rmm::device_buffer` (kind Opaque), passed as
//! `UniquePtr<device_buffer>`, and [`buffer_from_cxx`] / [`buffer_into_cxx`] move its memory to and
//! from a Rust `DeviceBuffer` with no copy (C++ half: `<rmm/cxx_device_buffer.hpp>`; see
//! the `device_buffer` module's docs).

use std::ffi::c_void;
use std::marker::PhantomData;

use rmm_core::AnyResource;

mod device_buffer;

pub use device_buffer::{buffer_from_cxx, buffer_into_cxx, CxxDeviceBuffer};

/// A borrowed handle to one of our resources, the C++ `rmm::rs::resource_handle` (see the module
/// docs). It is valid for `'a`, the borrow of the resource it came from.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ResourceHandle<'a> {
    self_: *mut c_void,
    vtable: *const c_void,
    _resource: PhantomData<&'a AnyResource>,
}

impl<'a> ResourceHandle<'a> {
    /// A handle to `mr` for C++, borrowing it (nothing is copied or retained).
    pub fn new(mr: &'a AnyResource) -> Self {
        let handle = mr.borrow_handle();
        Self {
            self_: handle.self_,
            vtable: handle.vtable.cast(),
            _resource: PhantomData,
        }
    }
}

// SAFETY: `rmm::rs::resource_handle` (<rmm/cxx.hpp>) is a trivially copyable, standard-layout
// struct of two pointers (`void* self; const rmm_resource_vtable* vtable`), as this `#[repr(C)]`
// struct, and has no destructor (static_asserts there).
unsafe impl ::cxx::ExternType for ResourceHandle<'_> {
    type Id = ::cxx::type_id!("rmm::rs::resource_handle");
    type Kind = ::cxx::kind::Trivial;
}
