//! Helpers shared by several resources (RMM's `mr/detail/`): never part of the public API.

pub(crate) mod addr_map;
pub(crate) mod arena;
pub(crate) mod arena_impl;
mod arena_superblock;
pub(crate) mod core_calls;
pub(crate) mod driver;
pub(crate) mod fixed_list;
pub(crate) mod forward;
pub(crate) mod fragmentation;
pub(crate) mod free_list;
pub(crate) mod live_blocks;
pub(crate) mod live_set;
pub(crate) mod live_slot;
pub(crate) mod nvtx_bounds;
mod per_thread;
pub(crate) mod size_guard;
pub(crate) mod spin_lock;
pub(crate) mod stream_ordered;
pub(crate) mod virtual_range;
