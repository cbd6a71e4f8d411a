//! A Rust crate with its own `#[cxx::bridge]` that passes `rmm` resources to a small C++ library
//! taking `rmm::device_async_resource_ref` (`include/scale.hpp`, `src/scale.cpp`), through the
//! `rmm` crate's `cxx` feature (`rmm::cxx::ResourceHandle`, `<rmm/cxx.hpp>`).
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

#[cfg(not(rmm_no_cccl))]
#[cxx::bridge(namespace = "example")]
pub mod ffi {
    unsafe extern "C++" {
        include!("rmm-example-cxx/include/scale.hpp");

        #[namespace = "rmm::rs"]
        type resource_handle<'a> = rmm::cxx::ResourceHandle<'a>;

        /// Allocates and frees `count` blocks of `bytes` through `mr` in C++ (see scale.hpp).
        fn churn_through<'a>(mr: resource_handle<'a>, count: usize, bytes: usize, host_accessible: bool)
            -> Result<usize>;

        /// The resource's name, read by C++.
        fn resource_name<'a>(mr: resource_handle<'a>) -> String;

        /// CCCL's resource_ref equality of two handles.
        fn same_resource<'a, 'b>(a: resource_handle<'a>, b: resource_handle<'b>) -> bool;
    }
}
