//! The registry owner (librmm) as seen from the C ABI, one concern per file:
//! - [`serve`]: the entry points every registry owner exports (librmm exports them by name);
//! - discovery ([`find_loaded_owner`], [`OwnerTable`]): finding a loaded owner and its entry
//!   points, the only `dlopen`/`dlsym` of librmm in rmm;
//! - the owner client ([`resource_kind`], [`statistics_counters`], [`pool_size`], ...): what a
//!   resource that the owner made is, and its state, for a Rust binary with its own copy of rmm-core;
//! - [`rmm_counter`]: the C struct of a statistics counter that the owner's accessors write.
//!
//! Which copy of rmm-core acquired a strided view (view domains) lives with the views, in
//! [`crate::view::domain`].

mod client;
mod counter;
mod discovery;
pub mod serve;

pub use client::{
    pool_size, pop_counters, push_counters, resource_kind, resource_upstream, statistics_counters,
};
pub use counter::rmm_counter;
pub use discovery::{
    find_loaded_owner, GetPerDeviceFn, OwnerTable, ResetPerDeviceFn, SetPerDeviceFn, OWNER_SONAME,
};
