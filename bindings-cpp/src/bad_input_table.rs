//! The bad-input table, `docs/bad-inputs.md` (issue 30): every case below is run, its result is
//! checked against what it must be, and the table of (face, case, result) is rendered from what was
//! observed. The test fails when a case gives another result, and when the checked-in table differs
//! from the rendered one (so the count in it is never stale); `RMM_BLESS=1 cargo test -p rmm-cpp
//! bad_input_table` writes it.
//!
//! Faces: Rust (rmm-core's API, which the Rust crate re-exports) and C (librmm's entry points, which
//! the C++ headers turn into exceptions: `RMM_ERROR_INVALID_ARGUMENT` is `rmm::logic_error`,
//! `RMM_ERROR_OUT_OF_MEMORY` `rmm::out_of_memory`). Python's face is its binding's: a pytest there
//! can render its rows the same way.

use std::ffi::{c_int, c_void, CStr};
use std::fmt::Write as _;

use crate::buffers::{rmm_device_buffer, rmm_device_buffer_free_checked, rmm_device_buffer_new};
use crate::capsules::{rmm_buffer_export_free, rmm_device_buffer_export, rmm_device_buffer_import};
use crate::tests::prelude::*;
use crate::views::{rmm_strided_view_from_dlpack_versioned, rmm_strided_view_from_parts};
use rmm_core::cuda::Stream;
use rmm_core::export::{export_buffer, import_buffer, rmm_buffer_export};
use rmm_core::mr::{
    ArenaMemoryResource, ArenaOptions, BinningMemoryResource, FixedSizeMemoryResource,
    LimitingResourceAdaptor, PoolMemoryResource, StatisticsResourceAdaptor, SystemMemoryResource,
    TrackingResourceAdaptor,
};
use rmm_core::view::dlpack::{device_type, type_code, DLPackVersion};
use rmm_core::view::{
    rmm_strided_view, DLDataType, DLDevice, DLManagedTensorVersioned, DLTensor, StridedMemoryView,
    ViewParts,
};
use rmm_core::{AnyResource, DeviceBuffer, Error, MemoryResource, Result};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
const S: Stream = Stream::DEFAULT;

/// One row: the face, the input, what must happen, and how to make it happen.
struct Case {
    face: &'static str,
    case: String,
    expect: &'static str,
    run: Box<dyn FnOnce() -> String>,
}

fn rust(case: &str, expect: &'static str, run: impl FnOnce() -> String + 'static) -> Case {
    Case {
        face: "Rust",
        case: case.into(),
        expect,
        run: Box::new(run),
    }
}

fn c(case: &str, expect: &'static str, run: impl FnOnce() -> String + 'static) -> Case {
    Case {
        face: "C",
        case: case.into(),
        expect,
        run: Box::new(run),
    }
}

/// A Rust result as the table shows it: `Ok` or the error's variant.
fn shown<T>(r: &Result<T>) -> String {
    match r {
        Ok(_) => "Ok".into(),
        Err(Error::OutOfMemory { .. }) => "Err(OutOfMemory)".into(),
        Err(Error::InvalidArgument(_)) => "Err(InvalidArgument)".into(),
        Err(Error::Unsupported(_)) => "Err(Unsupported)".into(),
        Err(Error::Cuda { .. }) => "Err(Cuda)".into(),
        Err(Error::NoDriver(_)) => "Err(NoDriver)".into(),
        Err(Error::NoDevice(_)) => "Err(NoDevice)".into(),
    }
}

/// A C status as the table shows it (`RMM_OK`, `RMM_ERROR_*`).
fn status(rc: c_int) -> String {
    // SAFETY: a static NUL-terminated string.
    unsafe { CStr::from_ptr(crate::abi::rmm_error_kind_name(rc)) }
        .to_string_lossy()
        .into_owned()
}

fn system() -> AnyResource {
    AnyResource::new(SystemMemoryResource::new())
}

/// Makes a fresh resource.
type Make = fn() -> AnyResource;

/// The checked sub-allocators, named, over host memory.
fn sub_allocators() -> Vec<(&'static str, Make)> {
    vec![
        ("pool", || {
            AnyResource::new(PoolMemoryResource::new(system(), Some(MIB), Some(4 * MIB)).unwrap())
        }),
        ("fixed_size", || {
            AnyResource::new(FixedSizeMemoryResource::new(system(), 4 * KIB, 16).unwrap())
        }),
        ("binning", || {
            AnyResource::new(BinningMemoryResource::with_exponents(system(), 8, 12).unwrap())
        }),
        ("arena", || {
            let options = ArenaOptions::default().arena_size(4 * MIB);
            AnyResource::new(ArenaMemoryResource::with_options(system(), options).unwrap())
        }),
    ]
}

/// Allocates 4 KiB from `mr`, runs `bad` on it, checks the allocation is still live and frees it.
fn with_live_block(
    mr: AnyResource,
    bad: impl FnOnce(&AnyResource, *mut u8) -> Result<()>,
) -> String {
    let p = mr.allocate(S, 4 * KIB, 256).unwrap();
    let r = bad(&mr, p);
    // SAFETY: the right arguments: the block must still be live after a refusal.
    let freed = unsafe { mr.deallocate(S, p, 4 * KIB, 256) };
    assert!(
        freed.is_ok() || r.is_ok(),
        "the refusal changed the resource: {freed:?}"
    );
    shown(&r)
}

fn f32_parts(
    ptr: usize,
    shape: Vec<i64>,
    strides: Option<Vec<i64>>,
    device: DLDevice,
) -> ViewParts {
    ViewParts {
        ptr,
        shape,
        strides,
        dtype: DLDataType::new(type_code::FLOAT, 32),
        device,
        readonly: false,
        subbyte_padded: false,
    }
}

const CPU: DLDevice = DLDevice {
    device_type: device_type::CPU,
    device_id: 0,
};

fn view(parts: ViewParts) -> String {
    shown(&StridedMemoryView::new(parts, None))
}

/// A pool over host memory as a C handle (released by the caller).
fn c_pool() -> rmm_resource {
    let mut base = rmm_resource::NULL;
    let mut pool = rmm_resource::NULL;
    let mut err = rmm_error::new();
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(rmm_system_memory_resource_new(&mut base, &mut err), RMM_OK);
        assert_eq!(
            rmm_pool_memory_resource_new(base, MIB as u64, 4 * MIB as u64, &mut pool, &mut err),
            RMM_OK
        );
        rmm_resource_release(base);
    }
    pool
}

/// Allocates 4 KiB through the C handle `pool`, runs `bad`, frees the block, releases `pool`.
fn c_with_live_block(
    bad: impl FnOnce(rmm_resource, *mut c_void, &mut rmm_error) -> c_int,
) -> String {
    let pool = c_pool();
    let mut err = rmm_error::new();
    let mut p = std::ptr::null_mut();
    // SAFETY: a live handle and valid out-pointers; the block is freed with its arguments.
    unsafe {
        assert_eq!(
            rmm_resource_allocate(pool, DEFAULT, 4 * KIB, 256, &mut p, &mut err),
            RMM_OK
        );
        let rc = bad(pool, p, &mut err);
        assert_eq!(
            rmm_resource_deallocate(pool, DEFAULT, p, 4 * KIB, 256, &mut err),
            RMM_OK,
            "the block stays live"
        );
        rmm_resource_release(pool);
        status(rc)
    }
}

const DEFAULT: *mut c_void = std::ptr::null_mut();

/// A view from parts through the C entry point.
fn c_view(
    data: usize,
    shape: &[i64],
    strides: Option<&[i64]>,
    format: &CStr,
    device: (c_int, c_int),
) -> String {
    let mut v = rmm_strided_view::EMPTY;
    let mut err = rmm_error::new();
    // SAFETY: the arrays hold `shape.len()` items, `format` is NUL-terminated, valid out-pointers.
    unsafe {
        let rc = rmm_strided_view_from_parts(
            data as *const c_void,
            shape.len() as c_int,
            shape.as_ptr(),
            strides.map_or(std::ptr::null(), <[i64]>::as_ptr),
            format.as_ptr(),
            device.0,
            device.1,
            true,
            &mut v,
            &mut err,
        );
        if rc == RMM_OK {
            crate::views::rmm_strided_view_release(&mut v, &mut err);
        }
        status(rc)
    }
}

/// A buffer export of 4 KiB from a pool, changed by `tamper`, imported through the C entry point;
/// a refused export is restored and freed.
fn c_import(tamper: fn(&mut rmm_buffer_export)) -> String {
    let pool = c_pool();
    let mut err = rmm_error::new();
    let mut buf: *mut rmm_device_buffer = std::ptr::null_mut();
    let mut export: *mut rmm_buffer_export = std::ptr::null_mut();
    // SAFETY: live handles, valid out-pointers; every buffer and export is given back once.
    unsafe {
        assert_eq!(
            rmm_device_buffer_new(4 * KIB, 256, DEFAULT, pool, &mut buf, &mut err),
            RMM_OK
        );
        assert_eq!(rmm_device_buffer_export(buf, &mut export, &mut err), RMM_OK);
        let saved = std::ptr::read(export);
        tamper(&mut *export);
        let mut adopted = std::ptr::null_mut();
        let rc = rmm_device_buffer_import(export, &mut adopted, &mut err);
        if rc == RMM_OK {
            assert_eq!(rmm_device_buffer_free_checked(adopted, &mut err), RMM_OK);
        } else {
            std::ptr::write(export, saved);
            rmm_buffer_export_free(export);
        }
        rmm_resource_release(pool);
        status(rc)
    }
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    // Sub-allocators: frees that do not name a live allocation.
    for (name, make) in sub_allocators() {
        cases.push(rust(
            &format!("{name}: free of a pointer 256 bytes into a live 4 KiB block"),
            "Err(InvalidArgument)",
            move || {
                // SAFETY: deliberately wrong; refused before anything is touched.
                with_live_block(make(), |mr, p| unsafe {
                    mr.deallocate(S, p.wrapping_add(256), 256, 256)
                })
            },
        ));
        cases.push(rust(
            &format!("{name}: free of a live 4 KiB block with 256 bytes"),
            "Err(InvalidArgument)",
            move || {
                // SAFETY: as above.
                with_live_block(make(), |mr, p| unsafe { mr.deallocate(S, p, 256, 256) })
            },
        ));
        cases.push(rust(
            &format!("{name}: free of a live 4 KiB block with 8 KiB"),
            "Err(InvalidArgument)",
            move || {
                // SAFETY: as above.
                with_live_block(make(), |mr, p| unsafe { mr.deallocate(S, p, 8 * KIB, 256) })
            },
        ));
        cases.push(rust(
            &format!("{name}: double free"),
            "Err(InvalidArgument)",
            move || {
                let mr = make();
                let p = mr.allocate(S, 4 * KIB, 256).unwrap();
                // SAFETY: the first free is right, the second refused.
                shown(&unsafe {
                    mr.deallocate(S, p, 4 * KIB, 256)
                        .and_then(|()| mr.deallocate(S, p, 4 * KIB, 256))
                })
            },
        ));
        cases.push(rust(
            &format!("{name}: free of a stack address"),
            "Err(InvalidArgument)",
            move || {
                let local = [0u8; 512];
                // SAFETY: refused before anything is touched.
                shown(&unsafe { make().deallocate(S, local.as_ptr().cast_mut(), 256, 256) })
            },
        ));
        cases.push(rust(
            &format!("{name}: alignment 3"),
            "Err(InvalidArgument)",
            move || shown(&make().allocate(S, 256, 3)),
        ));
    }
    cases.push(rust(
        "pool: allocate usize::MAX bytes",
        "Err(OutOfMemory)",
        || {
            shown(
                &PoolMemoryResource::new(system(), Some(MIB), None)
                    .unwrap()
                    .allocate(S, usize::MAX, 256),
            )
        },
    ));
    cases.push(rust(
        "pool: initial size 1000 (not a multiple of 256)",
        "Err(InvalidArgument)",
        || shown(&PoolMemoryResource::new(system(), Some(1000), None)),
    ));
    // One rule for a valid free (docs/design/checked-frees.md).
    cases.push(rust(
        "statistics over a pool: allocate(1000), deallocate(p, 1001): current bytes after",
        "0",
        || {
            let stats = StatisticsResourceAdaptor::new(
                PoolMemoryResource::new(system(), Some(MIB), None).unwrap(),
            );
            let p = stats.allocate(S, 1000, 256).unwrap();
            // SAFETY: the same multiple of 256: a valid free.
            unsafe { stats.deallocate(S, p, 1001, 256).unwrap() };
            stats.bytes_counter().value.to_string()
        },
    ));
    cases.push(rust("statistics over a pool: a pool allocation made beside it, freed through it: counters after", "0 / 0 (forwarded)", || {
        let pool = PoolMemoryResource::new(system(), Some(MIB), None).unwrap();
        let stats = StatisticsResourceAdaptor::new(pool.clone());
        let p = pool.allocate(S, 256, 256).unwrap();
        // SAFETY: the pool's live allocation: forwarded to it.
        unsafe { stats.deallocate(S, p, 256, 256).unwrap() };
        let (bytes, allocations) = stats.counters();
        format!("{} / {} (forwarded)", bytes.value, allocations.value)
    }));
    cases.push(rust("limiting (1 MiB) over a pool: 1 MiB through it, then 512 KiB made beside it freed through it, then 512 KiB more", "Err(OutOfMemory)", || {
        let pool = PoolMemoryResource::new(system(), Some(MIB), Some(4 * MIB)).unwrap();
        let limiting = LimitingResourceAdaptor::new(pool.clone(), MIB);
        let mine = limiting.allocate(S, MIB, 256).unwrap();
        let beside = pool.allocate(S, MIB / 2, 256).unwrap();
        // SAFETY: the pool's allocation: forwarded, no room given back.
        unsafe { limiting.deallocate(S, beside, MIB / 2, 256).unwrap() };
        let r = limiting.allocate(S, MIB / 2, 256);
        // SAFETY: the adaptor's allocation.
        unsafe { limiting.deallocate(S, mine, MIB, 256).unwrap() };
        shown(&r)
    }));
    cases.push(rust(
        "tracking over system memory: free of a pointer it never handed out",
        "Err(InvalidArgument)",
        || {
            let elsewhere = SystemMemoryResource::new().allocate(S, 256, 256).unwrap();
            // SAFETY: refused: the upstream keeps no record to vouch for it.
            let r = unsafe {
                TrackingResourceAdaptor::new(SystemMemoryResource::new(), false)
                    .deallocate(S, elsewhere, 256, 256)
            };
            // SAFETY: freed where it was made.
            unsafe {
                SystemMemoryResource::new()
                    .deallocate(S, elsewhere, 256, 256)
                    .unwrap()
            };
            shown(&r)
        },
    ));
    cases.push(rust(
        "tracking over a pool: free of a 1000-byte allocation with 1300 bytes",
        "Err(InvalidArgument)",
        || {
            let t = TrackingResourceAdaptor::new(
                PoolMemoryResource::new(system(), Some(MIB), None).unwrap(),
                false,
            );
            let p = t.allocate(S, 1000, 256).unwrap();
            // SAFETY: refused (another multiple of 256), then the right free.
            let r = unsafe { t.deallocate(S, p, 1300, 256) };
            // SAFETY: the right arguments.
            unsafe { t.deallocate(S, p, 1000, 256).unwrap() };
            shown(&r)
        },
    ));
    // Views.
    /// Host memory the views describe (never read).
    static HOST: [u8; 64] = [0; 64];
    let host = HOST.as_ptr() as usize;
    let dev = |device_type, device_id| DLDevice {
        device_type,
        device_id,
    };
    cases.push(rust(
        "view: NULL data with 4 elements",
        "Err(InvalidArgument)",
        || view(f32_parts(0, vec![4], None, CPU)),
    ));
    cases.push(rust(
        "view: NULL data with no elements (shape [0])",
        "Ok",
        || view(f32_parts(0, vec![0], None, CPU)),
    ));
    cases.push(rust(
        "view: device type 99",
        "Err(InvalidArgument)",
        move || view(f32_parts(host, vec![4], None, dev(99, 0))),
    ));
    cases.push(rust(
        "view: device id -7",
        "Err(InvalidArgument)",
        move || view(f32_parts(host, vec![4], None, dev(1, -7))),
    ));
    if rmm_core::cuda::is_host_mode() {
        cases.push(rust(
            "view: a CUDA device in host mode",
            "Err(InvalidArgument)",
            move || view(f32_parts(host, vec![4], None, dev(device_type::CUDA, 0))),
        ));
    }
    cases.push(rust(
        "view: stride INT64_MIN",
        "Err(InvalidArgument)",
        move || view(f32_parts(host, vec![2], Some(vec![i64::MIN]), CPU)),
    ));
    cases.push(rust(
        "view: 2^62 items of 4 bytes (a span past the address space)",
        "Err(InvalidArgument)",
        move || view(f32_parts(host, vec![1 << 62], None, CPU)),
    ));
    cases.push(rust(
        "view: a negative stride reaching below address 0",
        "Err(InvalidArgument)",
        || view(f32_parts(0x1000, vec![0x1000], Some(vec![-1]), CPU)),
    ));
    cases.push(rust(
        "view: 65 dimensions",
        "Err(InvalidArgument)",
        move || view(f32_parts(host, vec![1; 65], None, CPU)),
    ));
    cases.push(rust("view: extent -1", "Err(InvalidArgument)", move || {
        view(f32_parts(host, vec![-1], None, CPU))
    }));
    cases.push(rust(
        "DLPack: byte_offset that wraps the address",
        "Err(InvalidArgument)",
        || dlpack(usize::MAX - 8, 16, 1),
    ));
    cases.push(rust(
        "DLPack: NULL data with a byte_offset",
        "Err(InvalidArgument)",
        || dlpack(0, 64, 1),
    ));
    cases.push(rust(
        "DLPack: major version 2",
        "Err(Unsupported)",
        move || dlpack(host, 0, 2),
    ));
    cases.push(rust("DLPack: NULL tensor", "Err(InvalidArgument)", || {
        // SAFETY: NULL is refused before any read.
        shown(&unsafe { StridedMemoryView::from_dlpack_versioned(std::ptr::null_mut()) })
    }));
    // Buffer exports.
    cases.push(rust(
        "buffer export: capacity 64 KiB for a 4 KiB pool allocation",
        "Err(InvalidArgument)",
        || import(|e| e.capacity = 64 * KIB),
    ));
    cases.push(rust(
        "buffer export: data 256 bytes into the allocation",
        "Err(InvalidArgument)",
        || import(|e| e.data = e.data.wrapping_byte_add(256)),
    ));
    cases.push(rust(
        "buffer export: size larger than capacity",
        "Err(InvalidArgument)",
        || import(|e| e.size = e.capacity + 1),
    ));
    cases.push(rust(
        "buffer export: version 2",
        "Err(InvalidArgument)",
        || import(|e| e.version = 2),
    ));
    cases.push(rust(
        "buffer export: alignment 3",
        "Err(InvalidArgument)",
        || import(|e| e.alignment = 3),
    ));
    cases.push(rust(
        "buffer export: device -7",
        "Err(InvalidArgument)",
        || import(|e| e.device = -7),
    ));
    cases.push(rust("buffer export: unchanged", "Ok", || import(|_| {})));
    // Sizes.
    for text in ["1.5.0", "kib", "-1", "1e3", "2k"] {
        cases.push(rust(
            &format!("size string \"{text}\""),
            "Err(InvalidArgument)",
            move || shown(&rmm_core::size::parse_bytes(text)),
        ));
    }

    // The C face.
    cases.push(c(
        "rmm_resource_deallocate on a pool: 256 bytes into a live 4 KiB block",
        "RMM_ERROR_INVALID_ARGUMENT",
        || {
            // SAFETY: deliberately wrong; refused.
            c_with_live_block(|pool, p, err| unsafe {
                rmm_resource_deallocate(pool, DEFAULT, p.wrapping_byte_add(256), 256, 256, err)
            })
        },
    ));
    cases.push(c(
        "rmm_resource_deallocate on a pool: a live 4 KiB block with 256 bytes",
        "RMM_ERROR_INVALID_ARGUMENT",
        || {
            // SAFETY: as above.
            c_with_live_block(|pool, p, err| unsafe {
                rmm_resource_deallocate(pool, DEFAULT, p, 256, 256, err)
            })
        },
    ));
    cases.push(c(
        "rmm_resource_allocate: alignment 3",
        "RMM_ERROR_INVALID_ARGUMENT",
        || {
            let mut q = std::ptr::null_mut();
            // SAFETY: refused; nothing allocated.
            c_with_live_block(|pool, _, err| unsafe {
                rmm_resource_allocate(pool, DEFAULT, 256, 3, &mut q, err)
            })
        },
    ));
    cases.push(c(
        "rmm_resource_allocate: NULL out",
        "RMM_ERROR_INVALID_ARGUMENT",
        || {
            // SAFETY: refused before anything is allocated.
            c_with_live_block(|pool, _, err| unsafe {
                rmm_resource_allocate(pool, DEFAULT, 256, 256, std::ptr::null_mut(), err)
            })
        },
    ));
    cases.push(c(
        "rmm_resource_allocate on a released pool handle",
        "RMM_ERROR_INVALID_ARGUMENT",
        || {
            let pool = c_pool();
            let mut err = rmm_error::new();
            let mut p = std::ptr::null_mut();
            // SAFETY: the last reference goes; the handle is then refused.
            unsafe {
                rmm_resource_release(pool);
                status(rmm_resource_allocate(
                    pool, DEFAULT, 256, 256, &mut p, &mut err,
                ))
            }
        },
    ));
    cases.push(c(
        "rmm_resource_release_checked twice",
        "RMM_ERROR_INVALID_ARGUMENT",
        || {
            let pool = c_pool();
            let mut err = rmm_error::new();
            // SAFETY: the second release is refused.
            unsafe {
                assert_eq!(rmm_resource_release_checked(pool, &mut err), RMM_OK);
                status(rmm_resource_release_checked(pool, &mut err))
            }
        },
    ));
    cases.push(c(
        "rmm_pool_memory_resource_new: initial size 1000",
        "RMM_ERROR_INVALID_ARGUMENT",
        || {
            let (mut base, mut pool, mut err) =
                (rmm_resource::NULL, rmm_resource::NULL, rmm_error::new());
            // SAFETY: valid out-pointers.
            unsafe {
                assert_eq!(rmm_system_memory_resource_new(&mut base, &mut err), RMM_OK);
                let rc = rmm_pool_memory_resource_new(base, 1000, u64::MAX, &mut pool, &mut err);
                rmm_resource_release(base);
                status(rc)
            }
        },
    ));
    cases.push(c(
        "rmm_device_buffer_free_checked twice",
        "RMM_ERROR_INVALID_ARGUMENT",
        || {
            let pool = c_pool();
            let (mut buf, mut err) = (std::ptr::null_mut(), rmm_error::new());
            // SAFETY: the second free is refused (within the quarantine).
            unsafe {
                assert_eq!(
                    rmm_device_buffer_new(64, 256, DEFAULT, pool, &mut buf, &mut err),
                    RMM_OK
                );
                assert_eq!(rmm_device_buffer_free_checked(buf, &mut err), RMM_OK);
                let rc = rmm_device_buffer_free_checked(buf, &mut err);
                rmm_resource_release(pool);
                status(rc)
            }
        },
    ));
    let shape4 = [4i64];
    cases.push(c(
        "rmm_strided_view_from_parts: NULL data with 4 elements",
        "RMM_ERROR_INVALID_ARGUMENT",
        move || c_view(0, &shape4, None, c"<f4", (1, 0)),
    ));
    cases.push(c(
        "rmm_strided_view_from_parts: device type 99",
        "RMM_ERROR_INVALID_ARGUMENT",
        move || c_view(host, &shape4, None, c"<f4", (99, 0)),
    ));
    cases.push(c(
        "rmm_strided_view_from_parts: device id -7",
        "RMM_ERROR_INVALID_ARGUMENT",
        move || c_view(host, &shape4, None, c"<f4", (1, -7)),
    ));
    if rmm_core::cuda::is_host_mode() {
        cases.push(c(
            "rmm_strided_view_from_parts: a CUDA device in host mode",
            "RMM_ERROR_INVALID_ARGUMENT",
            move || c_view(host, &shape4, None, c"<f4", (2, 0)),
        ));
    }
    cases.push(c(
        "rmm_strided_view_from_parts: stride INT64_MIN",
        "RMM_ERROR_INVALID_ARGUMENT",
        move || c_view(host, &[2], Some(&[i64::MIN]), c"<f4", (1, 0)),
    ));
    cases.push(c(
        "rmm_strided_view_from_parts: a span past the address space",
        "RMM_ERROR_INVALID_ARGUMENT",
        move || c_view(host, &[1 << 62], None, c"<f4", (1, 0)),
    ));
    cases.push(c(
        "rmm_strided_view_from_parts: format \"<f3\"",
        "RMM_ERROR_INVALID_ARGUMENT",
        move || c_view(host, &shape4, None, c"<f3", (1, 0)),
    ));
    cases.push(c(
        "rmm_strided_view_from_parts: 65 dimensions",
        "RMM_ERROR_INVALID_ARGUMENT",
        move || c_view(host, &[1; 65], None, c"<f4", (1, 0)),
    ));
    cases.push(c(
        "rmm_strided_view_from_dlpack_versioned: NULL tensor",
        "RMM_ERROR_INVALID_ARGUMENT",
        || {
            let (mut v, mut err) = (rmm_strided_view::EMPTY, rmm_error::new());
            // SAFETY: NULL is refused before any read.
            status(unsafe {
                rmm_strided_view_from_dlpack_versioned(std::ptr::null_mut(), &mut v, &mut err)
            })
        },
    ));
    cases.push(c(
        "rmm_device_buffer_import: capacity 64 KiB for a 4 KiB pool allocation",
        "RMM_ERROR_INVALID_ARGUMENT",
        || c_import(|e| e.capacity = 64 * KIB),
    ));
    cases.push(c(
        "rmm_device_buffer_import: data 256 bytes into the allocation",
        "RMM_ERROR_INVALID_ARGUMENT",
        || c_import(|e| e.data = e.data.wrapping_byte_add(256)),
    ));
    cases.push(c(
        "rmm_device_buffer_import: version 2",
        "RMM_ERROR_INVALID_ARGUMENT",
        || c_import(|e| e.version = 2),
    ));
    cases.push(c("rmm_device_buffer_import: unchanged", "RMM_OK", || {
        c_import(|_| {})
    }));
    cases
}

/// A DLPack tensor over `data` + `offset` (4 floats), imported; refused tensors are deleted here.
fn dlpack(data: usize, offset: u64, major: u32) -> String {
    unsafe extern "C" fn delete(t: *mut DLManagedTensorVersioned) {
        // SAFETY: made below with Box::into_raw, deleted once.
        drop(unsafe { Box::from_raw(t) });
    }
    static SHAPE: [i64; 1] = [4];
    let t = Box::into_raw(Box::new(DLManagedTensorVersioned {
        version: DLPackVersion { major, minor: 1 },
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete),
        flags: 0,
        dl_tensor: DLTensor {
            data: data as *mut c_void,
            device: CPU,
            ndim: 1,
            dtype: DLDataType::new(type_code::FLOAT, 32),
            shape: SHAPE.as_ptr().cast_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: offset,
        },
    }));
    // SAFETY: a live tensor; on error it stays ours.
    let r = unsafe { StridedMemoryView::from_dlpack_versioned(t) };
    if r.is_err() {
        // SAFETY: refused, so still ours.
        unsafe { delete(t) };
    }
    shown(&r)
}

/// A 4 KiB buffer of a pool exported, changed by `tamper`, imported; a refused export is restored
/// and given back.
fn import(tamper: fn(&mut rmm_buffer_export)) -> String {
    let pool = AnyResource::new(PoolMemoryResource::new(system(), Some(MIB), None).unwrap());
    let export = export_buffer(DeviceBuffer::new(4 * KIB, S, pool).unwrap());
    // SAFETY: a live export, restored if refused, given back once.
    unsafe {
        let saved = std::ptr::read(export);
        tamper(&mut *export);
        let r = import_buffer(export);
        if r.is_err() {
            std::ptr::write(export, saved);
            rmm_core::export::free_buffer_export(export);
        }
        shown(&r)
    }
}

/// The table of `rows` (face, case, result), with its counts.
fn render(rows: &[(&str, String, String)]) -> String {
    let refused = rows
        .iter()
        .filter(|r| r.2.starts_with("Err(") || r.2.starts_with("RMM_ERROR_"))
        .count();
    let mut out = String::from(
        "# Bad inputs and what they give\n\n\
         Generated by `bindings-cpp/src/bad_input_table.rs` (a test of `cargo test -p rmm-cpp`, run by CI), which runs\n\
         every case below, checks its result and fails when this file differs from what it observed: regenerate\n\
         it with `RMM_BLESS=1 cargo test -p rmm-cpp bad_input_table`. Host mode. The C++ headers turn the C\n\
         statuses into exceptions (`RMM_ERROR_INVALID_ARGUMENT`: `rmm::logic_error`, `RMM_ERROR_OUT_OF_MEMORY`:\n\
         `rmm::out_of_memory`); the rules behind the frees are in `docs/design/checked-frees.md`. Every refusal\n\
         leaves the resource, buffer or tensor as it was (each case checks that its block can still be freed,\n\
         and refused tensors and exports stay their producer's).\n\n",
    );
    let _ = writeln!(
        out,
        "{} cases: {} refused with a typed error, {} accepted as valid (shown with what they did).\n",
        rows.len(),
        refused,
        rows.len() - refused
    );
    out.push_str("| face | case | result |\n| --- | --- | --- |\n");
    for (face, case, result) in rows {
        let _ = writeln!(
            out,
            "| {face} | {} | {} |",
            case.replace('|', "\\|"),
            result.replace('|', "\\|")
        );
    }
    out
}

#[test]
fn bad_input_table() {
    let mut rows = Vec::new();
    let mut wrong = Vec::new();
    for Case {
        face,
        case,
        expect,
        run,
    } in cases()
    {
        let got = run();
        if got != expect {
            wrong.push(format!("{face}: {case}: expected {expect}, got {got}"));
        }
        rows.push((face, case, got));
    }
    assert!(
        wrong.is_empty(),
        "cases with another result:\n{}",
        wrong.join("\n")
    );
    if !rmm_core::cuda::is_host_mode() {
        // The table is the host-mode one (CI's); on a GPU the cases above still had to hold.
        rmm_core::testing::skip("bad_input_table", "the table is compared in host mode only");
        return;
    }
    let table = render(&rows);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/bad-inputs.md");
    if std::env::var_os("RMM_BLESS").is_some() {
        std::fs::write(&path, &table).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        current == table,
        "docs/bad-inputs.md is stale: run `RMM_BLESS=1 cargo test -p rmm-cpp bad_input_table` and commit it"
    );
}
