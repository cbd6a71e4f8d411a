//! The memory timeline over the process registry: [`start_recording`] turns the recorder on and
//! puts a [`RecordingResourceAdaptor`] over each device's resource (unless one is there), so that
//! every allocation any language makes from the registry is recorded; [`stop_recording`] turns it
//! off and puts back the resources it wrapped (those still current), so a stopped recorder costs
//! nothing. In a binary whose registry routes to a loaded librmm, these calls go to librmm's
//! recorder (`rmm_timeline_*`), the one that sees the process's allocations.

use std::ffi::{c_char, c_int, CString};
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use crate::cuda::{self, DeviceId};
use crate::error::{Error, Result};
use crate::mr::RecordingResourceAdaptor;
use crate::resource::status::rmm_error;
use crate::resource::{downcast, AnyResource};
use crate::timeline::{self, Format, Options, Snapshot};

use super::{owner_table, per_device_resource, set_per_device_resource, OwnerTable};

/// `rmm_timeline_start` flag: capture native stacks ([`Options::native_stacks`]).
pub const RMM_TIMELINE_NATIVE_STACKS: u32 = 1;
/// `rmm_timeline_start` flag: forget what was recorded before ([`Options::clear`]).
pub const RMM_TIMELINE_CLEAR: u32 = 2;
/// Snapshot format code: pickle.
pub const RMM_TIMELINE_FORMAT_PICKLE: c_int = 0;
/// Snapshot format code: JSON.
pub const RMM_TIMELINE_FORMAT_JSON: c_int = 1;
/// Snapshot format code: RMM's CSV log.
pub const RMM_TIMELINE_FORMAT_CSV: c_int = 2;

/// The C code of a format.
pub fn format_code(format: Format) -> c_int {
    match format {
        Format::Pickle => RMM_TIMELINE_FORMAT_PICKLE,
        Format::Json => RMM_TIMELINE_FORMAT_JSON,
        Format::ReplayLog => RMM_TIMELINE_FORMAT_CSV,
    }
}

/// The format of a C code.
pub fn format_of_code(code: c_int) -> Option<Format> {
    match code {
        RMM_TIMELINE_FORMAT_PICKLE => Some(Format::Pickle),
        RMM_TIMELINE_FORMAT_JSON => Some(Format::Json),
        RMM_TIMELINE_FORMAT_CSV => Some(Format::ReplayLog),
        _ => None,
    }
}

/// The adaptors [`start_recording`] installed: (device, the adaptor).
static INSTALLED: Mutex<Vec<(DeviceId, AnyResource)>> = Mutex::new(Vec::new());

fn devices() -> Result<Vec<DeviceId>> {
    if cuda::is_host_mode() {
        Ok(vec![0])
    } else {
        Ok((0..cuda::device_count()?).collect())
    }
}

type StartFn = unsafe extern "C" fn(u64, u32, *const c_char, *mut rmm_error) -> c_int;
type StopFn = unsafe extern "C" fn(*mut rmm_error) -> c_int;
type SnapshotFn = unsafe extern "C" fn(c_int, *mut *mut u8, *mut usize, *mut rmm_error) -> c_int;
type FreeBytesFn = unsafe extern "C" fn(*mut u8, usize);

/// The loaded owner's table when this copy routes to it.
fn owner() -> Option<&'static OwnerTable> {
    owner_table().filter(|t| t.library != 0)
}

/// Calls the owner's `name` (see [`super::owner::ask`]).
fn owner_call<F: Copy>(
    table: &OwnerTable,
    name: &'static std::ffi::CStr,
    call: impl FnOnce(F, *mut rmm_error) -> c_int,
) -> Result<()> {
    // SAFETY: every caller names `F` as the type `rmm_c.h` declares for `name`.
    unsafe { super::owner::ask(table, name, call) }
}

fn path_cstring(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::invalid(format!("{}: a path with a NUL byte", path.display())))
}

/// Turns the process's recorder on and makes sure each device's resource is recorded.
///
/// # Errors
/// [`Error::InvalidArgument`] for `max_entries` of 0 or a `dump_on_oom` path with a NUL byte;
/// registry errors.
pub fn start_recording(options: &Options) -> Result<()> {
    if let Some(table) = owner() {
        let mut flags = 0;
        if options.native_stacks {
            flags |= RMM_TIMELINE_NATIVE_STACKS;
        }
        if options.clear {
            flags |= RMM_TIMELINE_CLEAR;
        }
        let path = options
            .dump_on_oom
            .as_deref()
            .map(path_cstring)
            .transpose()?;
        let path_ptr = path.as_ref().map_or(std::ptr::null(), |p| p.as_ptr());
        return owner_call::<StartFn>(table, c"rmm_timeline_start", |f, err| {
            // SAFETY: `path_ptr` is null or a NUL-terminated string alive for the call.
            unsafe { f(options.max_entries as u64, flags, path_ptr, err) }
        });
    }
    timeline::start(options.clone())?;
    let mut installed = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
    for device in devices()? {
        let current = per_device_resource(device)?;
        if let Some(recording) = downcast::<RecordingResourceAdaptor>(&current) {
            recording.note_segments();
            continue;
        }
        let _on_device = (!cuda::is_host_mode())
            .then(|| cuda::DeviceGuard::new(device))
            .transpose()?;
        let adaptor = AnyResource::new(RecordingResourceAdaptor::new(current));
        set_per_device_resource(device, adaptor.clone())?;
        installed.push((device, adaptor));
    }
    Ok(())
}

/// Turns the process's recorder off and puts back the resources [`start_recording`] wrapped, on the
/// devices whose resource is still that adaptor. What was recorded stays for [`snapshot`].
///
/// # Errors
/// Registry errors.
pub fn stop_recording() -> Result<()> {
    if let Some(table) = owner() {
        return owner_call::<StopFn>(table, c"rmm_timeline_stop", |f, err| {
            // SAFETY: a valid error out-pointer.
            unsafe { f(err) }
        });
    }
    timeline::stop();
    let installed: Vec<_> =
        std::mem::take(&mut *INSTALLED.lock().unwrap_or_else(PoisonError::into_inner));
    for (device, adaptor) in installed {
        if per_device_resource(device)?.ptr_eq(&adaptor) {
            if let Some(recording) = downcast::<RecordingResourceAdaptor>(&adaptor) {
                set_per_device_resource(device, recording.upstream().clone())?;
            }
        }
    }
    Ok(())
}

/// True while the process's recorder is on.
pub fn is_recording() -> bool {
    if let Some(table) = owner() {
        type IsRecordingFn = unsafe extern "C" fn() -> c_int;
        // SAFETY: the type rmm_c.h declares.
        if let Some(f) = unsafe { table.symbol::<IsRecordingFn>(c"rmm_timeline_is_recording") } {
            // SAFETY: takes nothing, returns an int.
            return unsafe { f() } != 0;
        }
        return false;
    }
    timeline::is_recording()
}

/// The process recorder's snapshot in `format`, as bytes.
///
/// # Errors
/// Errors of the owner's `rmm_timeline_snapshot`.
pub fn snapshot_bytes(format: Format) -> Result<Vec<u8>> {
    if let Some(table) = owner() {
        let mut data: *mut u8 = std::ptr::null_mut();
        let mut len = 0usize;
        owner_call::<SnapshotFn>(table, c"rmm_timeline_snapshot", |f, err| {
            // SAFETY: valid out-pointers.
            unsafe { f(format_code(format), &mut data, &mut len, err) }
        })?;
        let bytes = if data.is_null() {
            Vec::new()
        } else {
            // SAFETY: the owner wrote `len` bytes at `data`, which stay until freed below.
            unsafe { std::slice::from_raw_parts(data, len) }.to_vec()
        };
        // SAFETY: the type rmm_c.h declares; `data`/`len` are what the owner handed out.
        if let Some(free) = unsafe { table.symbol::<FreeBytesFn>(c"rmm_timeline_bytes_free") } {
            // SAFETY: as above, freed once.
            unsafe { free(data, len) };
        }
        return Ok(bytes);
    }
    Ok(timeline::snapshot().to_bytes(format))
}

/// The process recorder's snapshot.
///
/// # Errors
/// As for [`snapshot_bytes`]; a snapshot from the owner that does not read back.
pub fn snapshot() -> Result<Snapshot> {
    if owner().is_some() {
        let bytes = snapshot_bytes(Format::Pickle)?;
        return Snapshot::from_pickle(&bytes).map_err(|e| Error::invalid(e.to_string()));
    }
    Ok(timeline::snapshot())
}

/// Writes the process recorder's snapshot to `path`, in the format its extension names
/// (`.pickle`/`.pkl`, `.json`, `.csv`).
///
/// # Errors
/// [`Error::InvalidArgument`] for an unknown extension or a file that cannot be written.
pub fn dump_snapshot(path: &Path) -> Result<()> {
    let format = Format::from_path(path).ok_or_else(|| {
        Error::invalid(format!(
            "{}: unknown snapshot format (use .pickle, .json or .csv)",
            path.display()
        ))
    })?;
    let bytes = snapshot_bytes(format)?;
    std::fs::write(path, bytes).map_err(|e| Error::invalid(format!("{}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::Stream;
    use crate::resource::MemoryResource;
    use crate::timeline::TraceAction;

    #[test]
    fn start_wraps_the_current_resource_and_stop_puts_it_back() {
        let _registry = crate::registry::process_registry_test_lock();
        let _serial = timeline::test_lock();
        if owner().is_some() {
            return;
        }
        let before = per_device_resource(0).unwrap();
        start_recording(&Options {
            clear: true,
            ..Options::default()
        })
        .unwrap();
        let during = per_device_resource(0).unwrap();
        assert_eq!(during.name(), "recording_resource_adaptor");
        assert!(MemoryResource::upstream(&during).is_some_and(|u| u.ptr_eq(&before)));
        // A second start keeps the one adaptor.
        start_recording(&Options::default()).unwrap();
        assert!(per_device_resource(0).unwrap().ptr_eq(&during));

        let p = during.allocate(Stream::DEFAULT, 4096, 256).unwrap();
        let s = snapshot().unwrap();
        stop_recording().unwrap();
        assert!(!is_recording());
        assert!(per_device_resource(0).unwrap().ptr_eq(&before));
        // SAFETY: allocated above with these arguments.
        unsafe { during.deallocate(Stream::DEFAULT, p, 4096, 256).unwrap() };

        assert!(s.segments.iter().any(|seg| seg.address == p as u64));
        assert!(s.device_traces[0]
            .iter()
            .any(|e| e.action == TraceAction::Alloc && e.addr == p as u64));

        let dir = std::env::temp_dir().join(format!("rmm-recording-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["s.pickle", "s.json", "s.csv"] {
            dump_snapshot(&dir.join(name)).unwrap();
        }
        assert!(Snapshot::read(&dir.join("s.pickle")).is_ok());
        assert!(Snapshot::read(&dir.join("s.json")).is_ok());
        assert!(dump_snapshot(&dir.join("s.txt")).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
