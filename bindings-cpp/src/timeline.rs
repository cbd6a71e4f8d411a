//! The memory timeline's C functions (`rmm_timeline_*` in `rmm_c.h`): start and stop the
//! process's recorder (which puts a `recording_resource_adaptor` over each device's resource),
//! its snapshot as bytes or a file, and the stack provider through which a binding (Python) gives
//! its callers' frames. The logic is `rmm_core::registry::recording` and `rmm_core::timeline`.

use std::ffi::{c_char, c_int, c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use rmm_core::error::{Error, Result};
use rmm_core::registry::recording::{
    self, format_of_code, RMM_TIMELINE_CLEAR, RMM_TIMELINE_NATIVE_STACKS,
};
use rmm_core::resource::guard::{guarded, put};
use rmm_core::resource::rmm_error;
use rmm_core::timeline::{self, Frame, Options, Stack};

/// `void (*)(void* sink_context, const char* filename, uint32_t line, const char* name)`: takes one
/// frame of a caller's stack, innermost first.
pub type rmm_timeline_frame_sink =
    Option<unsafe extern "C" fn(*mut c_void, *const c_char, u32, *const c_char)>;

/// `int (*)(void* context, rmm_timeline_frame_sink sink, void* sink_context)`: gives the calling
/// thread's stack to `sink`, one call per frame, and returns 1, or returns 0 when it has none.
pub type rmm_timeline_stack_fn =
    Option<unsafe extern "C" fn(*mut c_void, rmm_timeline_frame_sink, *mut c_void) -> c_int>;

/// A path from C.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
unsafe fn path_of<'a>(path: *const c_char, what: &str) -> Result<&'a Path> {
    if path.is_null() {
        return Err(Error::invalid(format!("{what}: the path is NULL")));
    }
    // SAFETY: caller contract.
    let bytes = unsafe { CStr::from_ptr(path) }.to_bytes();
    Ok(Path::new(OsStr::from_bytes(bytes)))
}

/// Turns the process's recorder on, keeping the last `max_entries` events (at least 1) and
/// putting a `recording_resource_adaptor` over each device's resource that has none.
/// `flags`: `RMM_TIMELINE_NATIVE_STACKS`, `RMM_TIMELINE_CLEAR`. `dump_on_oom`: NULL, or a file
/// (`.pickle`, `.json`, `.csv`) the snapshot is written to at the first out-of-memory failure.
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for `max_entries` of 0 or unknown flags.
///
/// # Safety
/// `dump_on_oom` is NULL or NUL-terminated; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_timeline_start(
    max_entries: u64,
    flags: u32,
    dump_on_oom: *const c_char,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            if flags & !(RMM_TIMELINE_NATIVE_STACKS | RMM_TIMELINE_CLEAR) != 0 {
                return Err(Error::invalid(format!(
                    "rmm_timeline_start: unknown flags {flags:#x}"
                )));
            }
            let dump_on_oom = if dump_on_oom.is_null() {
                None
            } else {
                Some(path_of(dump_on_oom, "rmm_timeline_start")?.to_owned())
            };
            recording::start_recording(&Options {
                max_entries: usize::try_from(max_entries).unwrap_or(usize::MAX),
                native_stacks: flags & RMM_TIMELINE_NATIVE_STACKS != 0,
                clear: flags & RMM_TIMELINE_CLEAR != 0,
                dump_on_oom,
            })
        })
    }
}

/// Turns the recorder off and puts back the resources `rmm_timeline_start` wrapped (where they are
/// still current); what was recorded stays for `rmm_timeline_snapshot`.
///
/// # Safety
/// `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_timeline_stop(err: *mut rmm_error) -> c_int {
    // SAFETY: caller contract.
    unsafe { guarded(err, recording::stop_recording) }
}

/// 1 while the recorder is on, else 0.
#[no_mangle]
pub extern "C" fn rmm_timeline_is_recording() -> c_int {
    c_int::from(recording::is_recording())
}

/// Forgets every recorded event, live allocation and segment.
#[no_mangle]
pub extern "C" fn rmm_timeline_clear() {
    timeline::clear();
}

/// The snapshot in `format` (`RMM_TIMELINE_FORMAT_PICKLE`, `_JSON`, `_CSV`): `*data` (give it back
/// with `rmm_timeline_bytes_free(*data, *length)`) and `*length`.
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for an unknown format or a NULL out-pointer.
///
/// # Safety
/// `data`, `length` and `err` are NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_timeline_snapshot(
    format: c_int,
    data: *mut *mut c_void,
    length: *mut usize,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            let format = format_of_code(format).ok_or_else(|| {
                Error::invalid(format!("rmm_timeline_snapshot: unknown format {format}"))
            })?;
            if data.is_null() || length.is_null() {
                return Err(Error::invalid("rmm_timeline_snapshot: a NULL out-pointer"));
            }
            let bytes = recording::snapshot_bytes(format)?.into_boxed_slice();
            let len = bytes.len();
            let ptr = Box::into_raw(bytes).cast::<c_void>();
            put(length, len, "length")?;
            put(data, ptr, "data")
        })
    }
}

/// Gives back the bytes of `rmm_timeline_snapshot`. NULL is ignored.
///
/// # Safety
/// `data` and `length` are what one `rmm_timeline_snapshot` gave, given back once.
#[no_mangle]
pub unsafe extern "C" fn rmm_timeline_bytes_free(data: *mut c_void, length: usize) {
    if data.is_null() {
        return;
    }
    let slice = std::ptr::slice_from_raw_parts_mut(data.cast::<u8>(), length);
    // SAFETY: caller contract: a boxed slice of `length` bytes from rmm_timeline_snapshot.
    drop(unsafe { Box::from_raw(slice) });
}

/// Writes the snapshot to `path` in the format its extension names (`.pickle`/`.pkl`, `.json`,
/// `.csv`).
///
/// # Errors
/// `RMM_ERROR_INVALID_ARGUMENT` for a NULL path, an unknown extension or a file that cannot be
/// written.
///
/// # Safety
/// `path` is NULL or NUL-terminated; `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_timeline_dump(path: *const c_char, err: *mut rmm_error) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            recording::dump_snapshot(path_of(path, "rmm_timeline_dump")?)
        })
    }
}

/// A stack provider from C: the function and its context.
struct CProvider {
    provide: unsafe extern "C" fn(*mut c_void, rmm_timeline_frame_sink, *mut c_void) -> c_int,
    context: usize,
}

unsafe extern "C" fn collect_frame(
    sink_context: *mut c_void,
    filename: *const c_char,
    line: u32,
    name: *const c_char,
) {
    let text = |p: *const c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: the provider passes NUL-terminated strings alive for the call.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    // SAFETY: `sink_context` is the `Vec<Frame>` that `CProvider::stack` passes, alive for the call.
    let frames = unsafe { &mut *sink_context.cast::<Vec<Frame>>() };
    frames.push(Frame {
        filename: text(filename),
        line,
        name: text(name),
    });
}

impl CProvider {
    fn stack(&self) -> Option<Stack> {
        let mut frames: Vec<Frame> = Vec::new();
        let sink_context = std::ptr::from_mut(&mut frames).cast::<c_void>();
        // A panic must not unwind into the provider's C frames.
        let gave = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: the provider's contract (rmm_timeline_set_stack_provider); `collect_frame`
            // matches the sink type and `sink_context` outlives the call.
            unsafe {
                (self.provide)(
                    self.context as *mut c_void,
                    Some(collect_frame),
                    sink_context,
                )
            }
        }))
        .unwrap_or(0);
        (gave != 0).then(|| frames.into())
    }
}

/// Installs `provide` (with `context`) as the function that gives the caller's stack of each
/// recorded event, or removes the provider when `provide` is NULL. It runs on the allocating
/// thread, inside the allocation, while the recorder is on; it must not allocate from rmm.
///
/// # Safety
/// `provide` is NULL or callable from any thread with `context` until it is replaced or removed;
/// `err` is NULL or valid for writes.
#[no_mangle]
pub unsafe extern "C" fn rmm_timeline_set_stack_provider(
    provide: rmm_timeline_stack_fn,
    context: *mut c_void,
    err: *mut rmm_error,
) -> c_int {
    // SAFETY: caller contract.
    unsafe {
        guarded(err, || {
            let provider = provide.map(|provide| {
                let c = CProvider {
                    provide,
                    context: context as usize,
                };
                Arc::new(move || c.stack()) as timeline::StackProvider
            });
            timeline::set_stack_provider(provider);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmm_core::resource::status::RMM_OK;
    use rmm_core::timeline::Snapshot;

    unsafe extern "C" fn two_frames(
        _context: *mut c_void,
        sink: rmm_timeline_frame_sink,
        sink_context: *mut c_void,
    ) -> c_int {
        let sink = sink.expect("a sink");
        // SAFETY: literals are NUL-terminated; the sink's contract.
        unsafe {
            sink(sink_context, c"inner.py".as_ptr(), 3, c"leaf".as_ptr());
            sink(sink_context, c"outer.py".as_ptr(), 9, c"main".as_ptr());
        }
        1
    }

    #[test]
    fn start_allocate_snapshot_stop_through_the_c_functions() {
        let _registry = rmm_core::registry::process_registry_test_lock();
        let _serial = timeline::test_lock();
        let mut err = rmm_error::new();
        // SAFETY: valid arguments and out-pointers throughout.
        unsafe {
            assert_eq!(
                rmm_timeline_set_stack_provider(Some(two_frames), std::ptr::null_mut(), &mut err),
                RMM_OK
            );
            assert_eq!(
                rmm_timeline_start(1000, RMM_TIMELINE_CLEAR, std::ptr::null(), &mut err),
                RMM_OK
            );
            assert_eq!(rmm_timeline_is_recording(), 1);
            let mr = rmm_core::registry::current_resource().unwrap();
            let p =
                rmm_core::MemoryResource::allocate(&mr, rmm_core::cuda::Stream::DEFAULT, 777, 256)
                    .unwrap();
            let (mut data, mut len) = (std::ptr::null_mut(), 0usize);
            assert_eq!(
                rmm_timeline_snapshot(0, &mut data, &mut len, &mut err),
                RMM_OK
            );
            let s =
                Snapshot::from_pickle(std::slice::from_raw_parts(data.cast::<u8>(), len)).unwrap();
            rmm_timeline_bytes_free(data, len);
            rmm_core::MemoryResource::deallocate(&mr, rmm_core::cuda::Stream::DEFAULT, p, 777, 256)
                .unwrap();
            assert_eq!(rmm_timeline_stop(&mut err), RMM_OK);
            assert_eq!(
                rmm_timeline_set_stack_provider(None, std::ptr::null_mut(), &mut err),
                RMM_OK
            );
            let entry = s.device_traces[0]
                .iter()
                .find(|e| e.addr == p as u64)
                .expect("the allocation");
            assert_eq!(entry.frames.len(), 2);
            assert_eq!(
                (entry.frames[0].filename.as_str(), entry.frames[0].line),
                ("inner.py", 3)
            );

            assert_ne!(
                rmm_timeline_snapshot(9, &mut data, &mut len, &mut err),
                RMM_OK
            );
            assert_ne!(
                rmm_timeline_snapshot(0, std::ptr::null_mut(), &mut len, &mut err),
                RMM_OK
            );
            assert_ne!(rmm_timeline_start(0, 0, std::ptr::null(), &mut err), RMM_OK);
            assert_ne!(
                rmm_timeline_start(1, 0x100, std::ptr::null(), &mut err),
                RMM_OK
            );
            assert_ne!(rmm_timeline_dump(std::ptr::null(), &mut err), RMM_OK);
            assert_ne!(
                rmm_timeline_dump(c"/nonexistent-dir/x.pickle".as_ptr(), &mut err),
                RMM_OK
            );
            assert_eq!(rmm_timeline_is_recording(), 0);
        }
    }
}
