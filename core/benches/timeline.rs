//! What the memory timeline costs per event (docs/design/timeline.md): allocate + free of 256
//! bytes through a pool, directly and through a `RecordingResourceAdaptor` with the recorder off,
//! on, on with a stack provider (as Python gives its frames), and on with native stacks. Each
//! iteration is one pair (two events when recording); criterion reports ns per pair.
//!
//! Runs anywhere: the pool sits on host memory, as the recorder's cost does not depend on the
//! device (a mutex, a ring push, a clock read and a map update per event).

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use rmm_core::cuda::Stream;
use rmm_core::mr::{PoolMemoryResource, RecordingResourceAdaptor, SystemMemoryResource};
use rmm_core::timeline::{self, Frame, Options, Stack};
use rmm_core::{AnyResource, MemoryResource};

fn pair(mr: &dyn MemoryResource) {
    let p = mr.allocate(Stream::DEFAULT, 256, 256).unwrap();
    // SAFETY: allocated just above with these arguments.
    unsafe { mr.deallocate(Stream::DEFAULT, p, 256, 256).unwrap() };
}

fn bench(c: &mut Criterion) {
    let pool = PoolMemoryResource::new(
        AnyResource::new(SystemMemoryResource::new()),
        Some(64 << 20),
        None,
    )
    .unwrap();
    let recorded = RecordingResourceAdaptor::new(pool.clone());
    let mut g = c.benchmark_group("timeline_pair256");
    timeline::stop();
    g.bench_function("pool", |b| b.iter(|| pair(&pool)));
    g.bench_function("recording_off", |b| b.iter(|| pair(&recorded)));
    let on = Options {
        max_entries: 100_000,
        clear: true,
        ..Options::default()
    };
    timeline::start(on.clone()).unwrap();
    g.bench_function("recording_on", |b| b.iter(|| pair(&recorded)));
    let stack: Stack = Arc::from(
        (0..12)
            .map(|i| Frame {
                filename: format!("model_{i}.py"),
                line: i,
                name: format!("layer_{i}"),
            })
            .collect::<Vec<_>>(),
    );
    timeline::set_stack_provider(Some(Arc::new(move || Some(stack.clone()))));
    g.bench_function("recording_on_given_stack", |b| b.iter(|| pair(&recorded)));
    timeline::set_stack_provider(None);
    timeline::start(Options {
        native_stacks: true,
        ..on
    })
    .unwrap();
    g.bench_function("recording_on_native_stack", |b| b.iter(|| pair(&recorded)));
    timeline::stop();
    timeline::clear();
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
