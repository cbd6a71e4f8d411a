/*
 * Driver-only reproducer for the parallel-test hang (issue 12): no rmm code, only the CUDA driver
 * API. THREADS threads loop for SECONDS seconds over what the core GPU tests do concurrently under
 * libtest's default parallelism:
 *   - legacy-default-stream work and cuStreamSynchronize(CU_STREAM_LEGACY),
 *   - stream create / memset / synchronize / destroy,
 *   - cuMemAlloc / cuMemFree,
 *   - pageable host-to-device and device-to-host copies (cuMemcpyHtoD/DtoH from malloc'd memory),
 *   - per-thread-default-stream synchronizations, event record / synchronize,
 *   - stream-ordered memory pools, as rmm's cuda_async resource and the arena over it use them:
 *     cuMemAllocFromPoolAsync / cuMemFreeAsync on a shared pool, cuMemPoolTrimTo, and pools
 *     created, used and destroyed per operation (each test makes its own resource),
 *   - short-lived threads that queue work on their per-thread stream and exit.
 * A watchdog thread watches the total operation count: no progress for STALL seconds prints
 * "hung" (with each thread's count and the operation it is in) and exits with status 2; otherwise
 * the run ends with "no hang: N operations in T s" and status 0. Any driver error exits with 1.
 *
 * Build (GPU machine): gcc -O2 -pthread -I$CUDA/include driver_hang_repro.c -o repro \
 *                       -L$CUDA/lib64/stubs -lcuda
 * Usage: repro [THREADS=16] [SECONDS=60] [STALL=20] [OPS=1,2,...,9]
 *   OPS: the operations to mix, e.g. "9" or "1,2,3,4,5,6,9" (numbers as in op_names below).
 */
#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
#define BYTES (256 * 1024)

static CUcontext ctx;
static void check(CUresult r, const char *what, int t);
#define check_pool check
static atomic_long ops[MAX_THREADS];
static atomic_int where[MAX_THREADS];
static atomic_int stop;
static int seconds = 60, stall = 20, threads = 16;
static int enabled[16], n_enabled;

static const char *op_names[] = {"idle", "stream create/memset/sync/destroy", "cuMemAlloc/cuMemFree",
                                 "pageable copies", "legacy-stream memset + synchronize",
                                 "per-thread stream synchronize", "event record/synchronize",
                                 "shared pool alloc/free async + trim", "pool create/use/destroy",
                                 "short-lived thread on its per-thread stream",
                                 "short-lived thread: memsets only", "short-lived thread: pool alloc/free only",
                                 "short-lived thread: memsets + event record"};
#define OPS 12
static CUmemoryPool shared_pool;
static CUdevice device;

static CUmemoryPool make_pool(int t) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = (int)device;
    CUmemoryPool pool;
    check_pool(cuMemPoolCreate(&pool, &props), "cuMemPoolCreate", t);
    return pool;
}

static void check(CUresult r, const char *what, int t) {
    if (r != CUDA_SUCCESS) {
        const char *s = NULL;
        cuGetErrorString(r, &s);
        fprintf(stderr, "thread %d: %s failed: %d %s\n", t, what, (int)r, s ? s : "?");
        fflush(stderr);
        _exit(1);
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Queues work on its per-thread stream and exits without synchronizing (an exiting thread's
 * arena records an event there instead). */
static void *short_lived(void *arg) {
    int t = (int)(long)arg;
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent", t);
    CUdeviceptr p;
    check(cuMemAllocFromPoolAsync(&p, 512 * 1024, shared_pool, CU_STREAM_PER_THREAD), "cuMemAllocFromPoolAsync", t);
    for (int i = 0; i < 16; i++) check(cuMemsetD8Async(p, (unsigned char)i, 512 * 1024, CU_STREAM_PER_THREAD), "cuMemsetD8Async", t);
    CUevent ev;
    check(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), "cuEventCreate", t);
    check(cuEventRecord(ev, CU_STREAM_PER_THREAD), "cuEventRecord", t);
    check(cuMemFreeAsync(p, CU_STREAM_PER_THREAD), "cuMemFreeAsync", t);
    check(cuEventDestroy(ev), "cuEventDestroy", t);
    return NULL;
}

/* The parts of short_lived, one at a time (ops 10-12), to tell which one the hang needs. */
static CUdeviceptr scratch[MAX_THREADS];
static void *short_lived_memsets(void *arg) {
    int t = (int)(long)arg;
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent", t);
    for (int i = 0; i < 16; i++) check(cuMemsetD8Async(scratch[t], (unsigned char)i, BYTES, CU_STREAM_PER_THREAD), "cuMemsetD8Async", t);
    return NULL;
}
static void *short_lived_pool(void *arg) {
    int t = (int)(long)arg;
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent", t);
    CUdeviceptr p;
    check(cuMemAllocFromPoolAsync(&p, 512 * 1024, shared_pool, CU_STREAM_PER_THREAD), "cuMemAllocFromPoolAsync", t);
    check(cuMemFreeAsync(p, CU_STREAM_PER_THREAD), "cuMemFreeAsync", t);
    return NULL;
}
static void *short_lived_event(void *arg) {
    int t = (int)(long)arg;
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent", t);
    for (int i = 0; i < 16; i++) check(cuMemsetD8Async(scratch[t], (unsigned char)i, BYTES, CU_STREAM_PER_THREAD), "cuMemsetD8Async", t);
    CUevent ev;
    check(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), "cuEventCreate", t);
    check(cuEventRecord(ev, CU_STREAM_PER_THREAD), "cuEventRecord", t);
    check(cuEventDestroy(ev), "cuEventDestroy", t);
    return NULL;
}

static void *worker(void *arg) {
    int t = (int)(long)arg;
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent", t);
    CUdeviceptr d;
    check(cuMemAlloc(&d, BYTES), "cuMemAlloc", t);
    scratch[t] = d;
    unsigned char *host = malloc(BYTES); /* pageable */
    memset(host, t, BYTES);
    unsigned seed = (unsigned)t * 2654435761u + 1;
    while (!atomic_load(&stop)) {
        seed = seed * 1103515245u + 12345u;
        int op = enabled[(seed >> 16) % (unsigned)n_enabled];
        atomic_store(&where[t], op);
        switch (op) {
        case 1: {
            CUstream s;
            check(cuStreamCreate(&s, (seed & 1) ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT), "cuStreamCreate", t);
            check(cuMemsetD8Async(d, (unsigned char)t, BYTES, s), "cuMemsetD8Async", t);
            check(cuStreamSynchronize(s), "cuStreamSynchronize", t);
            check(cuStreamDestroy(s), "cuStreamDestroy", t);
            break;
        }
        case 2: {
            CUdeviceptr e;
            check(cuMemAlloc(&e, 1 << 20), "cuMemAlloc", t);
            check(cuMemsetD8Async(e, 0, 1 << 20, CU_STREAM_LEGACY), "cuMemsetD8Async", t);
            check(cuMemFree(e), "cuMemFree", t);
            break;
        }
        case 3:
            check(cuMemcpyHtoD(d, host, BYTES), "cuMemcpyHtoD", t);
            check(cuMemcpyDtoH(host, d, BYTES), "cuMemcpyDtoH", t);
            break;
        case 4:
            check(cuMemsetD8Async(d, 1, BYTES, CU_STREAM_LEGACY), "cuMemsetD8Async", t);
            check(cuStreamSynchronize(CU_STREAM_LEGACY), "cuStreamSynchronize(legacy)", t);
            break;
        case 5:
            check(cuMemsetD8Async(d, 2, BYTES, CU_STREAM_PER_THREAD), "cuMemsetD8Async", t);
            check(cuStreamSynchronize(CU_STREAM_PER_THREAD), "cuStreamSynchronize(per-thread)", t);
            break;
        case 6: {
            CUevent ev;
            check(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), "cuEventCreate", t);
            check(cuEventRecord(ev, CU_STREAM_LEGACY), "cuEventRecord", t);
            check(cuEventSynchronize(ev), "cuEventSynchronize", t);
            check(cuEventDestroy(ev), "cuEventDestroy", t);
            break;
        }
        case 7: {
            CUstream s;
            check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate", t);
            CUdeviceptr p;
            size_t bytes = (size_t)1 << (10 + (seed >> 8) % 14); /* 1 KiB .. 8 MiB */
            check(cuMemAllocFromPoolAsync(&p, bytes, shared_pool, s), "cuMemAllocFromPoolAsync", t);
            check(cuMemsetD8Async(p, 3, bytes, s), "cuMemsetD8Async", t);
            check(cuMemFreeAsync(p, (seed & 2) ? s : CU_STREAM_PER_THREAD), "cuMemFreeAsync", t);
            check(cuStreamSynchronize(s), "cuStreamSynchronize", t);
            check(cuStreamDestroy(s), "cuStreamDestroy", t);
            if ((seed & 15) == 0) check(cuMemPoolTrimTo(shared_pool, 0), "cuMemPoolTrimTo", t);
            break;
        }
        case 8: {
            CUmemoryPool pool = make_pool(t);
            CUdeviceptr p;
            check(cuMemAllocFromPoolAsync(&p, 1 << 20, pool, CU_STREAM_LEGACY), "cuMemAllocFromPoolAsync", t);
            check(cuMemsetD8Async(p, 4, 1 << 20, CU_STREAM_LEGACY), "cuMemsetD8Async", t);
            check(cuMemFreeAsync(p, CU_STREAM_LEGACY), "cuMemFreeAsync", t);
            check(cuStreamSynchronize(CU_STREAM_LEGACY), "cuStreamSynchronize(legacy)", t);
            check(cuMemPoolDestroy(pool), "cuMemPoolDestroy", t);
            break;
        }
        case 9:
        case 10:
        case 11:
        case 12: {
            void *(*body[])(void *) = {short_lived, short_lived_memsets, short_lived_pool, short_lived_event};
            pthread_t child;
            pthread_create(&child, NULL, body[op - 9], (void *)(long)t);
            pthread_join(child, NULL);
            break;
        }
        }
        atomic_store(&where[t], 0);
        atomic_fetch_add(&ops[t], 1);
    }
    check(cuMemFree(d), "cuMemFree", t);
    free(host);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) threads = atoi(argv[1]);
    if (argc > 2) seconds = atoi(argv[2]);
    if (argc > 3) stall = atoi(argv[3]);
    if (threads < 1 || threads > MAX_THREADS) threads = 16;
    const char *mask = argc > 4 ? argv[4] : "1,2,3,4,5,6,7,8,9";
    for (const char *c = mask; *c;) {
        char *end;
        long v = strtol(c, &end, 10);
        if (end == c) {
            c++;
            continue;
        }
        if (v >= 1 && v <= OPS && n_enabled < 16) enabled[n_enabled++] = (int)v;
        c = end;
    }
    if (n_enabled == 0) {
        fprintf(stderr, "no operation selected by '%s'\n", mask);
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    check(cuInit(0), "cuInit", -1);
    check(cuDeviceGet(&device, 0), "cuDeviceGet", -1);
    check(cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain", -1);
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent", -1);
    shared_pool = make_pool(-1);
    int driver = 0;
    cuDriverGetVersion(&driver);
    printf("driver-hang-repro: %d threads, %d s, stall limit %d s, operations %s, CUDA driver API %d\n", threads,
           seconds, stall, mask, driver);
    pthread_t tid[MAX_THREADS];
    for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, worker, (void *)(long)t);
    double start = now(), last_progress = start;
    long last_total = -1;
    while (now() - start < seconds) {
        sleep(1);
        long total = 0;
        for (int t = 0; t < threads; t++) total += atomic_load(&ops[t]);
        if (total != last_total) {
            last_total = total;
            last_progress = now();
        } else if (now() - last_progress >= stall) {
            printf("hung: no operation finished for %d s after %ld operations in %.0f s\n", stall, total,
                   now() - start);
            for (int t = 0; t < threads; t++)
                printf("  thread %2d: %ld operations, now in: %s\n", t, atomic_load(&ops[t]),
                       op_names[atomic_load(&where[t])]);
            fflush(stdout);
            _exit(2);
        }
    }
    atomic_store(&stop, 1);
    for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
    long total = 0;
    for (int t = 0; t < threads; t++) total += atomic_load(&ops[t]);
    printf("no hang: %ld operations in %.1f s (%d threads)\n", total, now() - start, threads);
    return 0;
}
