//! A Rust binary with its own copy of rmm-core shares the process's one registry once librmm_rs.so is
//! loaded: its registry calls route to librmm through the C ABI, and its resources cross without a
//! wrapper in either direction.
//!
//! One test function on purpose: the process registry is chosen at first use, so nothing may touch
//! it before librmm is loaded.

use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

use rmm_core::cuda::Stream;
use rmm_core::mr::kind::ResourceKind;
use rmm_core::registry;
use rmm_core::registry::owner::{self, find_loaded_owner};
use rmm_core::resource::handle::owner_tag;
use rmm_core::resource::status::RMM_OK;
use rmm_core::resource::{rmm_error, rmm_resource, ForeignResource};
use rmm_core::{Access, AnyResource, MemoryResource, Result};

/// Host memory that claims host and device access (accepted in host and GPU mode) and counts.
struct Counting(AtomicUsize);

impl MemoryResource for Counting {
    fn allocate(&self, stream: Stream, bytes: usize, alignment: usize) -> Result<*mut u8> {
        self.0.fetch_add(1, Ordering::SeqCst);
        rmm_core::mr::SystemMemoryResource::new().allocate(stream, bytes, alignment)
    }
    unsafe fn deallocate(
        &self,
        stream: Stream,
        ptr: *mut u8,
        bytes: usize,
        alignment: usize,
    ) -> Result<()> {
        // SAFETY: forwarded; allocated by the system resource above.
        unsafe {
            rmm_core::mr::SystemMemoryResource::new().deallocate(stream, ptr, bytes, alignment)
        }
    }
    fn access(&self) -> Access {
        Access::HOST_DEVICE
    }
    fn name(&self) -> &str {
        "counting"
    }
    fn is_equal(&self, other: &dyn MemoryResource) -> bool {
        std::ptr::addr_eq(self, other)
    }
}

/// Builds librmm_rs.so for this test: `cargo test` builds only the rlib of this crate, not its
/// cdylib. A separate target folder keeps the nested cargo clear of the outer one's lock.
/// `RMM_LIBRMM_PATH` names a prebuilt one instead (the GPU machine has no cargo).
fn build_librmm() -> std::path::PathBuf {
    if let Some(prebuilt) = std::env::var_os("RMM_LIBRMM_PATH") {
        let path = std::path::PathBuf::from(prebuilt);
        assert!(
            path.exists(),
            "RMM_LIBRMM_PATH={} does not exist",
            path.display()
        );
        return path;
    }
    let manifest_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let target_dir = manifest_dir.join("../target/librmm-for-tests");
    let status = std::process::Command::new(env!("CARGO"))
        .args(["build", "--quiet", "-p", "rmm-cpp", "--lib", "--target-dir"])
        .arg(&target_dir)
        .current_dir(manifest_dir)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo build -p rmm-cpp failed");
    let lib_path = target_dir.join("debug/librmm_rs.so");
    assert!(lib_path.exists(), "{} was not built", lib_path.display());
    lib_path
}

type GetCurrent = unsafe extern "C" fn(*mut rmm_resource, *mut rmm_error) -> c_int;
type Release = unsafe extern "C" fn(rmm_resource);

#[test]
fn registry_calls_route_to_the_loaded_librmm() {
    let lib_path = build_librmm();
    assert!(find_loaded_owner().is_none(), "not loaded yet");

    let c_path = CString::new(lib_path.to_str().unwrap()).unwrap();
    // SAFETY: loading librmm runs no initialisers that matter; RTLD_LOCAL as Python would load it.
    let lib = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!lib.is_null(), "dlopen failed");

    // Found by SONAME although it was loaded RTLD_LOCAL, and recognised as another binary.
    let table = find_loaded_owner().expect("the loaded librmm is found");
    assert!(!table.is_local());
    assert_ne!(table.owner, owner_tag());
    assert!(
        registry::routes_to_owner(),
        "first registry use after loading picks librmm"
    );

    // librmm's own entry points, to look at its registry directly.
    // SAFETY: symbols of rmm_c.h with these signatures.
    let (get_current, release): (GetCurrent, Release) = unsafe {
        let sym = |name: &str| {
            let name = CString::new(name).unwrap();
            let p = libc::dlsym(lib, name.as_ptr());
            assert!(!p.is_null());
            p
        };
        (
            std::mem::transmute::<*mut c_void, GetCurrent>(sym("rmm_get_current_device_resource")),
            std::mem::transmute::<*mut c_void, Release>(sym("rmm_resource_release")),
        )
    };

    // The initial resource is librmm's, seen here as a foreign resource that works.
    let initial = registry::current_resource().unwrap();
    assert!(initial.downcast_ref::<ForeignResource>().is_some());
    let expected = if rmm_core::cuda::is_host_mode() {
        "system_memory_resource"
    } else {
        "cuda_memory_resource"
    };
    assert_eq!(initial.name(), expected);
    if rmm_core::cuda::is_host_mode() {
        let p = initial.allocate(Stream::DEFAULT, 64, 64).unwrap();
        // SAFETY: 64 host bytes from `initial`.
        unsafe {
            std::ptr::write_bytes(p, 1, 64);
            initial.deallocate(Stream::DEFAULT, p, 64, 64).unwrap();
        }
    }

    // Our resource goes into librmm's registry as a handle (librmm holds a reference)...
    let mine = AnyResource::new(Counting(AtomicUsize::new(0)));
    let previous = registry::set_current_resource(mine.clone()).unwrap();
    assert!(previous.ptr_eq(&initial) || previous == initial);
    assert_eq!(mine.owner_count(), 2, "ours and librmm's");
    let mut h = rmm_resource::NULL;
    let mut err = rmm_error::new();
    // SAFETY: valid out-pointers; the owning handle is released below.
    unsafe {
        assert_eq!(get_current(&mut h, &mut err), RMM_OK);
        assert_eq!(
            h,
            mine.borrow_handle(),
            "librmm stores our handle itself, no wrapper"
        );
        release(h);
    }
    // ...and comes back from it as the same Arc.
    let back = registry::current_resource().unwrap();
    assert!(back.ptr_eq(&mine));
    let p = back.allocate(Stream::DEFAULT, 32, 32).unwrap();
    // SAFETY: from `back` with these arguments.
    unsafe { back.deallocate(Stream::DEFAULT, p, 32, 32).unwrap() };
    assert_eq!(
        mine.downcast_ref::<Counting>()
            .unwrap()
            .0
            .load(Ordering::SeqCst),
        1
    );
    drop(back);

    // Errors cross as values.
    let err = registry::per_device_resource(4096).unwrap_err();
    assert!(matches!(err, rmm_core::Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("4096"), "{err}");

    assert!(registry::reset_current_resource().unwrap().ptr_eq(&mine));
    assert_eq!(mine.owner_count(), 1, "librmm gave its reference back");

    // A statistics adaptor that librmm made is recognised by asking librmm, not by its name, and
    // its counters and upstream are read through librmm.
    type New = unsafe extern "C" fn(*mut rmm_resource, *mut rmm_error) -> c_int;
    type Adapt = unsafe extern "C" fn(rmm_resource, *mut rmm_resource, *mut rmm_error) -> c_int;
    // SAFETY: symbols of rmm_c.h with these signatures; owning handles adopted by AnyResource.
    let (system, stats) = unsafe {
        let sym = |name: &std::ffi::CStr| {
            let p = libc::dlsym(lib, name.as_ptr());
            assert!(!p.is_null());
            p
        };
        let new_system =
            std::mem::transmute::<*mut c_void, New>(sym(c"rmm_system_memory_resource_new"));
        let new_stats =
            std::mem::transmute::<*mut c_void, Adapt>(sym(c"rmm_statistics_resource_adaptor_new"));
        let (mut h, mut s, mut err) = (rmm_resource::NULL, rmm_resource::NULL, rmm_error::new());
        assert_eq!(new_system(&mut h, &mut err), RMM_OK);
        assert_eq!(new_stats(h, &mut s, &mut err), RMM_OK);
        (
            AnyResource::try_from_handle(h).unwrap(),
            AnyResource::try_from_handle(s).unwrap(),
        )
    };
    assert!(stats.downcast_ref::<ForeignResource>().is_some());
    assert_eq!(owner::resource_kind(&stats), Some(ResourceKind::Statistics));
    assert_eq!(owner::resource_kind(&system), Some(ResourceKind::System));
    let upstream = owner::resource_upstream(&stats).expect("librmm names the upstream");
    assert_eq!(
        upstream, system,
        "the upstream comes back as the same librmm resource"
    );
    let p = stats.allocate(Stream::DEFAULT, 128, 64).unwrap();
    assert_eq!(owner::statistics_counters(&stats).unwrap().0.value, 128);
    // SAFETY: from `stats` with these arguments.
    unsafe { stats.deallocate(Stream::DEFAULT, p, 128, 64).unwrap() };
    assert_eq!(owner::push_counters(&stats).unwrap().0.peak, 128);
    assert_eq!(owner::pop_counters(&stats).unwrap().0.value, 0);
    assert!(owner::pool_size(&stats).is_err(), "not a pool");
    // A resource of this binary is answered here.
    assert_eq!(owner::resource_kind(&mine), Some(ResourceKind::Other));

    // The memory timeline is librmm's too: this copy's start/snapshot/stop go to librmm's recorder,
    // which wraps the process's current resource and records what this binary allocates from it.
    use rmm_core::registry::recording;
    recording::start_recording(&rmm_core::timeline::Options {
        clear: true,
        ..Default::default()
    })
    .unwrap();
    assert!(recording::is_recording());
    assert!(
        !rmm_core::timeline::is_recording(),
        "this copy's own recorder stays off"
    );
    let current = registry::current_resource().unwrap();
    assert_eq!(
        owner::resource_kind(&current),
        Some(ResourceKind::Recording)
    );
    let p = current.allocate(Stream::DEFAULT, 3333, 256).unwrap();
    let snapshot = recording::snapshot().unwrap();
    assert!(snapshot
        .segments
        .iter()
        .any(|s| s.address == p as u64 && s.total_size == 3333));
    // SAFETY: from `current` with these arguments.
    unsafe { current.deallocate(Stream::DEFAULT, p, 3333, 256).unwrap() };
    recording::stop_recording().unwrap();
    assert!(!recording::is_recording());
    assert_ne!(
        owner::resource_kind(&registry::current_resource().unwrap()),
        Some(ResourceKind::Recording)
    );
}
