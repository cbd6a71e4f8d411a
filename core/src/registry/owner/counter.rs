//! `rmm_counter`, the C struct of a statistics counter, and its conversions to and from
//! [`Counter`]: what librmm's statistics accessors write and the owner client reads.

#![allow(non_camel_case_types)]

use crate::mr::statistics::Counter;

/// A statistics counter (`rmm_counter` in C; RMM's `statistics_resource_adaptor::counter`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct rmm_counter {
    /// The current amount.
    pub value: i64,
    /// The highest `value` reached.
    pub peak: i64,
    /// Everything ever added.
    pub total: i64,
}

impl From<Counter> for rmm_counter {
    fn from(c: Counter) -> Self {
        Self {
            value: c.value,
            peak: c.peak,
            total: c.total,
        }
    }
}

impl From<rmm_counter> for Counter {
    fn from(c: rmm_counter) -> Self {
        Counter {
            value: c.value,
            peak: c.peak,
            total: c.total,
        }
    }
}
