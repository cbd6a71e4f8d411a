//! Native call stacks for the recorder: return addresses captured with `backtrace`, each distinct
//! address symbolized once (symbolizing costs milliseconds; a program allocates from few places),
//! and each distinct stack built once and shared (the same call site gives the same `Stack`, which
//! the pickle then writes once).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::event::{Frame, Stack};

/// Frames deeper than this are left out.
const MAX_FRAMES: usize = 64;

/// Distinct stacks kept at most; the cache starts over beyond (a program with more call sites
/// than this pays for building stacks again, not for memory).
const MAX_STACKS: usize = 1 << 16;

#[derive(Default)]
struct Cache {
    symbols: HashMap<usize, Arc<[Frame]>>,
    stacks: HashMap<Vec<usize>, Stack>,
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);

/// The calling thread's stack, innermost first, without the recorder's own frames.
pub(super) fn capture() -> Stack {
    let mut ips = Vec::with_capacity(MAX_FRAMES);
    backtrace::trace(|frame| {
        ips.push(frame.ip() as usize);
        ips.len() < MAX_FRAMES
    });
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = cache.get_or_insert_with(Cache::default);
    if let Some(stack) = cache.stacks.get(&ips) {
        return stack.clone();
    }
    let mut frames = Vec::with_capacity(ips.len());
    for &ip in &ips {
        let resolved = cache.symbols.entry(ip).or_insert_with(|| resolve(ip));
        frames.extend(resolved.iter().cloned());
    }
    // The recorder's own frames (capture, record_*) and the adaptor's are noise for a reader.
    let first_caller = frames
        .iter()
        .position(|f| !is_recorder_frame(&f.name))
        .unwrap_or(0);
    frames.drain(..first_caller);
    let stack: Stack = frames.into();
    if cache.stacks.len() >= MAX_STACKS {
        cache.stacks.clear();
    }
    cache.stacks.insert(ips, stack.clone());
    stack
}

fn is_recorder_frame(name: &str) -> bool {
    const RECORDER: [&str; 5] = [
        "backtrace::",
        "rmm_core::timeline::native::",
        "rmm_core::timeline::caller_stack",
        "rmm_core::timeline::record_",
        "rmm_core::timeline::event",
    ];
    RECORDER.iter().any(|p| name.starts_with(p)) || name.contains("RecordingResourceAdaptor")
}

fn resolve(ip: usize) -> Arc<[Frame]> {
    let mut out = Vec::new();
    backtrace::resolve(ip as *mut std::ffi::c_void, |symbol| {
        out.push(Frame {
            filename: symbol
                .filename()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "??".to_owned()),
            line: symbol.lineno().unwrap_or(0),
            name: symbol
                .name()
                .map(|n| format!("{n:#}"))
                .unwrap_or_else(|| format!("{ip:#x}")),
        });
    });
    if out.is_empty() {
        out.push(Frame {
            filename: "??".to_owned(),
            line: 0,
            name: format!("{ip:#x}"),
        });
    }
    out.into()
}
