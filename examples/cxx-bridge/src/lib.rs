//! A Rust crate with its own `#[cxx::bridge]` that passes `rmm` resources to a small C++ library
//! taking `rmm::device_async_resource_ref` (`include/scale.hpp`, `src/scale.cpp`), through the
//! `rmm` crate's `cxx` feature (`rmm::cxx::ResourceHandle`, `<rmm/cxx.hpp>`), and moves buffers
//! between the library's `std::unique_ptr<rmm::device_buffer>` and the Rust `rmm::DeviceBuffer`
//! (`rmm::cxx::CxxDeviceBuffer`, `<rmm/cxx_device_buffer.hpp>`).
//!
//! `rmm::device_buffer` calls librmm's C ABI, so this crate links librmm: the `rmm-c-abi` crate
//! (librmm's sources as an rlib, `bindings-cpp/rlib`), which brings its entry points into the binary
//! with no shared library to find at build or run time. Rust and C++ then share one copy of the core
//! and one registry.
//!
//! build.rs compiles the C++ half with cxx-build against `bindings-cpp/include` and the CCCL
//! headers (`RMM_CCCL_INCLUDE_DIRS`, else the ones ci/cpp.sh fetches into `build/cccl`, fetched here
//! if missing). When no CCCL headers can be had, the bridge is left out (cfg `rmm_no_cccl`) and
//! [`CCCL_MISSING`] says why; the tests then report that instead of passing silently.

/// Why the bridge was left out of this build, or `None` when it is in.
pub const CCCL_MISSING: Option<&str> = if cfg!(rmm_no_cccl) {
    Some("no CCCL headers: set RMM_CCCL_INCLUDE_DIRS or run bindings-cpp/cmake/fetch-cccl.sh build/cccl")
} else {
    None
};

// Links librmm's C ABI (see the crate docs): rustc drops a dependency nothing names.
#[cfg(not(rmm_no_cccl))]
use rmm_c_abi as _;

#[cfg(not(rmm_no_cccl))]
#[cxx::bridge(namespace = "example")]
pub mod ffi {
    unsafe extern "C++" {
        include!("rmm-example-cxx/include/scale.hpp");

        #[namespace = "rmm::rs"]
        type resource_handle<'a> = rmm::cxx::ResourceHandle<'a>;

        /// Allocates and frees `count` blocks of `bytes` through `mr` in C++ (see scale.hpp).
        fn churn_through<'a>(
            mr: resource_handle<'a>,
            count: usize,
            bytes: usize,
            host_accessible: bool,
        ) -> Result<usize>;

        /// The resource's name, read by C++.
        fn resource_name<'a>(mr: resource_handle<'a>) -> String;

        /// CCCL's resource_ref equality of two handles.
        fn same_resource<'a, 'b>(a: resource_handle<'a>, b: resource_handle<'b>) -> bool;

        #[namespace = "rmm"]
        type device_buffer = rmm::cxx::CxxDeviceBuffer;

        /// A C++ buffer holding `bytes`, from the Rust resource behind `mr` (see scale.hpp).
        fn make_buffer<'a>(
            mr: resource_handle<'a>,
            bytes: &[u8],
        ) -> Result<UniquePtr<device_buffer>>;

        /// Takes the buffer: the sum of its bytes when host-accessible, else its size; frees it.
        fn consume_buffer(buf: UniquePtr<device_buffer>, host_accessible: bool) -> Result<u64>;

        /// The buffer's data pointer as an address.
        fn buffer_address(buf: &device_buffer) -> usize;

        /// The buffer's size in bytes.
        fn buffer_size(buf: &device_buffer) -> usize;
    }
}
