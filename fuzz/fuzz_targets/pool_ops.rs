//! Operation sequences on a pool (the stream-ordered engine) over a simulated device, with small
//! per-thread caches so every shard path runs; the pool's books must match the live allocations
//! after every step, and a trim after the last free gives everything back.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use rmm_core::mr::{PoolMemoryResource, SimulatedMemoryResource};
use rmm_core::AnyResource;
use rmm_fuzz::{granules, run, Hooks, Live};

struct Pool<'a>(&'a PoolMemoryResource);

impl Hooks for Pool<'_> {
    fn check(&self, live: &BTreeMap<usize, Live>) {
        let s = self.0.statistics();
        assert_eq!(s.bytes_used, granules(live), "{s:?}");
        assert_eq!(s.bytes_free + s.bytes_used, s.pool_size, "{s:?}");
    }
    fn action(&self, n: u8) {
        if n % 4 == 0 {
            self.0.release_unused().unwrap();
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let device = SimulatedMemoryResource::new(1 << 30).unwrap();
    let maximum = if data.first().is_some_and(|b| b % 2 == 0) { Some(64 << 20) } else { None };
    let pool = PoolMemoryResource::new(AnyResource::new(device.clone()), Some(1 << 20), maximum).unwrap();
    run(&pool, &Pool(&pool), data);
    pool.release_unused().unwrap();
    assert_eq!(pool.pool_size(), 0);
    drop(pool);
    assert_eq!(device.usage().allocated_bytes, 0);
});
