//! Operation sequences on an arena over a simulated device (per-stream arenas, superblocks, the
//! global arena, defragmentation); its books must match the live allocations after every step.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use rmm_core::mr::{ArenaMemoryResource, ArenaOptions, SimulatedMemoryResource};
use rmm_core::AnyResource;
use rmm_fuzz::{granules, run, Hooks, Live};

struct Arena<'a>(&'a ArenaMemoryResource);

impl Hooks for Arena<'_> {
    fn check(&self, live: &BTreeMap<usize, Live>) {
        let s = self.0.stats();
        assert_eq!(s.used_bytes, granules(live), "{s:?}");
        assert_eq!(s.used_bytes + s.free_bytes, s.arena_size, "{s:?}");
    }
    fn action(&self, n: u8) {
        if n % 4 == 0 {
            self.0.defragment().unwrap();
        }
    }
    fn refuses(&self, _bytes: usize, alignment: usize) -> bool {
        alignment > 256
    }
}

fuzz_target!(|data: &[u8]| {
    let device = SimulatedMemoryResource::new(1 << 30).unwrap();
    let options = ArenaOptions::default().arena_size(64 << 20);
    let arena = ArenaMemoryResource::with_options(AnyResource::new(device.clone()), options).unwrap();
    run(&arena, &Arena(&arena), data);
    assert_eq!(arena.used_bytes(), 0);
    drop(arena);
    assert_eq!(device.usage().allocated_bytes, 0);
});
