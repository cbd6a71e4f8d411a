//! librmm: the C++ binding and the process-wide owner of the registry and the C ABI.
//!
//! This crate defines and exports the C entry points of `include/rmm_rs/rmm_c.h` (`#[no_mangle]` at
//! each definition), one file per area. They are thin: the logic lives in rmm-core, and the handle
//! protocol they share (handles, vtables, status codes, panic guards, out-pointer checks) in
//! `rmm_core::resource`. Because librmm links its own copy of rmm-core, the registry static of that
//! copy is the process's one registry (see `rmm_core::registry`).
//!
//! The header is hand-written (users read its comments); `header_check.rs` (a test) fails when it
//! and the definitions here drift apart.
//!
//! The header-only C++ API (`include/rmm/**`, RMM 26.x names) is built on this ABI.

#![allow(non_camel_case_types)] // the C types keep their C names

mod abi;
mod buffers;
mod capsules;
mod debug_log;
mod devices;
mod experimental;
mod handles;
mod process_exit;
mod registry;
mod resources;
mod streams;
mod timeline;
mod torch_allocator;
mod tracking_report;
mod views;

#[cfg(test)]
mod bad_input_table;
#[cfg(test)]
mod header_check;
#[cfg(test)]
mod tests;
