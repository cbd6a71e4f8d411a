//! `rmm-replay`: replays RMM memory-event logs against an rmm-rs resource.
//!
//! This first part parses the logs ([`log`]); the replay itself follows.

pub mod log;
