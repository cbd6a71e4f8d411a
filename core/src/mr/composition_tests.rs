//! Every adaptor of `aligned`, `limiting`, `failure_callback`, `prefetch`, `thread_safe` and
//! `callback`, stacked over each other in random orders, over a simulated device and over host
//! memory, driven by long random allocate/free sequences.
//!
//! What must hold, at every step and at the end:
//! - live allocations never overlap (host memory: their first and last bytes keep their tags);
//! - every pointer is aligned as promised: the call's alignment, and the aligned adaptor's own for
//!   requests at or above its threshold;
//! - the limiting adaptor never counts more than its limit, and the only failures are out-of-memory;
//! - once everything is freed, everything is back upstream: the simulated device (or the host
//!   probe) has nothing live, the limit counter is 0 and the aligned adaptor tracks nothing.
//!
//! The failure callback frees a "ballast" block that was allocated straight from the base (like a
//! cache that spills), so retries happen inside the stacks too.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::sample::Index;

use crate::cuda::Stream;
use crate::mr::{
    AlignedResourceAdaptor, CallbackMemoryResource, FailureCallbackResourceAdaptor,
    LimitingResourceAdaptor, PrefetchResourceAdaptor, SimulatedMemoryResource,
    ThreadSafeResourceAdaptor,
};
use crate::testing::Probe;
use crate::{Access, AnyResource, MemoryResource};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
/// The largest alignment a call asks for; the callback layer asks its upstream for this much, since
/// its functions are not told the alignment of a request.
const MAX_CALL_ALIGNMENT: usize = 4096;
/// Random operations per property-test case.
const OPS_PER_CASE: usize = 2000;
/// Cases per property test (each test runs `CASES * OPS_PER_CASE` operations).
const CASES: u32 = 32;

#[derive(Clone, Debug)]
enum Layer {
    Aligned { alignment: usize, threshold: usize },
    Limiting { limit: usize },
    FailureCallback,
    Prefetch,
    ThreadSafe,
    Callback,
}

#[derive(Clone, Debug)]
enum Op {
    Alloc { bytes: usize, alignment: usize },
    Free(Index),
}

/// All six adaptors once each, in a random order (bottom first), with random parameters.
fn layers() -> impl Strategy<Value = Vec<Layer>> {
    (
        prop_oneof![Just(512usize), Just(4096), Just(64 * KIB)],
        prop_oneof![Just(0usize), Just(4 * KIB), Just(64 * KIB)],
        (1usize..=16).prop_map(|m| m * MIB),
    )
        .prop_flat_map(|(alignment, threshold, limit)| {
            Just(vec![
                Layer::Aligned {
                    alignment,
                    threshold,
                },
                Layer::Limiting { limit },
                Layer::FailureCallback,
                Layer::Prefetch,
                Layer::ThreadSafe,
                Layer::Callback,
            ])
            .prop_shuffle()
        })
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![1 => Just(0usize), 10 => 1usize..KIB, 6 => KIB..64 * KIB, 3 => 64 * KIB..MIB]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        6 => (size(), 0u32..=12).prop_map(|(bytes, shift)| Op::Alloc { bytes, alignment: 1 << shift }),
        4 => any::<Index>().prop_map(Op::Free),
    ];
    proptest::collection::vec(op, OPS_PER_CASE)
}

/// A stack of adaptors and handles on the pieces the checks look at.
struct Stack {
    top: AnyResource,
    base: AnyResource,
    limiting: LimitingResourceAdaptor,
    aligned: AlignedResourceAdaptor,
    ballast: Arc<Mutex<Option<usize>>>,
    ballast_bytes: usize,
    /// Host memory can be written: tag each allocation's first and last byte.
    writable: bool,
}

impl Stack {
    fn build(base: AnyResource, layers: &[Layer], ballast_bytes: usize) -> Stack {
        let ballast = Arc::new(Mutex::new(Some(
            base.allocate(Stream::DEFAULT, ballast_bytes, 256).unwrap() as usize,
        )));
        let mut top = base.clone();
        let (mut limiting, mut aligned) = (None, None);
        for layer in layers {
            top = match *layer {
                Layer::Aligned {
                    alignment,
                    threshold,
                } => {
                    let a =
                        AlignedResourceAdaptor::with_threshold(top, alignment, threshold).unwrap();
                    aligned = Some(a.clone());
                    AnyResource::new(a)
                }
                Layer::Limiting { limit } => {
                    let l = LimitingResourceAdaptor::new(top, limit);
                    limiting = Some(l.clone());
                    AnyResource::new(l)
                }
                Layer::FailureCallback => {
                    let (base, ballast) = (base.clone(), ballast.clone());
                    AnyResource::new(FailureCallbackResourceAdaptor::new(
                        top,
                        Arc::new(move |_bytes| match ballast.lock().unwrap().take() {
                            Some(p) => {
                                // SAFETY: the ballast came from `base` with these arguments.
                                unsafe {
                                    base.deallocate(
                                        Stream::DEFAULT,
                                        p as *mut u8,
                                        ballast_bytes,
                                        256,
                                    )
                                    .unwrap()
                                };
                                true
                            }
                            None => false,
                        }),
                    ))
                }
                Layer::Prefetch => AnyResource::new(PrefetchResourceAdaptor::new(top)),
                Layer::ThreadSafe => AnyResource::new(ThreadSafeResourceAdaptor::new(top)),
                Layer::Callback => {
                    let (up, down) = (top.clone(), top.clone());
                    AnyResource::new(CallbackMemoryResource::with_access(
                        Arc::new(move |bytes, stream| {
                            up.allocate(stream, bytes, MAX_CALL_ALIGNMENT)
                        }),
                        Arc::new(move |p, bytes, stream| {
                            // SAFETY: the resource returns only what `allocate` gave, with its size.
                            unsafe { down.deallocate(stream, p, bytes, MAX_CALL_ALIGNMENT) }
                        }),
                        top.access(),
                    ))
                }
            };
        }
        let writable = base.access().host();
        Stack {
            top,
            base,
            limiting: limiting.unwrap(),
            aligned: aligned.unwrap(),
            ballast,
            ballast_bytes,
            writable,
        }
    }

    /// The alignment the stack promises for a request.
    fn promised(&self, bytes: usize, alignment: usize) -> usize {
        if bytes >= self.aligned.alignment_threshold() {
            alignment.max(self.aligned.alignment())
        } else {
            alignment
        }
    }

    /// Returns the ballast (if the callback has not) so the base can be checked for emptiness.
    fn drop_ballast(&self) {
        if let Some(p) = self.ballast.lock().unwrap().take() {
            // SAFETY: the ballast came from `base` with these arguments.
            unsafe {
                self.base
                    .deallocate(Stream::DEFAULT, p as *mut u8, self.ballast_bytes, 256)
                    .unwrap()
            };
        }
    }
}

/// Live allocations of the top resource: address → (bytes, alignment, tag).
type Live = BTreeMap<usize, (usize, usize, u8)>;

fn check_no_overlap(live: &Live, addr: usize, bytes: usize) -> Result<(), TestCaseError> {
    if let Some((&prev, &(prev_bytes, _, _))) = live.range(..=addr).next_back() {
        prop_assert!(
            prev + prev_bytes <= addr,
            "{addr:#x}+{bytes} overlaps {prev:#x}+{prev_bytes}"
        );
    }
    if let Some((&next, &(next_bytes, _, _))) = live.range(addr..).next() {
        prop_assert!(
            addr + bytes <= next,
            "{addr:#x}+{bytes} overlaps {next:#x}+{next_bytes}"
        );
    }
    Ok(())
}

/// Runs `ops` on `stack` and checks the invariants; frees everything at the end.
fn run(stack: &Stack, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut live = Live::new();
    let mut tag = 0u8;
    let limit = stack.limiting.allocation_limit();
    for op in ops {
        match *op {
            Op::Alloc { bytes, alignment } => {
                match stack.top.allocate(Stream::DEFAULT, bytes, alignment) {
                    Ok(p) if bytes == 0 => prop_assert!(p.is_null()),
                    Ok(p) => {
                        let addr = p as usize;
                        let promised = stack.promised(bytes, alignment);
                        prop_assert_eq!(
                            addr % promised,
                            0,
                            "{} bytes at {:#x}, promised {}",
                            bytes,
                            addr,
                            promised
                        );
                        check_no_overlap(&live, addr, bytes)?;
                        tag = tag.wrapping_add(1);
                        if stack.writable {
                            // SAFETY: host memory, valid for `bytes` bytes and not shared with any other
                            // live allocation (checked just above).
                            unsafe { (*p, *p.add(bytes - 1)) = (tag, tag) };
                        }
                        live.insert(addr, (bytes, alignment, tag));
                    }
                    Err(e) => {
                        prop_assert!(e.is_out_of_memory(), "only out-of-memory may fail: {}", e)
                    }
                }
            }
            Op::Free(index) => {
                if live.is_empty() {
                    continue;
                }
                let addr = *live.keys().nth(index.index(live.len())).unwrap();
                let (bytes, alignment, tag) = live.remove(&addr).unwrap();
                free(stack, addr, bytes, alignment, tag)?;
            }
        }
        prop_assert!(stack.limiting.allocated_bytes() <= limit);
    }
    for (addr, (bytes, alignment, tag)) in std::mem::take(&mut live) {
        free(stack, addr, bytes, alignment, tag)?;
    }
    stack.drop_ballast();
    prop_assert_eq!(stack.limiting.allocated_bytes(), 0);
    prop_assert_eq!(stack.aligned.over_allocated_count(), 0);
    Ok(())
}

fn free(
    stack: &Stack,
    addr: usize,
    bytes: usize,
    alignment: usize,
    tag: u8,
) -> Result<(), TestCaseError> {
    let p = addr as *mut u8;
    if stack.writable {
        // SAFETY: live host memory of `bytes` bytes, tagged at allocation.
        let seen = unsafe { (*p, *p.add(bytes - 1)) };
        prop_assert_eq!(
            seen,
            (tag, tag),
            "allocation at {:#x} was overwritten",
            addr
        );
    }
    // SAFETY: `p` came from the top resource with these arguments and is freed once.
    let freed = unsafe { stack.top.deallocate(Stream::DEFAULT, p, bytes, alignment) };
    prop_assert!(freed.is_ok(), "freeing {:#x}: {:?}", addr, freed);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::testing::proptest_cases(CASES), ..ProptestConfig::default() })]

    #[test]
    fn random_stacks_over_a_simulated_device(layers in layers(), ops in ops()) {
        let gpu = SimulatedMemoryResource::new(8 * MIB).unwrap();
        let stack = Stack::build(AnyResource::new(gpu.clone()), &layers, 2 * MIB);
        run(&stack, &ops)?;
        let usage = gpu.usage();
        prop_assert_eq!((usage.allocated_bytes, usage.live_allocations), (0, 0), "everything went back upstream");
        prop_assert_eq!(usage.largest_free_block, 8 * MIB);
    }

    #[test]
    fn random_stacks_over_host_memory(layers in layers(), ops in ops()) {
        let probe = AnyResource::new(Probe::new(Access::HOST));
        let stack = Stack::build(probe.clone(), &layers, MIB);
        run(&stack, &ops)?;
        let probe = probe.downcast_ref::<Probe>().unwrap();
        prop_assert_eq!(probe.live.load(Ordering::SeqCst), 0, "everything went back upstream");
    }
}

/// A few fixed orders, to keep them covered whatever the random ones are.
#[test]
fn fixed_orders_over_both_bases() {
    use Layer::*;
    let aligned = || Aligned {
        alignment: 4096,
        threshold: 4 * KIB,
    };
    let orders: [Vec<Layer>; 3] = [
        vec![
            Callback,
            ThreadSafe,
            Prefetch,
            FailureCallback,
            Limiting { limit: 6 * MIB },
            aligned(),
        ],
        vec![
            aligned(),
            Limiting { limit: 6 * MIB },
            FailureCallback,
            Prefetch,
            ThreadSafe,
            Callback,
        ],
        vec![
            Limiting { limit: 4 * MIB },
            Callback,
            aligned(),
            ThreadSafe,
            FailureCallback,
            Prefetch,
        ],
    ];
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    for layers in &orders {
        let ops = ops().new_tree(&mut runner).unwrap().current();
        let gpu = SimulatedMemoryResource::new(8 * MIB).unwrap();
        run(
            &Stack::build(AnyResource::new(gpu.clone()), layers, 2 * MIB),
            &ops,
        )
        .unwrap();
        assert_eq!(gpu.usage().allocated_bytes, 0, "{layers:?}");
        let probe = AnyResource::new(Probe::new(Access::HOST));
        run(&Stack::build(probe.clone(), layers, MIB), &ops).unwrap();
        assert_eq!(
            probe
                .downcast_ref::<Probe>()
                .unwrap()
                .live
                .load(Ordering::SeqCst),
            0,
            "{layers:?}"
        );
    }
}

/// Four threads share one stack; addresses handed to different threads never overlap.
#[test]
fn threads_share_a_stack() {
    use Layer::*;
    let gpu = SimulatedMemoryResource::new(16 * MIB).unwrap();
    let layers = [
        Callback,
        Aligned {
            alignment: 4096,
            threshold: 0,
        },
        Limiting { limit: 8 * MIB },
        FailureCallback,
        ThreadSafe,
        Prefetch,
    ];
    let stack = Stack::build(AnyResource::new(gpu.clone()), &layers, 4 * MIB);
    let live = Mutex::new(Live::new());
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let (stack, live) = (&stack, &live);
            scope.spawn(move || {
                let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                let mut next = move || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                let mut mine = Vec::new();
                for _ in 0..OPS_PER_CASE {
                    if next() % 10 < 6 || mine.is_empty() {
                        let bytes = 1 + (next() % (256 * KIB as u64)) as usize;
                        match stack.top.allocate(Stream::DEFAULT, bytes, 256) {
                            Ok(p) => {
                                assert_eq!(p as usize % 4096, 0);
                                let mut live = live.lock().unwrap();
                                check_no_overlap(&live, p as usize, bytes).unwrap();
                                live.insert(p as usize, (bytes, 256, 0));
                                mine.push((p as usize, bytes));
                            }
                            Err(e) => assert!(e.is_out_of_memory(), "{e}"),
                        }
                    } else {
                        let (addr, bytes) = mine.swap_remove((next() % mine.len() as u64) as usize);
                        live.lock().unwrap().remove(&addr);
                        // SAFETY: from allocate above with these arguments.
                        unsafe {
                            stack
                                .top
                                .deallocate(Stream::DEFAULT, addr as *mut u8, bytes, 256)
                                .unwrap()
                        };
                    }
                    assert!(stack.limiting.allocated_bytes() <= 8 * MIB);
                }
                for (addr, bytes) in mine {
                    live.lock().unwrap().remove(&addr);
                    // SAFETY: from allocate above with these arguments.
                    unsafe {
                        stack
                            .top
                            .deallocate(Stream::DEFAULT, addr as *mut u8, bytes, 256)
                            .unwrap()
                    };
                }
            });
        }
    });
    stack.drop_ballast();
    assert_eq!(stack.limiting.allocated_bytes(), 0);
    assert_eq!(stack.aligned.over_allocated_count(), 0);
    assert_eq!(gpu.usage().allocated_bytes, 0);
}
