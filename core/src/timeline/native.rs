//! Native call stacks for the recorder: return addresses captured with `backtrace`, each distinct
//! address symbolized once (symbolizing costs milliseconds; a program allocates from few places).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::event::{Frame, Stack};

/// Frames deeper than this are left out.
const MAX_FRAMES: usize = 64;

static SYMBOLS: Mutex<Option<HashMap<usize, Arc<[Frame]>>>> = Mutex::new(None);

/// The calling thread's stack, innermost first, without the recorder's own frames.
pub(super) fn capture() -> Stack {
    let mut ips = Vec::with_capacity(MAX_FRAMES);
    backtrace::trace(|frame| {
        ips.push(frame.ip() as usize);
        ips.len() < MAX_FRAMES
    });
    let mut symbols = SYMBOLS.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = symbols.get_or_insert_with(HashMap::new);
    let mut frames = Vec::with_capacity(ips.len());
    for ip in ips {
        let resolved = cache.entry(ip).or_insert_with(|| resolve(ip));
        frames.extend(resolved.iter().cloned());
    }
    // The recorder's own frames (capture, record_*) and the adaptor's are noise for a reader.
    let first_caller = frames
        .iter()
        .position(|f| !is_recorder_frame(&f.name))
        .unwrap_or(0);
    frames.drain(..first_caller);
    frames.into()
}

fn is_recorder_frame(name: &str) -> bool {
    name.contains("rmm_core::timeline::")
        || name.contains("backtrace::")
        || name.contains("RecordingResourceAdaptor")
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
