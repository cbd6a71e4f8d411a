//! librmm's C ABI (`rmm_c.h`) driven by bytes, through its own entry points: resources made and
//! stacked by handle, reference counts, allocations and frees (valid, and invalid ones that must be
//! `RMM_ERROR_INVALID_ARGUMENT`), device buffers moved through exports that may be tampered with
//! (a tampered export is refused and not consumed, or adopted unchanged), views made from parts and
//! from DLPack tensors given as bytes, and handles used right after their last release. No call
//! may crash, panic across the ABI or return anything but its documented codes; at the end the
//! statistics adaptor at the bottom of every stack has everything back.
//!
//! Every stack is its own chain over the shared bottom (`statistics(system)`): the adaptors' upstream
//! pool is theirs alone, so a double free through an adaptor cannot name memory its upstream has
//! since handed to another client (that would be a co-owner's free, which adaptors forward:
//! docs/design/checked-frees.md).
#![no_main]

use std::ffi::{c_char, c_int, c_void};

use libfuzzer_sys::fuzz_target;
use rmm_core::export::rmm_buffer_export;
use rmm_core::resource::{rmm_error, rmm_resource};
use rmm_core::view::dlpack::DLPackVersion;
use rmm_core::view::{rmm_strided_view, DLDataType, DLDevice, DLManagedTensorVersioned, DLTensor};
use rmm_c_abi as _;

const OK: c_int = 0;
const OUT_OF_MEMORY: c_int = 1;
const INVALID: c_int = 3;
const UNSUPPORTED: c_int = 6;
const NONE: u64 = u64::MAX;

#[repr(C)]
#[derive(Default, Debug)]
struct Counter {
    value: i64,
    peak: i64,
    total: i64,
}

type DeviceBuffer = c_void;

extern "C" {
    fn rmm_system_memory_resource_new(out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    fn rmm_statistics_resource_adaptor_new(up: rmm_resource, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    fn rmm_statistics_resource_adaptor_get_bytes_counter(r: rmm_resource, out: *mut Counter, err: *mut rmm_error) -> c_int;
    fn rmm_pool_memory_resource_new(up: rmm_resource, initial: u64, maximum: u64, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    fn rmm_arena_memory_resource_new(up: rmm_resource, size: u64, dump: c_int, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    fn rmm_fixed_size_memory_resource_new(up: rmm_resource, block: u64, prealloc: u64, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    fn rmm_binning_memory_resource_new_with_exponents(up: rmm_resource, min: c_int, max: c_int, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    fn rmm_tracking_resource_adaptor_new(up: rmm_resource, stacks: c_int, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    fn rmm_limiting_resource_adaptor_new(up: rmm_resource, limit: u64, alignment: u64, out: *mut rmm_resource, err: *mut rmm_error) -> c_int;
    fn rmm_resource_retain(r: rmm_resource);
    fn rmm_resource_release(r: rmm_resource);
    fn rmm_resource_release_checked(r: rmm_resource, err: *mut rmm_error) -> c_int;
    fn rmm_resource_allocate(r: rmm_resource, stream: *mut c_void, bytes: usize, alignment: usize, out: *mut *mut c_void, err: *mut rmm_error) -> c_int;
    fn rmm_resource_deallocate(r: rmm_resource, stream: *mut c_void, p: *mut c_void, bytes: usize, alignment: usize, err: *mut rmm_error) -> c_int;
    fn rmm_device_buffer_new(size: usize, alignment: usize, stream: *mut c_void, r: rmm_resource, out: *mut *mut DeviceBuffer, err: *mut rmm_error) -> c_int;
    fn rmm_device_buffer_resize(b: *mut DeviceBuffer, size: usize, stream: *mut c_void, err: *mut rmm_error) -> c_int;
    fn rmm_device_buffer_size(b: *const DeviceBuffer) -> usize;
    fn rmm_device_buffer_data(b: *const DeviceBuffer) -> *mut c_void;
    fn rmm_device_buffer_free_checked(b: *mut DeviceBuffer, err: *mut rmm_error) -> c_int;
    fn rmm_device_buffer_export(b: *mut DeviceBuffer, out: *mut *mut rmm_buffer_export, err: *mut rmm_error) -> c_int;
    fn rmm_device_buffer_import(e: *mut rmm_buffer_export, out: *mut *mut DeviceBuffer, err: *mut rmm_error) -> c_int;
    fn rmm_buffer_export_free(e: *mut rmm_buffer_export);
    fn rmm_strided_view_from_parts(data: *const c_void, ndim: c_int, shape: *const i64, strides: *const i64, format: *const c_char,
        device_type: c_int, device_id: c_int, readonly: bool, out: *mut rmm_strided_view, err: *mut rmm_error) -> c_int;
    fn rmm_strided_view_from_dlpack_versioned(t: *mut DLManagedTensorVersioned, out: *mut rmm_strided_view, err: *mut rmm_error) -> c_int;
    fn rmm_strided_view_release(v: *mut rmm_strided_view, err: *mut rmm_error) -> c_int;
    fn rmm_strided_view_contiguity(v: *const rmm_strided_view, c: *mut bool, f: *mut bool, err: *mut rmm_error) -> c_int;
    fn rmm_strided_view_to_dlpack_versioned(v: *const rmm_strided_view, out: *mut *mut DLManagedTensorVersioned, err: *mut rmm_error) -> c_int;
}

/// Reads the input a few bytes at a time (zeros past its end).
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(std::array::from_fn(|_| self.u8()))
    }
    /// Mostly small numbers, sometimes any 64 bits.
    fn i64(&mut self) -> i64 {
        match self.u8() % 4 {
            0 => self.u64() as i64,
            1 => -i64::from(self.u8() % 8),
            _ => i64::from(self.u8() % 16),
        }
    }
}

/// A stack of resources over the bottom, and what was allocated through its top handle.
struct Stack {
    top: rmm_resource,
    /// Extra references taken by `retain` (the first one is released at the end).
    extra: u32,
    live: Vec<(usize, usize, usize)>,
    freed: Vec<(usize, usize, usize)>,
    /// Refuses alignments above 256 (the arena).
    max_alignment: usize,
    /// A fixed-size resource's block: larger requests are refused.
    block: Option<usize>,
}

fn check(rc: c_int, allowed: &[c_int], what: &str, err: &rmm_error) {
    assert!(allowed.contains(&rc), "{what}: status {rc} ({})", err.message());
}

/// A new stack of kind `k` over `bottom`; `None` when its parameters are refused.
fn new_stack(b: &mut Bytes<'_>, bottom: rmm_resource) -> Option<Stack> {
    let mut err = rmm_error::new();
    let mut out = rmm_resource::NULL;
    let mut pool = rmm_resource::NULL;
    let kind = b.u8() % 7;
    let mut max_alignment = usize::MAX;
    let mut block = None;
    // SAFETY: live handles, valid out-pointers; every call is checked.
    let rc = unsafe {
        match kind {
            0..=3 => {
                let initial = 256 * u64::from(b.u8()) * 64;
                let maximum = if b.u8() % 2 == 0 { NONE } else { initial.max(256) * 4 };
                let rc = rmm_pool_memory_resource_new(bottom, initial, maximum, &mut pool, &mut err);
                check(rc, &[OK, INVALID, OUT_OF_MEMORY], "pool_new", &err);
                if rc != OK {
                    return None;
                }
                let rc = match kind {
                    0 => {
                        std::mem::swap(&mut out, &mut pool);
                        OK
                    }
                    1 => rmm_statistics_resource_adaptor_new(pool, &mut out, &mut err),
                    2 => rmm_tracking_resource_adaptor_new(pool, c_int::from(b.u8() % 4 == 0), &mut out, &mut err),
                    _ => rmm_limiting_resource_adaptor_new(pool, u64::from(b.u8()) << 16, 256, &mut out, &mut err),
                };
                // The adaptor holds its own reference of the pool.
                rmm_resource_release(pool);
                rc
            }
            4 => {
                max_alignment = 256;
                rmm_arena_memory_resource_new(bottom, (u64::from(b.u8() % 16) + 1) << 20, 0, &mut out, &mut err)
            }
            5 => {
                let size = 256usize << (b.u8() % 8);
                block = Some(size);
                rmm_fixed_size_memory_resource_new(bottom, size as u64, u64::from(b.u8() % 16), &mut out, &mut err)
            }
            _ => rmm_binning_memory_resource_new_with_exponents(bottom, 8 + c_int::from(b.u8() % 4), 12 + c_int::from(b.u8() % 8), &mut out, &mut err),
        }
    };
    check(rc, &[OK, INVALID, OUT_OF_MEMORY], "a resource", &err);
    (rc == OK).then_some(Stack { top: out, extra: 0, live: Vec::new(), freed: Vec::new(), max_alignment, block })
}

/// A view from parts given as bytes: acquired and released, or refused with a typed error.
fn view_from_parts(b: &mut Bytes<'_>, host: &[u8]) {
    const FORMATS: [&[u8]; 8] = [b"<f8\0", b"<i4\0", b"|u1\0", b"<f2\0", b"<c16\0", b"?\0", b"<f3\0", b"\xff\0"];
    let ndim = c_int::from(b.u8() % 70) - 2;
    let n = usize::try_from(ndim).unwrap_or(0);
    let shape: Vec<i64> = (0..n).map(|_| b.i64()).collect();
    let strides: Vec<i64> = (0..n).map(|_| b.i64()).collect();
    let format = FORMATS[usize::from(b.u8()) % FORMATS.len()];
    let data = match b.u8() % 4 {
        0 => std::ptr::null(),
        1 => host.as_ptr(),
        2 => (usize::MAX - usize::from(b.u8())) as *const u8,
        _ => b.u64() as usize as *const u8,
    };
    let (device_type, device_id) = (c_int::from(b.u8() % 20), c_int::from(b.u8() as i8));
    let mut view = rmm_strided_view::EMPTY;
    let mut err = rmm_error::new();
    // SAFETY: the arrays hold `ndim` items when ndim > 0 (NULL shape otherwise); `format` ends with NUL.
    let rc = unsafe {
        rmm_strided_view_from_parts(
            data.cast(),
            ndim,
            if n == 0 { std::ptr::null() } else { shape.as_ptr() },
            if b.u8() % 3 == 0 || n == 0 { std::ptr::null() } else { strides.as_ptr() },
            format.as_ptr().cast(),
            device_type,
            device_id,
            b.u8() % 2 == 0,
            &mut view,
            &mut err,
        )
    };
    check(rc, &[OK, INVALID, UNSUPPORTED], "view_from_parts", &err);
    if rc == OK {
        finish_view(&mut view);
    } else {
        assert_eq!(view.generation, 0, "a refused view is left released");
    }
}

/// Uses an acquired view, exports it, releases it, and checks a second release is refused.
fn finish_view(view: &mut rmm_strided_view) {
    let mut err = rmm_error::new();
    let (mut c, mut f) = (false, false);
    // SAFETY: an acquired view and valid out-pointers.
    unsafe {
        check(rmm_strided_view_contiguity(view, &mut c, &mut f, &mut err), &[OK], "contiguity", &err);
        let mut t = std::ptr::null_mut();
        check(rmm_strided_view_to_dlpack_versioned(view, &mut t, &mut err), &[OK], "to_dlpack", &err);
        check(rmm_strided_view_release(view, &mut err), &[OK], "release", &err);
        // The export keeps the producer alive on its own; its deleter ends it.
        ((*t).deleter.expect("our exports have a deleter"))(t);
        check(rmm_strided_view_release(view, &mut err), &[INVALID], "a second release", &err);
    }
}

/// The producer's arrays of a tensor made from bytes, freed by its deleter.
struct Arrays(Vec<i64>, Vec<i64>);

unsafe extern "C" fn delete_tensor(t: *mut DLManagedTensorVersioned) {
    // SAFETY: made in `view_from_dlpack` with Box::into_raw, deleted once.
    unsafe {
        let t = Box::from_raw(t);
        drop(Box::from_raw(t.manager_ctx.cast::<Arrays>()));
    }
}

/// A DLPack tensor given as bytes, through the C entry point: acquired (the view owns it) or
/// refused (it stays ours, and we delete it).
fn view_from_dlpack(b: &mut Bytes<'_>) {
    let ndim = i32::from(b.u8() % 70) - 2;
    let n = usize::try_from(ndim).unwrap_or(0);
    let mut arrays = Box::new(Arrays((0..n).map(|_| b.i64()).collect(), (0..n).map(|_| b.i64()).collect()));
    let dl_tensor = DLTensor {
        data: match b.u8() % 3 {
            0 => std::ptr::null_mut(),
            1 => (usize::MAX - usize::from(b.u8())) as *mut c_void,
            _ => (b.u64() as usize & !0xFF) as *mut c_void,
        },
        device: DLDevice { device_type: i32::from(b.u8() % 20), device_id: i32::from(b.u8() as i8) },
        ndim,
        dtype: DLDataType { code: b.u8() % 20, bits: b.u8(), lanes: u16::from(b.u8() % 3) },
        shape: if n == 0 { std::ptr::null_mut() } else { arrays.0.as_mut_ptr() },
        strides: if n == 0 || b.u8() % 3 == 0 { std::ptr::null_mut() } else { arrays.1.as_mut_ptr() },
        byte_offset: if b.u8() % 2 == 0 { u64::from(b.u8()) } else { b.u64() },
    };
    let t = Box::into_raw(Box::new(DLManagedTensorVersioned {
        version: DLPackVersion { major: 1 + u32::from(b.u8() % 8 == 0), minor: 1 },
        manager_ctx: Box::into_raw(arrays).cast(),
        deleter: Some(delete_tensor),
        flags: u64::from(b.u8() % 8),
        dl_tensor,
    }));
    let mut view = rmm_strided_view::EMPTY;
    let mut err = rmm_error::new();
    // SAFETY: a live tensor, its arrays hold `ndim` items; on failure it stays ours.
    let rc = unsafe { rmm_strided_view_from_dlpack_versioned(t, &mut view, &mut err) };
    check(rc, &[OK, INVALID, UNSUPPORTED], "view_from_dlpack", &err);
    if rc == OK {
        finish_view(&mut view);
    } else {
        // SAFETY: refused, so still ours.
        unsafe { delete_tensor(t) };
    }
}

/// A buffer moved through an export whose fields the bytes may change: a tampered export that
/// cannot describe the buffer is refused (and freed by us), one that can is adopted.
fn buffer_through_export(b: &mut Bytes<'_>, s: &Stack) {
    let mut err = rmm_error::new();
    let mut buf = std::ptr::null_mut();
    let size = usize::from(b.u8()) << (b.u8() % 12);
    // SAFETY: a live handle and valid out-pointers throughout; every buffer is freed once.
    unsafe {
        // A fixed-size resource refuses what does not fit its block (INVALID_ARGUMENT).
        let rc = rmm_device_buffer_new(size, 256, std::ptr::null_mut(), s.top, &mut buf, &mut err);
        check(rc, &[OK, OUT_OF_MEMORY, INVALID], "buffer_new", &err);
        if rc != OK {
            return;
        }
        let rc = rmm_device_buffer_resize(buf, size / 2 + usize::from(b.u8()), std::ptr::null_mut(), &mut err);
        check(rc, &[OK, OUT_OF_MEMORY, INVALID], "resize", &err);
        let (data, size) = (rmm_device_buffer_data(buf) as usize, rmm_device_buffer_size(buf));
        let mut export = std::ptr::null_mut();
        check(rmm_device_buffer_export(buf, &mut export, &mut err), &[OK], "export", &err);
        let e = &mut *export;
        let original = (e.data as usize, e.size, e.capacity, e.version);
        match b.u8() % 6 {
            0 => e.capacity += 256 * (1 + usize::from(b.u8())),
            // Not onto another live allocation of the stack: one whose rounded size matches is
            // indistinguishable from a genuine export of it (the check is against the live set).
            1 if e.capacity > 0 && !s.live.iter().any(|&(p, ..)| p == e.data as usize + 256) => {
                e.data = e.data.wrapping_byte_add(256)
            }
            2 => e.version = u32::from(b.u8()),
            3 => e.size = e.capacity + 1,
            4 => e.size = e.size.min(usize::from(b.u8())),
            _ => {}
        }
        let tampered = (e.data as usize, e.capacity, e.version) != (original.0, original.2, original.3) || e.size > e.capacity;
        let mut adopted = std::ptr::null_mut();
        let rc = rmm_device_buffer_import(export, &mut adopted, &mut err);
        if tampered {
            check(rc, &[INVALID], "a tampered export", &err);
            // Not consumed: put the original back, so that its deleter frees what was allocated.
            let e = &mut *export;
            (e.data, e.size, e.capacity, e.version) = (original.0 as *mut c_void, original.1, original.2, original.3);
            rmm_buffer_export_free(export);
        } else {
            check(rc, &[OK], "an export", &err);
            assert_eq!(rmm_device_buffer_data(adopted) as usize, data, "no copy");
            assert!(rmm_device_buffer_size(adopted) <= size);
            check(rmm_device_buffer_free_checked(adopted, &mut err), &[OK], "free", &err);
            check(rmm_device_buffer_free_checked(adopted, &mut err), &[INVALID], "a second free", &err);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let mut err = rmm_error::new();
    let (mut system, mut bottom) = (rmm_resource::NULL, rmm_resource::NULL);
    // SAFETY: valid out-pointers.
    unsafe {
        check(rmm_system_memory_resource_new(&mut system, &mut err), &[OK], "system", &err);
        check(rmm_statistics_resource_adaptor_new(system, &mut bottom, &mut err), &[OK], "bottom", &err);
        rmm_resource_release(system);
    }
    let host = [0u8; 256];
    let mut stacks: Vec<Stack> = Vec::new();
    let mut steps = 0;
    while !b.0.is_empty() && steps < 256 {
        steps += 1;
        let op = b.u8() % 10;
        if op == 0 || stacks.is_empty() {
            if stacks.len() < 8 {
                stacks.extend(new_stack(&mut b, bottom));
            }
            continue;
        }
        let i = usize::from(b.u8()) % stacks.len();
        let s = &mut stacks[i];
        // SAFETY: live handles; pointers freed only with the arguments they were allocated with,
        // except the deliberately invalid frees below, which a checked stack refuses untouched.
        unsafe {
            match op {
                1 => {
                    rmm_resource_retain(s.top);
                    s.extra += 1;
                }
                2 if s.extra > 0 => {
                    check(rmm_resource_release_checked(s.top, &mut err), &[OK], "release", &err);
                    s.extra -= 1;
                }
                3 | 4 => {
                    let bytes = 1 + (usize::from(b.u8()) << (b.u8() % 16));
                    let alignment = 1usize << (b.u8() % 10);
                    let mut p = std::ptr::null_mut();
                    let rc = rmm_resource_allocate(s.top, std::ptr::null_mut(), bytes, alignment, &mut p, &mut err);
                    // Larger than a fixed-size block: out of memory (as RMM), or invalid when only
                    // the alignment's padding does not fit.
                    let too_big = s.block.is_some_and(|block| bytes + alignment.saturating_sub(256) > block);
                    if alignment > s.max_alignment {
                        check(rc, &[INVALID], "a refused alignment", &err);
                    } else if too_big {
                        check(rc, &[INVALID, OUT_OF_MEMORY], "a request larger than the block", &err);
                    } else {
                        check(rc, &[OK, OUT_OF_MEMORY], "allocate", &err);
                    }
                    if rc == OK {
                        s.live.push((p as usize, bytes, alignment));
                    }
                }
                5 if !s.live.is_empty() => {
                    let (p, n, a) = s.live.swap_remove(usize::from(b.u8()) % s.live.len());
                    check(rmm_resource_deallocate(s.top, std::ptr::null_mut(), p as *mut c_void, n, a, &mut err), &[OK], "free", &err);
                    s.freed.push((p, n, a));
                }
                6 => {
                    // Invalid frees: an interior pointer or another size of a live allocation, a
                    // pointer freed before and not handed out again, an address never handed out.
                    let pick = |v: &[(usize, usize, usize)], k: u8| v.get(usize::from(k) % v.len().max(1)).copied();
                    let k = b.u8();
                    let target = match b.u8() % 4 {
                        0 => pick(&s.live, k).filter(|&(_, n, _)| n > 256).map(|(p, _, a)| (p + 256, 256, a)),
                        1 => pick(&s.live, k).map(|(p, n, a)| (p, n.div_ceil(256) * 256 + 256, a)),
                        2 => pick(&s.freed, k).filter(|&(p, _, _)| s.live.iter().all(|l| l.0 != p)),
                        _ => Some((0x10 + (usize::from(k) << 32), 256, 256)),
                    };
                    if let Some((p, n, a)) = target {
                        let rc = rmm_resource_deallocate(s.top, std::ptr::null_mut(), p as *mut c_void, n, a, &mut err);
                        check(rc, &[INVALID], "an invalid free", &err);
                    }
                }
                7 => buffer_through_export(&mut b, s),
                8 => view_from_parts(&mut b, &host),
                9 => view_from_dlpack(&mut b),
                _ => {}
            }
        }
    }
    // A handle used right after its last release is refused, never a crash.
    if let Some(s) = new_stack(&mut b, bottom) {
        // SAFETY: the handle's last reference goes; the calls below must see that.
        unsafe {
            rmm_resource_release(s.top);
            let mut p = std::ptr::null_mut();
            check(rmm_resource_allocate(s.top, std::ptr::null_mut(), 256, 256, &mut p, &mut err), &[INVALID], "a released handle", &err);
            check(rmm_resource_release_checked(s.top, &mut err), &[INVALID], "a second release", &err);
        }
    }
    for s in stacks {
        // SAFETY: what each stack handed out, with its arguments; then every reference we hold.
        unsafe {
            for (p, n, a) in s.live {
                check(rmm_resource_deallocate(s.top, std::ptr::null_mut(), p as *mut c_void, n, a, &mut err), &[OK], "a final free", &err);
            }
            for _ in 0..=s.extra {
                rmm_resource_release(s.top);
            }
        }
    }
    let mut bytes = Counter::default();
    // SAFETY: the bottom is alive until released below.
    unsafe {
        check(rmm_statistics_resource_adaptor_get_bytes_counter(bottom, &mut bytes, &mut err), &[OK], "counter", &err);
        rmm_resource_release(bottom);
    }
    assert_eq!(bytes.value, 0, "everything went back: {bytes:?}");
});
