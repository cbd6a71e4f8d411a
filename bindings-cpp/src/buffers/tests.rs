//! The device buffer handle through its C functions: system memory and a simulated device (host
//! mode here), and, ignored on CPU, CUDA memory on created streams.

use std::ffi::{c_int, c_void};
use std::ptr::{null, null_mut};

use super::*;
use crate::tests::prelude::{
    rmm_cuda_memory_resource_new, rmm_get_current_device_resource, rmm_memcpy_async,
    rmm_resource_is_equal, rmm_resource_release, rmm_simulated_memory_resource_new,
    rmm_stream_create, rmm_stream_destroy, rmm_stream_synchronize, rmm_system_memory_resource_new,
    RMM_ERROR_INVALID_ARGUMENT, RMM_ERROR_NO_DEVICE, RMM_ERROR_NO_DRIVER, RMM_ERROR_OUT_OF_MEMORY,
    RMM_OK, RMM_STREAM_NON_BLOCKING,
};
use rmm_core::cuda;
use rmm_core::registry::process_registry_test_lock;
use rmm_core::testing::require_gpu;

const DEFAULT: *mut c_void = null_mut();
const PER_THREAD: *mut c_void = 2 as *mut c_void;

/// An owning resource handle released on drop.
struct Owned(rmm_resource);

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: we own this reference.
        unsafe { rmm_resource_release(self.0) }
    }
}

impl Owned {
    /// References held by others than this test (the buffers).
    fn others(&self) -> usize {
        // SAFETY: live handle; the new owner is dropped at once.
        unsafe { AnyResource::from_borrowed_handle(self.0) }
            .unwrap()
            .owner_count()
            - 2
    }
}

fn made(f: impl FnOnce(*mut rmm_resource, *mut rmm_error) -> c_int) -> Owned {
    let mut out = rmm_resource::NULL;
    let mut err = rmm_error::new();
    assert_eq!(f(&mut out, &mut err), RMM_OK, "{err:?}");
    Owned(out)
}

fn system() -> Owned {
    // SAFETY: valid out-pointers.
    made(|o, e| unsafe { rmm_system_memory_resource_new(o, e) })
}

fn simulated(capacity: u64) -> Owned {
    // SAFETY: valid out-pointers.
    made(|o, e| unsafe { rmm_simulated_memory_resource_new(capacity, o, e) })
}

/// An owning buffer freed on drop.
struct Buf(*mut rmm_device_buffer);

impl Drop for Buf {
    fn drop(&mut self) {
        // SAFETY: we own the buffer.
        unsafe { rmm_device_buffer_free(self.0) }
    }
}

impl Buf {
    fn size(&self) -> usize {
        // SAFETY: live buffer.
        unsafe { rmm_device_buffer_size(self.0) }
    }
    fn capacity(&self) -> usize {
        // SAFETY: live buffer.
        unsafe { rmm_device_buffer_capacity(self.0) }
    }
    fn data(&self) -> *mut c_void {
        // SAFETY: live buffer.
        unsafe { rmm_device_buffer_data(self.0) }
    }
    fn stream(&self) -> *mut c_void {
        // SAFETY: live buffer.
        unsafe { rmm_device_buffer_stream(self.0) }
    }
    /// The contents, copied out on the buffer's stream, which is then synchronized.
    fn contents(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.size()];
        let mut err = rmm_error::new();
        // SAFETY: the buffer holds `size` bytes; `out` is valid for them and outlives the sync.
        unsafe {
            assert_eq!(
                rmm_memcpy_async(
                    out.as_mut_ptr().cast(),
                    self.data(),
                    out.len(),
                    self.stream(),
                    &mut err
                ),
                RMM_OK,
                "{err:?}"
            );
            assert_eq!(
                rmm_stream_synchronize(self.stream(), &mut err),
                RMM_OK,
                "{err:?}"
            );
        }
        out
    }
    fn resize(&self, new_size: usize, stream: *mut c_void) {
        let mut err = rmm_error::new();
        // SAFETY: live buffer owned by the calling test; `stream` is a special handle.
        check(
            unsafe { rmm_device_buffer_resize(self.0, new_size, stream, &mut err) },
            &err,
        );
    }
    fn reserve(&self, new_capacity: usize, stream: *mut c_void) {
        let mut err = rmm_error::new();
        // SAFETY: as in `resize`.
        check(
            unsafe { rmm_device_buffer_reserve(self.0, new_capacity, stream, &mut err) },
            &err,
        );
    }
    fn shrink_to_fit(&self, stream: *mut c_void) {
        let mut err = rmm_error::new();
        // SAFETY: as in `resize`.
        check(
            unsafe { rmm_device_buffer_shrink_to_fit(self.0, stream, &mut err) },
            &err,
        );
    }
    fn set_stream(&self, stream: *mut c_void) {
        let mut err = rmm_error::new();
        // SAFETY: as in `resize`.
        check(
            unsafe { rmm_device_buffer_set_stream(self.0, stream, &mut err) },
            &err,
        );
    }
    fn resource(&self) -> Owned {
        // SAFETY: live buffer; valid out-pointers.
        made(|o, e| unsafe { rmm_device_buffer_memory_resource(self.0, o, e) })
    }
}

fn try_new(
    size: usize,
    alignment: usize,
    stream: *mut c_void,
    mr: rmm_resource,
) -> (c_int, rmm_error, *mut rmm_device_buffer) {
    let mut out = std::ptr::dangling_mut::<rmm_device_buffer>(); // must be overwritten with NULL on failure
    let mut err = rmm_error::new();
    // SAFETY: live or empty resource; valid out-pointers.
    let status = unsafe { rmm_device_buffer_new(size, alignment, stream, mr, &mut out, &mut err) };
    (status, err, out)
}

fn new(size: usize, alignment: usize, stream: *mut c_void, mr: rmm_resource) -> Buf {
    let (status, err, out) = try_new(size, alignment, stream, mr);
    assert_eq!(status, RMM_OK, "{err:?}");
    Buf(out)
}

fn new_copy(src: &[u8], alignment: usize, mr: rmm_resource) -> Buf {
    let mut out = null_mut();
    let mut err = rmm_error::new();
    // SAFETY: `src` is readable for its length; the copy is synchronized before `src` can go away.
    let status = unsafe {
        rmm_device_buffer_new_copy(
            src.as_ptr().cast(),
            src.len(),
            alignment,
            DEFAULT,
            mr,
            &mut out,
            &mut err,
        )
    };
    assert_eq!(status, RMM_OK, "{err:?}");
    let buf = Buf(out);
    assert_eq!(
        // SAFETY: the default stream.
        unsafe { rmm_stream_synchronize(DEFAULT, &mut err) },
        RMM_OK,
        "{err:?}"
    );
    buf
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 % 256) as u8).collect()
}

fn check(status: c_int, err: &rmm_error) {
    assert_eq!(status, RMM_OK, "{err:?}");
}

#[test]
fn new_reports_size_capacity_alignment_stream_device_and_resource() {
    let mr = system();
    let buf = new(1000, 4096, PER_THREAD, mr.0);
    assert_eq!((buf.size(), buf.capacity()), (1000, 1000));
    // SAFETY: live buffer.
    assert_eq!(unsafe { rmm_device_buffer_alignment(buf.0) }, 4096);
    assert_eq!(buf.data() as usize % 4096, 0);
    assert_eq!(buf.stream(), PER_THREAD);
    let mut device: c_int = 99;
    let mut err = rmm_error::new();
    // SAFETY: live buffer; valid out-pointers.
    check(
        unsafe { rmm_device_buffer_device(buf.0, &mut device, &mut err) },
        &err,
    );
    if cuda::is_host_mode() {
        assert_eq!(device, -1, "no device in host mode");
    } else {
        assert_eq!(device, cuda::current_device().unwrap());
    }
    let r = buf.resource();
    assert_eq!(r.0.self_, mr.0.self_, "the same resource, not a copy");
    // SAFETY: both live.
    assert_ne!(unsafe { rmm_resource_is_equal(r.0, mr.0) }, 0);
    // Size 0 allocates nothing.
    let empty = new(0, 256, DEFAULT, mr.0);
    assert!(empty.data().is_null());
    assert_eq!((empty.size(), empty.capacity()), (0, 0));
}

#[test]
fn the_buffer_holds_a_reference_to_its_resource_until_freed() {
    let mr = system();
    assert_eq!(mr.others(), 0);
    let a = new(64, 256, DEFAULT, mr.0);
    let b = new(64, 256, DEFAULT, mr.0);
    assert_eq!(mr.others(), 2);
    drop(a);
    assert_eq!(mr.others(), 1);
    let handle = mr.0;
    drop(mr);
    // The buffer alone keeps the resource alive: its memory can still be used and freed.
    let held = b.resource();
    assert_eq!(held.0.self_, handle.self_);
    let mut err = rmm_error::new();
    // SAFETY: `b` holds 64 writable bytes of host memory.
    check(
        unsafe { crate::tests::prelude::rmm_memset_async(b.data(), 3, 64, DEFAULT, &mut err) },
        &err,
    );
    assert_eq!(b.contents(), vec![3u8; 64]);
    drop(b);
    assert_eq!(held.others(), 0);
}

#[test]
fn the_empty_handle_means_the_current_device_resource() {
    let _lock = process_registry_test_lock();
    let buf = new(128, 256, DEFAULT, rmm_resource::NULL);
    let mut current = rmm_resource::NULL;
    let mut err = rmm_error::new();
    // SAFETY: valid out-pointers.
    check(
        unsafe { rmm_get_current_device_resource(&mut current, &mut err) },
        &err,
    );
    let current = Owned(current);
    assert_eq!(buf.resource().0.self_, current.0.self_);
    assert_eq!(buf.size(), 128);
}

#[test]
fn new_copy_and_deep_copy_hold_the_contents() {
    let mr = system();
    let data = pattern(3000);
    let a = new_copy(&data, 64, mr.0);
    assert_eq!(a.contents(), data);
    // SAFETY: live buffer.
    assert_eq!(unsafe { rmm_device_buffer_alignment(a.0) }, 64);

    let other = system();
    let mut out = null_mut();
    let mut err = rmm_error::new();
    // SAFETY: live buffer and resource; valid out-pointers.
    check(
        unsafe { rmm_device_buffer_copy(a.0, PER_THREAD, other.0, &mut out, &mut err) },
        &err,
    );
    let b = Buf(out);
    assert_ne!(a.data(), b.data());
    assert_eq!(b.stream(), PER_THREAD);
    assert_eq!(
        b.resource().0.self_,
        other.0.self_,
        "allocated from the given resource"
    );
    assert_eq!(
        // SAFETY: live buffer.
        unsafe { rmm_device_buffer_alignment(b.0) },
        64,
        "the alignment is kept"
    );
    assert_eq!(b.contents(), data);
    // A deep copy of an empty buffer is empty.
    let empty = new(0, 256, DEFAULT, mr.0);
    // SAFETY: as above.
    check(
        unsafe { rmm_device_buffer_copy(empty.0, DEFAULT, mr.0, &mut out, &mut err) },
        &err,
    );
    let c = Buf(out);
    assert_eq!((c.size(), c.data()), (0, null_mut()));
}

#[test]
fn resize_reserve_shrink_and_set_stream() {
    let mr = system();
    let data = pattern(100);
    let buf = new_copy(&data, 256, mr.0);
    let ptr = buf.data();
    buf.resize(40, DEFAULT);
    assert_eq!(
        (buf.size(), buf.capacity(), buf.data()),
        (40, 100, ptr),
        "in place"
    );
    buf.resize(90, DEFAULT);
    assert_eq!(
        (buf.size(), buf.capacity(), buf.data()),
        (90, 100, ptr),
        "back within the capacity"
    );
    buf.resize(500, PER_THREAD);
    assert_eq!((buf.size(), buf.capacity()), (500, 500), "reallocated");
    assert_eq!(buf.stream(), PER_THREAD, "resize takes the stream");
    assert_eq!(&buf.contents()[..90], &data[..90], "contents kept");
    buf.reserve(2000, DEFAULT);
    assert_eq!((buf.size(), buf.capacity()), (500, 2000));
    assert_eq!(buf.stream(), DEFAULT);
    buf.reserve(10, DEFAULT);
    assert_eq!(buf.capacity(), 2000, "reserve never shrinks");
    buf.resize(50, DEFAULT);
    buf.shrink_to_fit(DEFAULT);
    assert_eq!((buf.size(), buf.capacity()), (50, 50));
    assert_eq!(buf.contents(), &data[..50]);
    buf.set_stream(PER_THREAD);
    assert_eq!(buf.stream(), PER_THREAD);
    buf.resize(0, PER_THREAD);
    buf.shrink_to_fit(PER_THREAD);
    assert_eq!((buf.size(), buf.capacity(), buf.data()), (0, 0, null_mut()));
}

#[test]
fn bad_alignment_huge_sizes_and_null_pointers_are_errors() {
    let mr = system();
    let (status, err, out) = try_new(64, 100, DEFAULT, mr.0);
    assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT, "{err:?}");
    assert!(out.is_null(), "cleared on failure");
    let pib = 1usize << 50;
    let (status, err, out) = try_new(pib, 256, DEFAULT, mr.0);
    assert_eq!(status, RMM_ERROR_OUT_OF_MEMORY, "{err:?}");
    assert_eq!(err.bytes, pib as u64);
    assert!(out.is_null());
    assert_eq!(mr.others(), 0, "a failed buffer keeps no reference");

    let mut err = rmm_error::new();
    let mut out = null_mut();
    // SAFETY: every call below checks its NULL pointers before any use.
    unsafe {
        assert_eq!(
            rmm_device_buffer_new(8, 256, DEFAULT, mr.0, null_mut(), &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            rmm_device_buffer_new_copy(null(), 8, 256, DEFAULT, mr.0, &mut out, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(err.message().contains("null pointer"), "{err:?}");
        assert_eq!(
            rmm_device_buffer_copy(null(), DEFAULT, mr.0, &mut out, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(out.is_null());
        for status in [
            rmm_device_buffer_set_stream(null_mut(), DEFAULT, &mut err),
            rmm_device_buffer_reserve(null_mut(), 8, DEFAULT, &mut err),
            rmm_device_buffer_resize(null_mut(), 8, DEFAULT, &mut err),
            rmm_device_buffer_shrink_to_fit(null_mut(), DEFAULT, &mut err),
        ] {
            assert_eq!(status, RMM_ERROR_INVALID_ARGUMENT);
        }
        assert!(err.message().contains("must not be NULL"), "{err:?}");
        let mut r = rmm_resource::NULL;
        assert_eq!(
            rmm_device_buffer_memory_resource(null(), &mut r, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert!(r.is_null());
        let mut device = 0;
        assert_eq!(
            rmm_device_buffer_device(null(), &mut device, &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(rmm_device_buffer_data(null()), null_mut());
        assert_eq!(rmm_device_buffer_size(null()), 0);
        assert_eq!(rmm_device_buffer_capacity(null()), 0);
        assert_eq!(rmm_device_buffer_alignment(null()), 0);
        assert_eq!(rmm_device_buffer_stream(null()), null_mut());
        rmm_device_buffer_free(null_mut());
    }
    let buf = new(8, 256, DEFAULT, mr.0);
    // SAFETY: live buffer; NULL out-pointers are checked.
    unsafe {
        assert_eq!(
            rmm_device_buffer_memory_resource(buf.0, null_mut(), &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            rmm_device_buffer_device(buf.0, null_mut(), &mut err),
            RMM_ERROR_INVALID_ARGUMENT
        );
    }
}

#[test]
fn a_simulated_device_allocates_frees_and_resizes_in_place() {
    let sim = simulated(1 << 20);
    let buf = new(600 << 10, 256, DEFAULT, sim.0);
    assert!(!buf.data().is_null());
    let (status, err, _) = try_new(600 << 10, 256, DEFAULT, sim.0);
    assert_eq!(
        status, RMM_ERROR_OUT_OF_MEMORY,
        "the device is full: {err:?}"
    );
    let mut err = rmm_error::new();
    let ptr = buf.data();
    // SAFETY: live buffer; in-place resizes copy nothing.
    check(
        unsafe { rmm_device_buffer_resize(buf.0, 1000, DEFAULT, &mut err) },
        &err,
    );
    assert_eq!(
        (buf.size(), buf.capacity(), buf.data()),
        (1000, 600 << 10, ptr)
    );
    drop(buf);
    // Freed: the space is there again. An empty buffer grows without copying anything.
    let grown = new(0, 256, DEFAULT, sim.0);
    // SAFETY: live buffer; nothing to copy.
    check(
        unsafe { rmm_device_buffer_reserve(grown.0, 900 << 10, DEFAULT, &mut err) },
        &err,
    );
    assert_eq!((grown.size(), grown.capacity()), (0, 900 << 10));
    // SAFETY: as above.
    check(
        unsafe { rmm_device_buffer_shrink_to_fit(grown.0, DEFAULT, &mut err) },
        &err,
    );
    assert_eq!(grown.capacity(), 0);
    assert_eq!(sim.others(), 1);
    drop(grown);
    assert_eq!(sim.others(), 0);
}

#[test]
fn simulated_memory_is_never_copied_in_host_mode() {
    if !cuda::is_host_mode() {
        return; // with a GPU the copy would reach the driver with a fake address: not tried
    }
    let sim = simulated(1 << 20);
    let buf = new(256, 256, DEFAULT, sim.0);
    let mut err = rmm_error::new();
    // SAFETY: live buffer; the copy is refused before any access to the fake address.
    let status = unsafe { rmm_device_buffer_resize(buf.0, 4096, DEFAULT, &mut err) };
    assert!(
        status == RMM_ERROR_NO_DRIVER || status == RMM_ERROR_NO_DEVICE,
        "{err:?}"
    );
    assert!(err.message().contains("not host-accessible"), "{err:?}");
    assert_eq!(
        (buf.size(), buf.capacity()),
        (256, 256),
        "unchanged on failure"
    );
    let mut out = null_mut();
    // SAFETY: as above.
    let status = unsafe { rmm_device_buffer_copy(buf.0, DEFAULT, sim.0, &mut out, &mut err) };
    assert!(
        status == RMM_ERROR_NO_DRIVER || status == RMM_ERROR_NO_DEVICE,
        "{err:?}"
    );
    assert!(out.is_null());
    drop(buf);
    assert_eq!(
        sim.others(),
        0,
        "the failed copy released its allocation and reference"
    );
}

#[test]
fn buffers_are_made_and_freed_from_many_threads() {
    /// A borrowed handle handed to other threads (resources are thread-safe by the ABI's contract).
    #[derive(Clone, Copy)]
    struct Shared(rmm_resource);
    // SAFETY: the handle is only used while `mr` lives, and rmm resources may be used from any thread.
    unsafe impl Send for Shared {}
    let mr = system();
    let shared = Shared(mr.0);
    std::thread::scope(|s| {
        for t in 0..8usize {
            s.spawn(move || {
                let handle = { shared }.0;
                for i in 0..50usize {
                    let data = vec![(t * 50 + i) as u8; 1 + i * 37];
                    let buf = new_copy(&data, 256, handle);
                    let mut err = rmm_error::new();
                    // SAFETY: live buffer owned by this thread.
                    check(
                        unsafe {
                            rmm_device_buffer_resize(buf.0, data.len() * 2, DEFAULT, &mut err)
                        },
                        &err,
                    );
                    assert_eq!(&buf.contents()[..data.len()], &data[..]);
                }
            });
        }
    });
    assert_eq!(mr.others(), 0);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn cuda_buffers_on_created_streams() {
    require_gpu();
    // SAFETY: valid out-pointers.
    let mr = made(|o, e| unsafe { rmm_cuda_memory_resource_new(o, e) });
    let mut err = rmm_error::new();
    let mut stream = null_mut();
    // SAFETY: valid out-pointers.
    check(
        unsafe { rmm_stream_create(RMM_STREAM_NON_BLOCKING, &mut stream, &mut err) },
        &err,
    );
    let data = pattern(1 << 20);
    let mut out = null_mut();
    // SAFETY: `data` outlives the synchronization in `contents`; live stream and resource.
    check(
        unsafe {
            rmm_device_buffer_new_copy(
                data.as_ptr().cast(),
                data.len(),
                256,
                stream,
                mr.0,
                &mut out,
                &mut err,
            )
        },
        &err,
    );
    let buf = Buf(out);
    assert_eq!(buf.stream(), stream);
    assert_eq!(buf.contents(), data);
    // SAFETY: live buffer and stream.
    check(
        unsafe { rmm_device_buffer_resize(buf.0, 3 << 20, stream, &mut err) },
        &err,
    );
    assert_eq!(&buf.contents()[..1 << 20], &data[..]);
    // SAFETY: live buffer, stream and resource; valid out-pointers.
    check(
        unsafe { rmm_device_buffer_copy(buf.0, stream, mr.0, &mut out, &mut err) },
        &err,
    );
    let copy = Buf(out);
    assert_eq!(&copy.contents()[..1 << 20], &data[..]);
    let mut device = -1;
    // SAFETY: live buffer; valid out-pointers.
    check(
        unsafe { rmm_device_buffer_device(copy.0, &mut device, &mut err) },
        &err,
    );
    assert_eq!(device, cuda::current_device().unwrap());
    drop(copy);
    drop(buf);
    // SAFETY: the stream was created above; nothing uses it any more.
    check(unsafe { rmm_stream_destroy(stream, &mut err) }, &err);
}
