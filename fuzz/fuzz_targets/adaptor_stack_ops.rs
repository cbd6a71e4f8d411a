//! Operation sequences on statistics over limiting over tracking over logging over binning (bins
//! of 256 B to 64 KiB over a pool, larger requests to the pool): every layer's counters must agree
//! with the live allocations after every step, refusals included.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use rmm_core::mr::{
    BinningMemoryResource, LimitingResourceAdaptor, LoggingResourceAdaptor, PoolMemoryResource, SimulatedMemoryResource,
    StatisticsResourceAdaptor, TrackingResourceAdaptor,
};
use rmm_core::AnyResource;
use rmm_fuzz::{granules, run, Hooks, Live};

struct Stack {
    stats: StatisticsResourceAdaptor,
    limiting: LimitingResourceAdaptor,
    tracking: TrackingResourceAdaptor,
    pool: PoolMemoryResource,
}

impl Hooks for Stack {
    fn check(&self, live: &BTreeMap<usize, Live>) {
        let exact: usize = live.values().map(|b| b.bytes).sum();
        let (bytes, allocations) = self.stats.counters();
        assert_eq!(bytes.value, exact as i64, "statistics");
        assert_eq!(allocations.value, live.len() as i64, "statistics allocations");
        assert_eq!(self.tracking.allocated_bytes(), exact, "tracking");
        assert_eq!(self.tracking.outstanding_allocations().len(), live.len(), "tracking allocations");
        assert_eq!(self.limiting.allocated_bytes(), granules(live), "limiting");
        let s = self.pool.statistics();
        assert_eq!(s.bytes_free + s.bytes_used, s.pool_size, "{s:?}");
    }
    fn action(&self, n: u8) {
        if n % 4 == 0 {
            self.pool.release_unused().unwrap();
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let device = SimulatedMemoryResource::new(1 << 30).unwrap();
    let pool = PoolMemoryResource::new(AnyResource::new(device.clone()), Some(1 << 20), None).unwrap();
    let binning = BinningMemoryResource::with_exponents(AnyResource::new(pool.clone()), 8, 16).unwrap();
    let logging = LoggingResourceAdaptor::with_writer(binning, std::io::sink()).unwrap();
    let tracking = TrackingResourceAdaptor::new(logging, false);
    let limiting = LimitingResourceAdaptor::new(tracking.clone(), 512 << 20);
    let stats = StatisticsResourceAdaptor::new(limiting.clone());
    let stack = Stack { stats: stats.clone(), limiting, tracking, pool: pool.clone() };
    run(&stats, &stack, data);
    drop((stack, stats));
    pool.release_unused().unwrap();
    drop(pool);
    assert_eq!(device.usage().allocated_bytes, 0, "everything went back to the device");
});
