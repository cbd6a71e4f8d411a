//! `rmm-replay`: replays RMM memory-event logs against an rmm-rs resource.
//!
//! RMM's `logging_resource_adaptor` (and ours) writes every allocation and free to a CSV log.
//! This tool replays such a log, on a real GPU or on a simulated device of any size, and reports
//! what the resource made of it: peak live and reserved bytes, fragmentation, failures. It is RMM's
//! `REPLAY_BENCH`, with its known limits fixed:
//!
//! - the `Stream` column is honoured: each logged stream is replayed on a stream of its own
//!   ([`streams`]), where RMM replays everything on the default stream;
//! - the exit code means something: 0 when the resource served every event, 1 when an allocation
//!   failed, 2 for a bad log or bad arguments (RMM always exits 0);
//! - a failure names its log line, thread, stream, and the live and reserved bytes at that moment;
//! - the simulated device reuses freed memory and checks every free, where RMM's is a bump
//!   allocator that never frees;
//! - the global order of events is kept with one targeted wake-up per hand-over between threads,
//!   not a broadcast to all of them ([`replay`]);
//! - a malformed line is an error naming its line, never a crash; a free the log cannot explain
//!   is counted, not fatal.
//!
//! # Usage
//!
//! ```text
//! rmm-replay LOG [--resource NAME] [--simulate-gib N] [--json FILE] [--plot FILE.png] [--quiet]
//!
//! rmm-replay rmm_log.dev0.csv --simulate-gib 78 --resource pool --plot memory.png
//! rmm-replay rmm_log.dev0.csv --resource cuda_async --json report.json
//! ```
//!
//! Resources ([`resources::RESOURCES`]): `cuda`, `managed`, `cuda_async`, `system`, `simulated`,
//! and the sub-allocators `pool`, `arena`, `binning` (stacked on the GPU's `cuda` resource, or on
//! the simulated device).
//!
//! # As a library
//!
//! ```
//! use indicatif::ProgressBar;
//! use rmm_replay::{log, replay, resources, streams::StreamMap};
//! let events = log::parse(&b"Thread,Time,Action,Pointer,Size,Stream\n\
//!     1,09:00:00.000000,allocate,0x7f0000000000,1048576,0x0\n\
//!     2,09:00:00.000100,allocate,0x7f0000100000,1048576,0x7f00aa\n\
//!     1,09:00:00.000200,free,0x7f0000000000,1048576,0x0\n"[..])?;
//! let device = resources::setup(Some("simulated"), Some(1 << 30))?;
//! let streams = StreamMap::new(events.iter().map(|e| e.stream), &device.target)?;
//! let outcome = replay::replay(&events, &device, &streams, &ProgressBar::hidden())?;
//! assert_eq!(outcome.peak_live_bytes, 2 << 20);
//! assert_eq!(outcome.counts.leaked_allocations, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Modules: [`log`] parses, [`resources`] makes the resource (the factory table),
//! [`counting`] measures what it takes from its base, [`streams`] maps logged streams,
//! [`replay`] runs the threads, [`report`] and [`plot`] show the result, [`cli`] ties them together.

#![warn(missing_docs)]

pub mod cli;
pub mod counting;
pub mod log;
pub mod plot;
pub mod replay;
pub mod report;
pub mod resources;
pub mod streams;
