//! The replay tool's log parser: any bytes give events or a `ParseError`, never a panic; a parsed
//! log written back in RMM's format parses to the same events.
#![no_main]

use std::fmt::Write as _;

use libfuzzer_sys::fuzz_target;
use rmm_replay::log::{parse_bytes, Event, HEADER};

fn render(events: &[Event]) -> String {
    let timed = events.first().is_some_and(|e| e.time_us.is_some());
    let mut out = String::from(if timed { HEADER } else { "Thread,Action,Pointer,Size,Stream" });
    out.push('\n');
    for e in events {
        let _ = write!(out, "{},", e.thread);
        if let Some(t) = e.time_us {
            let _ = write!(out, "{:02}:{:02}:{:02}.{:06},", t / 3_600_000_000, t / 60_000_000 % 60, t / 1_000_000 % 60, t % 1_000_000);
        }
        let _ = writeln!(out, "{},{:#x},{},{:#x}", e.action, e.pointer, e.size, e.stream);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Ok(events) = parse_bytes(data) else { return };
    // Only logs whose events all have a time, or none, can be written back with one header.
    let timed = events.iter().filter(|e| e.time_us.is_some()).count();
    if timed != 0 && timed != events.len() {
        return;
    }
    // Times past a day cannot be written as HH:MM:SS.
    if events.iter().any(|e| e.time_us.is_some_and(|t| t >= 24 * 3_600_000_000)) {
        return;
    }
    let again = parse_bytes(render(&events).as_bytes()).expect("a rendered log parses");
    assert_eq!(again.len(), events.len());
    for (a, b) in events.iter().zip(&again) {
        assert_eq!((a.thread, a.time_us, a.action, a.pointer, a.size, a.stream), (b.thread, b.time_us, b.action, b.pointer, b.size, b.stream));
    }
});
