//! Typed strided views and DLPack 1.x in the C ABI (`rmm_strided_view` in `rmm_c.h`): the view
//! struct is caller-owned and filled by an acquire call (from a DLPack tensor or from parts), read
//! directly (fields, no calls), and released once with [`rmm_strided_view_release`], as
//! `PyObject_GetBuffer`/`PyBuffer_Release`. The logic and the validity word live in
//! `rmm_core::view`; these entry points only check pointers and catch panics.

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::streams::stream_from_c;
use rmm_core::error::{Error, Result};
use rmm_core::resource::guard::{guarded, hand_out_ptr, null_out};
use rmm_core::resource::{rmm_error, rmm_resource, AnyResource};
use rmm_core::view::dlpack::{DLDevice, DLManagedTensor, DLManagedTensorVersioned};
use rmm_core::view::domain;
use rmm_core::view::{dtype_of_format, live, rmm_strided_view, StridedMemoryView, ViewParts};

/// Clears `*out` (if any) to the released state, then runs `f` and acquires its view into `*out`.
///
/// # Safety
/// `out` and `err` are NULL or valid for writes.
unsafe fn acquire_into(
    out: *mut rmm_strided_view,
    err: *mut rmm_error,
    f: impl FnOnce() -> Result<StridedMemoryView>,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        if let Some(slot) = out.as_mut() {
            *slot = rmm_strided_view::EMPTY;
        }
        guarded(err, || {
            if out.is_null() {
                return Err(null_out("out"));
            }
            live::acquire(f()?, out)
        })
    }
}

/// Acquires a view of a DLPack 1.x tensor, which the view takes over on success (its deleter runs
/// at release); on failure the caller still owns it.
///
/// # Safety
/// `tensor` is NULL or a live managed tensor nobody else deletes; `out`, `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rmm_strided_view_from_dlpack_versioned(
    tensor: *mut DLManagedTensorVersioned,
    out: *mut rmm_strided_view,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract; `acquire_into` refuses a NULL `out` before the tensor is taken over.
    unsafe {
        acquire_into(out, err, || {
            StridedMemoryView::from_dlpack_versioned(tensor)
        })
    }
}

/// Acquires a view of a legacy (unversioned) DLPack tensor; ownership as
/// [`rmm_strided_view_from_dlpack_versioned`].
///
/// # Safety
/// As [`rmm_strided_view_from_dlpack_versioned`].
#[no_mangle]
pub unsafe extern "C" fn rmm_strided_view_from_dlpack(
    tensor: *mut DLManagedTensor,
    out: *mut rmm_strided_view,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract; `acquire_into` refuses a NULL `out` before the tensor is taken over.
    unsafe { acquire_into(out, err, || StridedMemoryView::from_dlpack(tensor)) }
}

/// Python's capsule functions, found in the process (`dlsym(RTLD_DEFAULT)`): present when librmm
/// runs inside a Python interpreter, absent otherwise.
struct CapsuleApi {
    is_valid: unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int,
    get_pointer: unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void,
    set_name: unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int,
}

fn capsule_api() -> Option<&'static CapsuleApi> {
    static API: std::sync::OnceLock<Option<CapsuleApi>> = std::sync::OnceLock::new();
    API.get_or_init(|| {
        let find = |name: &CStr| {
            // SAFETY: dlsym with a NUL-terminated name; NULL when absent.
            let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            (!p.is_null()).then_some(p)
        };
        let (v, g, s) = (
            find(c"PyCapsule_IsValid")?,
            find(c"PyCapsule_GetPointer")?,
            find(c"PyCapsule_SetName")?,
        );
        // SAFETY: CPython's exported functions with these C signatures (stable ABI).
        unsafe {
            Some(CapsuleApi {
                is_valid: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int,
                >(v),
                get_pointer: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void,
                >(g),
                set_name: std::mem::transmute::<
                    *mut c_void,
                    unsafe extern "C" fn(*mut c_void, *const c_char) -> c_int,
                >(s),
            })
        }
    })
    .as_ref()
}

/// Acquires a view of a DLPack capsule (a `PyObject*` from `obj.__dlpack__(...)`): a versioned
/// `"dltensor_versioned"` one or a legacy `"dltensor"` one, which is renamed `"used_..."` on success
/// (the view then owns the tensor), as a DLPack consumer does. INVALID_ARGUMENT for a consumed
/// capsule, for any other object, or a capsule of another name; UNSUPPORTED outside a Python
/// process. The caller holds the GIL (Cython: `with gil`; ctypes: `PyDLL`).
///
/// # Safety
/// `capsule` is NULL or a live Python object; the GIL is held; `out`, `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rmm_strided_view_from_dlpack_capsule(
    capsule: *mut c_void,
    out: *mut rmm_strided_view,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        acquire_into(out, err, || {
            if capsule.is_null() {
                return Err(Error::invalid("the capsule must not be NULL"));
            }
            let api = capsule_api().ok_or_else(|| {
                Error::Unsupported("no Python interpreter in this process (PyCapsule_*)".into())
            })?;
            // PyCapsule_IsValid sets no Python error, for any object.
            if (api.is_valid)(capsule, c"dltensor_versioned".as_ptr()) == 1 {
                let t = (api.get_pointer)(capsule, c"dltensor_versioned".as_ptr())
                    .cast::<DLManagedTensorVersioned>();
                let view = StridedMemoryView::from_dlpack_versioned(t)?;
                (api.set_name)(capsule, c"used_dltensor_versioned".as_ptr());
                Ok(view)
            } else if (api.is_valid)(capsule, c"dltensor".as_ptr()) == 1 {
                let t = (api.get_pointer)(capsule, c"dltensor".as_ptr()).cast::<DLManagedTensor>();
                let view = StridedMemoryView::from_dlpack(t)?;
                (api.set_name)(capsule, c"used_dltensor".as_ptr());
                Ok(view)
            } else if (api.is_valid)(capsule, c"used_dltensor_versioned".as_ptr()) == 1
                || (api.is_valid)(capsule, c"used_dltensor".as_ptr()) == 1
            {
                Err(Error::invalid("the DLPack capsule was already consumed"))
            } else {
                Err(Error::invalid(
                    "not a DLPack capsule (\"dltensor_versioned\" or \"dltensor\")",
                ))
            }
        })
    }
}

/// Acquires a view of memory described by parts (no owner: the caller keeps the memory alive).
/// `strides` (in items) may be NULL for a C-contiguous array; `format` is a format string.
///
/// # Safety
/// `shape` and `strides` are NULL or hold `ndim` items; `format` is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn rmm_strided_view_from_parts(
    data: *const c_void,
    ndim: c_int,
    shape: *const i64,
    strides: *const i64,
    format: *const c_char,
    device_type: c_int,
    device_id: c_int,
    readonly: bool,
    out: *mut rmm_strided_view,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        acquire_into(out, err, || {
            let n = usize::try_from(ndim)
                .map_err(|_| Error::invalid(format!("negative ndim {ndim}")))?;
            if n > rmm_core::view::strided::MAX_NDIM {
                return Err(Error::invalid(format!(
                    "{n} dimensions: at most 64 are supported"
                )));
            }
            if n > 0 && shape.is_null() {
                return Err(Error::invalid("shape must not be NULL when ndim > 0"));
            }
            let format = format
                .as_ref()
                .ok_or_else(|| Error::invalid("format must not be NULL"))?;
            let format = CStr::from_ptr(format)
                .to_str()
                .map_err(|_| Error::invalid("format is not UTF-8"))?;
            let slice = |p: *const i64| {
                if n == 0 {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(p, n).to_vec()
                }
            };
            let parts = ViewParts {
                ptr: data as usize,
                shape: slice(shape),
                strides: (!strides.is_null()).then(|| slice(strides)),
                dtype: dtype_of_format(format)?,
                device: DLDevice {
                    device_type,
                    device_id,
                },
                readonly,
                subbyte_padded: true,
            };
            StridedMemoryView::new(parts, None)
        })
    }
}

/// Releases a view: frees its shape and stride storage and lets go of its producer; `*view` is
/// cleared (generation 0). INVALID_ARGUMENT for a double release, a struct never acquired, or a
/// copy of one released through another copy (`*view` is unchanged then).
///
/// # Safety
/// `view` is NULL or valid for reads and writes; `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rmm_strided_view_release(
    view: *mut rmm_strided_view,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { guarded(err, || live::release(view)) }
}

/// RMM_OK when `view` is acquired and not yet released; INVALID_ARGUMENT (with the reason) otherwise.
/// A view acquired by another copy of rmm-core in the process (a Python extension module's) is
/// asked of that copy, when it registered ([`rmm_strided_view_register_domain`]).
///
/// # Safety
/// `view` is NULL or valid for reads; `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rmm_strided_view_check(
    view: *const rmm_strided_view,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { guarded(err, || domain::check_view(view)) }
}

/// For another copy of rmm-core that routes to this library's registry: numbers it (a view domain
/// for the generations of its views, 1.., in `*domain_out`) and keeps its `check`, which
/// [`rmm_strided_view_check`] calls for the views of that domain.
///
/// # Safety
/// `check` NULL (refused) or callable for the rest of the process; `domain_out` and `err` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn rmm_strided_view_register_domain(
    check: rmm_strided_view_check_fn,
    domain_out: *mut u32,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe { domain::rmm_strided_view_register_domain(check, domain_out, err) }
}

/// `rmm_strided_view_check_fn` of rmm_c.h: a copy's check of the views it acquired.
#[allow(non_camel_case_types)]
pub type rmm_strided_view_check_fn = Option<domain::ViewCheckFn>;

/// Writes whether the view is C- (row-major) and F- (column-major) contiguous; either out-pointer
/// may be NULL.
///
/// # Safety
/// `view` NULL or readable; the out-pointers NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rmm_strided_view_contiguity(
    view: *const rmm_strided_view,
    c_contiguous: *mut bool,
    f_contiguous: *mut bool,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            let (c, f) = live::with_view(view, |v| (v.is_c_contiguous(), v.is_f_contiguous()))?;
            if let Some(slot) = c_contiguous.as_mut() {
                *slot = c;
            }
            if let Some(slot) = f_contiguous.as_mut() {
                *slot = f;
            }
            Ok(())
        })
    }
}

/// Acquires into `*out` a view of the same memory whose struct, shape, strides and format are also
/// in memory from `resource` (the empty handle: the current device's resource): `out->device_copy`
/// is that struct, a kernel argument. The upload is complete on return (ordered on `stream`); the
/// memory goes back to the resource on `stream` at `out`'s release. `view` stays acquired.
///
/// # Safety
/// `view` NULL or readable; `resource` live or empty; `stream` a valid stream; `out`, `err` NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn rmm_strided_view_to_device(
    view: *const rmm_strided_view,
    resource: rmm_resource,
    stream: *mut c_void,
    out: *mut rmm_strided_view,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        acquire_into(out, err, || {
            let mr = if resource.is_null() {
                rmm_core::registry::current_resource()?
            } else {
                AnyResource::from_borrowed_handle(resource)?
            };
            live::with_view(view, |v| v.to_device(mr, stream_from_c(stream)))?
        })
    }
}

/// Exports a live view as a new DLPack 1.1 tensor (`*out`, owned by the caller, who calls its
/// deleter once) that keeps the producer alive; the view stays acquired.
///
/// # Safety
/// `view` NULL or readable; `out`, `err` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn rmm_strided_view_to_dlpack_versioned(
    view: *const rmm_strided_view,
    out: *mut *mut DLManagedTensorVersioned,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        hand_out_ptr(out, err, || {
            let tensor = live::with_view(view, |v| v.to_dlpack_versioned(0))?;
            Ok(tensor)
        })
    }
}

/// The number of views acquired through this ABI and not yet released (a leak check).
#[no_mangle]
pub extern "C" fn rmm_strided_view_live_count() -> usize {
    std::panic::catch_unwind(live::live_count).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmm_core::resource::status::{RMM_ERROR_INVALID_ARGUMENT, RMM_ERROR_UNSUPPORTED, RMM_OK};
    use rmm_core::view::dlpack::{device_type, type_code, DLDataType, DLPackVersion, DLTensor};
    use std::sync::atomic::{AtomicUsize, Ordering};

    static DELETED: AtomicUsize = AtomicUsize::new(0);
    /// The tests that count deleter runs take turns: libtest runs tests in parallel threads.
    static COUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    struct Ctx {
        shape: [i64; 2],
        strides: [i64; 2],
        data: Vec<i32>,
    }

    unsafe extern "C" fn deleter(t: *mut DLManagedTensorVersioned) {
        // SAFETY: made by `tensor` below, deleted once.
        unsafe {
            let t = Box::from_raw(t);
            drop(Box::from_raw(t.manager_ctx.cast::<Ctx>()));
        }
        DELETED.fetch_add(1, Ordering::SeqCst);
    }

    fn tensor(major: u32) -> *mut DLManagedTensorVersioned {
        let mut ctx = Box::new(Ctx {
            shape: [3, 4],
            strides: [-4, 1],
            data: (0..12).collect(),
        });
        let dl = DLTensor {
            data: ctx.data.as_mut_ptr().cast(),
            device: DLDevice {
                device_type: device_type::CPU,
                device_id: 0,
            },
            ndim: 2,
            dtype: DLDataType::new(type_code::INT, 32),
            shape: ctx.shape.as_mut_ptr(),
            strides: ctx.strides.as_mut_ptr(),
            byte_offset: 32, // row 2 first: the rows reversed
        };
        Box::into_raw(Box::new(DLManagedTensorVersioned {
            version: DLPackVersion { major, minor: 0 },
            manager_ctx: Box::into_raw(ctx).cast(),
            deleter: Some(deleter),
            flags: 0,
            dl_tensor: dl,
        }))
    }

    #[test]
    fn a_dlpack_view_is_read_as_fields_released_once_and_double_release_is_an_error() {
        let _turn = COUNTING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = DELETED.load(Ordering::SeqCst);
        let mut v = rmm_strided_view::EMPTY;
        let mut e = rmm_error::new();
        // SAFETY: a fresh tensor, valid out-pointers.
        unsafe {
            assert_eq!(
                rmm_strided_view_from_dlpack_versioned(tensor(1), &mut v, &mut e),
                RMM_OK,
                "{}",
                e.message()
            );
            assert_eq!(v.ndim, 2);
            assert_eq!(std::slice::from_raw_parts(v.shape, 2), &[3, 4]);
            assert_eq!(std::slice::from_raw_parts(v.strides, 2), &[-4, 1]);
            assert_eq!(std::slice::from_raw_parts(v.byte_strides, 2), &[-16, 4]);
            assert_eq!(CStr::from_ptr(v.format).to_str().unwrap(), "<i4");
            assert_eq!(*(v.ptr as *const i32), 8);
            assert!(!v.device_accessible && !v.readonly && !v.owner.is_null());
            let (mut c, mut f) = (true, true);
            assert_eq!(
                rmm_strided_view_contiguity(&v, &mut c, &mut f, &mut e),
                RMM_OK
            );
            assert!(!c && !f);
            assert_eq!(rmm_strided_view_check(&v, &mut e), RMM_OK);
            let copy = v;
            assert_eq!(rmm_strided_view_release(&mut v, &mut e), RMM_OK);
            assert_eq!(DELETED.load(Ordering::SeqCst), before + 1);
            assert_eq!(
                rmm_strided_view_release(&mut v, &mut e),
                RMM_ERROR_INVALID_ARGUMENT
            );
            assert!(e.message().contains("released"), "{}", e.message());
            assert_eq!(
                rmm_strided_view_check(&copy, &mut e),
                RMM_ERROR_INVALID_ARGUMENT
            );
            let mut copy = copy;
            assert_eq!(
                rmm_strided_view_release(&mut copy, &mut e),
                RMM_ERROR_INVALID_ARGUMENT
            );
            assert_eq!(
                rmm_strided_view_release(std::ptr::null_mut(), &mut e),
                RMM_ERROR_INVALID_ARGUMENT
            );
        }
        assert_eq!(
            DELETED.load(Ordering::SeqCst),
            before + 1,
            "the deleter ran exactly once"
        );
    }

    #[test]
    fn a_refused_tensor_and_null_arguments_leave_ownership_with_the_caller() {
        let _turn = COUNTING
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut v = rmm_strided_view::EMPTY;
        let mut e = rmm_error::new();
        let t = tensor(2);
        let before = DELETED.load(Ordering::SeqCst);
        // SAFETY: valid pointers; on failure the tensor stays ours.
        unsafe {
            assert_eq!(
                rmm_strided_view_from_dlpack_versioned(t, &mut v, &mut e),
                RMM_ERROR_UNSUPPORTED
            );
            assert_eq!(v.generation, 0);
            assert_eq!(
                rmm_strided_view_from_dlpack_versioned(t, std::ptr::null_mut(), &mut e),
                RMM_ERROR_INVALID_ARGUMENT
            );
            assert_eq!(DELETED.load(Ordering::SeqCst), before);
            deleter(t);
            assert_eq!(
                rmm_strided_view_from_dlpack_versioned(std::ptr::null_mut(), &mut v, &mut e),
                RMM_ERROR_INVALID_ARGUMENT
            );
        }
    }

    #[test]
    fn capsules_need_a_python_process() {
        let mut v = rmm_strided_view::EMPTY;
        let mut e = rmm_error::new();
        let mut not_a_capsule = 0u64;
        // SAFETY: valid out-pointers; without Python the object is never touched.
        unsafe {
            let rc = rmm_strided_view_from_dlpack_capsule(std::ptr::null_mut(), &mut v, &mut e);
            assert_eq!(rc, RMM_ERROR_INVALID_ARGUMENT);
            let rc = rmm_strided_view_from_dlpack_capsule(
                (&mut not_a_capsule as *mut u64).cast(),
                &mut v,
                &mut e,
            );
            assert_eq!(rc, RMM_ERROR_UNSUPPORTED, "{}", e.message());
        }
        assert_eq!(v.generation, 0);
    }

    #[test]
    fn parts_to_device_and_export_round_trip() {
        let data = [1.5f64, 2.5, 3.5];
        let shape = [3i64];
        let mut v = rmm_strided_view::EMPTY;
        let mut d = rmm_strided_view::EMPTY;
        let mut e = rmm_error::new();
        // SAFETY: valid arrays and out-pointers; `data` outlives the views.
        unsafe {
            let fmt = c"<f8";
            let rc = rmm_strided_view_from_parts(
                data.as_ptr().cast(),
                1,
                shape.as_ptr(),
                std::ptr::null(),
                fmt.as_ptr(),
                device_type::CPU,
                0,
                true,
                &mut v,
                &mut e,
            );
            assert_eq!(rc, RMM_OK, "{}", e.message());
            assert_eq!(*v.strides, 1);
            assert!(v.readonly && v.owner.is_null());
            let bad = c"<f3";
            let rc = rmm_strided_view_from_parts(
                data.as_ptr().cast(),
                1,
                shape.as_ptr(),
                std::ptr::null(),
                bad.as_ptr(),
                device_type::CPU,
                0,
                true,
                &mut d,
                &mut e,
            );
            assert_eq!(rc, RMM_ERROR_INVALID_ARGUMENT);
            if rmm_core::cuda::is_host_mode() {
                let mr = AnyResource::new(rmm_core::mr::SystemMemoryResource::new());
                let rc = rmm_strided_view_to_device(
                    &v,
                    mr.borrow_handle(),
                    std::ptr::null_mut(),
                    &mut d,
                    &mut e,
                );
                assert_eq!(rc, RMM_OK, "{}", e.message());
                let dev = &*d.device_copy;
                assert_eq!(*dev.shape, 3);
                assert_eq!(rmm_strided_view_release(&mut d, &mut e), RMM_OK);
            }
            let mut t = std::ptr::null_mut();
            assert_eq!(
                rmm_strided_view_to_dlpack_versioned(&v, &mut t, &mut e),
                RMM_OK
            );
            assert_eq!(rmm_strided_view_release(&mut v, &mut e), RMM_OK);
            assert_eq!((*t).dl_tensor.ndim, 1);
            assert_eq!((*t).flags & 1, 1, "read-only is exported");
            ((*t).deleter.unwrap())(t);
            assert_eq!(
                rmm_strided_view_to_dlpack_versioned(&v, &mut t, &mut e),
                RMM_ERROR_INVALID_ARGUMENT
            );
            assert!(t.is_null());
        }
    }
}
