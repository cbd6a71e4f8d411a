#!/bin/bash
c=$1; exe=/work/wt/cg/alloc-$c
cd /tmp
echo "== $c list:"; RMM_BENCH_RESOURCES=pool RMM_BENCH_KINDS=legacy RMM_BENCH_WORKLOADS=pair256 $exe --bench --list 2>&1 | grep -E 'pair256/pool' | head -3
RMM_BENCH_RESOURCES=pool RMM_BENCH_KINDS=legacy RMM_BENCH_WORKLOADS=pair256 valgrind --tool=callgrind --callgrind-out-file=/work/wt/cg/cg-$c.%p.out $exe --bench --profile-time 1 'pair256/pool.legacy/1$' > /work/wt/cg/run-$c.log 2>&1
python3 /work/wt/cg/calls.py $(ls -S /work/wt/cg/cg-$c.*.out | head -1) 'PoolMemoryResource as .*allocate$|Core::(de)?allocate$|FreeCheck|LiveSet' > /work/wt/cg/sum-$c.txt
cat /work/wt/cg/sum-$c.txt
