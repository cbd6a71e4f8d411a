/*
 * rmm_rs/rmm_c.h: the stable C ABI of librmm_rs.so (rmm-rs).
 *
 * Plain C99, usable from C++. librmm_rs.so is the process-wide owner of the per-device current
 * resource; everything that crosses a language or binary boundary goes through this header. It has
 * an include directory of its own, so that code built against RAPIDS RMM's headers (<rmm/...>) can
 * include it without our <rmm/...> on the path; <rmm/rmm_c.h> includes it for the drop-in API.
 *
 * Resources
 *   A resource crosses any boundary as an rmm_resource handle { self, vtable }. For resources made
 *   by rmm (Rust), `self` is an opaque token (a checked cell of the Rust Arc) and retain/release
 *   move the Arc's own reference count: nothing is copied, and the resource lives while anyone (in
 *   any language) holds a reference. A resource written in C or C++ provides its own vtable (see
 *   rmm_resource_vtable).
 *
 * Ownership
 *   - An "owning" handle carries one reference: give it back with rmm_resource_release().
 *   - A "borrowed" handle must stay alive for the duration of the call; the callee retains it if it
 *     keeps it.
 *   - Every function below says which it takes and which it returns. Releasing the empty handle
 *     {NULL, NULL} is a no-op.
 *
 * Errors
 *   Fallible functions return RMM_OK (0) or an RMM_ERROR_* kind, and fill the optional rmm_error*
 *   out-parameter (which may be NULL) with the details. On failure, handle out-parameters are set to
 *   the empty handle. NULL for a required out-pointer is RMM_ERROR_INVALID_ARGUMENT, never a crash.
 *   Nothing unwinds or throws across this ABI: Rust panics are caught and reported as
 *   RMM_ERROR_PANIC; C++ resource implementations must catch their exceptions likewise.
 *
 * Threads
 *   Every function may be called from any thread. Resource implementations must be thread-safe.
 *
 * Misuse of handles (checked)
 *   A resource handle of this library released twice, or used after its last release, is refused:
 *   RMM_ERROR_INVALID_ARGUMENT from every fallible function (rmm::logic_error in C++), a logged
 *   no-op from rmm_resource_retain/_release (rmm_resource_release_checked reports it), 0 / NULL from
 *   rmm_resource_access/_name. An rmm_device_buffer* freed twice or used after its free is refused
 *   likewise while it is among the last 4096 freed buffers (rmm_device_buffer_free_checked reports a
 *   second free). Still undefined: a pointer that never was a handle or buffer, a handle whose
 *   resource was last dropped by a Rust owner without a copy of the handle kept, a buffer freed more
 *   than 4096 frees ago, and a release that races with another use of the same handle.
 */
#ifndef RMM_RMM_C_H
#define RMM_RMM_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The ABI's major version. Handles of another major version are rejected. */
#define RMM_ABI_VERSION 1u

/** Capacity of rmm_error.message, NUL included. */
#define RMM_ERROR_MESSAGE_SIZE 512

/** Status codes: the return value of fallible calls and rmm_error.kind. */
enum rmm_status {
  RMM_OK = 0,                     /**< success */
  RMM_ERROR_OUT_OF_MEMORY = 1,    /**< the resource could not provide the memory; see bytes */
  RMM_ERROR_CUDA = 2,             /**< a CUDA call failed; see cuda_code (a CUresult) */
  RMM_ERROR_INVALID_ARGUMENT = 3, /**< bad argument, NULL out-pointer, invalid handle or device */
  RMM_ERROR_NO_DRIVER = 4,        /**< no CUDA driver on this machine */
  RMM_ERROR_NO_DEVICE = 5,        /**< no (such) CUDA device */
  RMM_ERROR_UNSUPPORTED = 6,      /**< not supported by this resource, device or driver */
  RMM_ERROR_PANIC = 7             /**< internal failure (a caught Rust panic or C++ exception) */
};

/** Details of a failed call. */
typedef struct rmm_error {
  int32_t kind;      /**< RMM_OK or an RMM_ERROR_* value (the call's return value) */
  int32_t cuda_code; /**< the CUresult for RMM_ERROR_CUDA, else 0 */
  uint64_t bytes;    /**< the requested size for RMM_ERROR_OUT_OF_MEMORY, else 0 */
  char message[RMM_ERROR_MESSAGE_SIZE]; /**< UTF-8, NUL-terminated, truncated to fit */
} rmm_error;

typedef struct rmm_resource_vtable rmm_resource_vtable;

/** A resource handle. Owning or borrowed depending on where it came from (see each function). */
typedef struct rmm_resource {
  void* self;                        /**< the object (Rust: the Arc's data pointer); may be NULL */
  const rmm_resource_vtable* vtable; /**< the operations; NULL only in the empty handle */
} rmm_resource;

/**
 * The operations of a resource. Every function pointer is required.
 *
 * To implement a resource in C or C++, fill a static vtable with abi_version = RMM_ABI_VERSION,
 * size = sizeof(rmm_resource_vtable) and owner = the address of any object of yours (it is compared,
 * never read). Entries must be thread-safe, must not throw, and must accept err == NULL. Streams are
 * cudaStream_t values (NULL = the default stream). Allocation of 0 bytes returns NULL; deallocating
 * NULL is a no-op. Alignment must be a power of two (RMM_ERROR_INVALID_ARGUMENT otherwise).
 * Fields may be appended in later versions of the same major version; readers check `size`.
 */
struct rmm_resource_vtable {
  uint32_t abi_version; /**< RMM_ABI_VERSION */
  uint32_t size;        /**< sizeof(rmm_resource_vtable) as its producer knew it */
  const void* owner;    /**< identifies the binary whose handles these are (rmm_abi_owner()) */
  /** Adds a reference. */
  void (*retain)(void* self);
  /** Drops a reference; the last one frees the resource. */
  void (*release)(void* self);
  /** Stream-ordered allocation into *out; returns a status. */
  int (*allocate)(void* self, void* stream, size_t bytes, size_t alignment, void** out, rmm_error* err);
  /** Stream-ordered deallocation of ptr (from allocate with the same bytes and alignment). */
  int (*deallocate)(void* self, void* stream, void* ptr, size_t bytes, size_t alignment, rmm_error* err);
  /** Allocation usable on every stream as soon as it returns. */
  int (*allocate_sync)(void* self, size_t bytes, size_t alignment, void** out, rmm_error* err);
  /** Deallocation of memory no pending work uses. */
  int (*deallocate_sync)(void* self, void* ptr, size_t bytes, size_t alignment, rmm_error* err);
  /** Who can access the memory: bit 0 device, bit 1 host. */
  uint32_t (*access)(void* self);
  /** The resource's name; valid while the resource lives. */
  const char* (*name)(void* self);
  /** Non-zero when memory from self may be freed by other and vice versa. */
  int (*is_equal)(void* self, void* other_self, const rmm_resource_vtable* other_vtable);
};

/** Access bits returned by rmm_resource_access() and vtable->access. */
#define RMM_ACCESS_DEVICE 1u
#define RMM_ACCESS_HOST 2u

/* ---------------------------------------------------------------------------------------------
 * Library
 * ------------------------------------------------------------------------------------------- */

/** RMM_ABI_VERSION of the loaded library. */
uint32_t rmm_abi_version(void);

/** The owner tag of this library's handles: vtable->owner == rmm_abi_owner() means the resource
 *  was made by this librmm. */
const void* rmm_abi_owner(void);

/** 1 in host mode (no CUDA driver or no device: only device 0, host memory), else 0. */
int rmm_is_host_mode(void);

/** A static string naming a status, e.g. "RMM_ERROR_OUT_OF_MEMORY". Never NULL. */
const char* rmm_error_kind_name(int kind);

/* ---------------------------------------------------------------------------------------------
 * Per-device current resource (the process's one registry)
 *
 * An unset device lazily gets the initial resource: cuda_memory_resource with a GPU; in host mode
 * only device 0 exists and its initial resource is system_memory_resource. A resource must be
 * device-accessible to be set when a GPU is present, host-accessible in host mode. The "current"
 * variants use the calling thread's current CUDA device (device 0 in host mode).
 * ------------------------------------------------------------------------------------------- */

/** The resource of `device`. *out receives an OWNING handle: the caller must release it. */
int rmm_get_per_device_resource(int device, rmm_resource* out, rmm_error* err);

/** Makes `resource` (BORROWED: the registry retains its own reference) the resource of `device`.
 *  *previous_out receives the previous resource as an OWNING handle (the caller must release it);
 *  previous_out may be NULL, and the previous reference is then released. */
int rmm_set_per_device_resource(int device, rmm_resource resource, rmm_resource* previous_out, rmm_error* err);

/** Puts the initial resource of `device` back. *previous_out as for rmm_set_per_device_resource. */
int rmm_reset_per_device_resource(int device, rmm_resource* previous_out, rmm_error* err);

/** A number that changes whenever any device's resource is set or reset, from any language (after
 *  the new resource is in place); 0 when it cannot be told. A binding that caches something derived
 *  from a device's resource revalidates it by comparing this number. */
uint64_t rmm_registry_generation(void);

/** rmm_get_per_device_resource() on the current device. *out is OWNING. */
int rmm_get_current_device_resource(rmm_resource* out, rmm_error* err);

/** rmm_set_per_device_resource() on the current device. `resource` is BORROWED; *previous_out is
 *  OWNING (or released when previous_out is NULL). */
int rmm_set_current_device_resource(rmm_resource resource, rmm_resource* previous_out, rmm_error* err);

/** rmm_reset_per_device_resource() on the current device. *previous_out is OWNING (or released). */
int rmm_reset_current_device_resource(rmm_resource* previous_out, rmm_error* err);

/* ---------------------------------------------------------------------------------------------
 * Resource operations (work on any valid handle, Rust or C; `resource` is always BORROWED)
 * ------------------------------------------------------------------------------------------- */

/** Adds a reference: the caller then owns one more. No-op for the empty handle. */
void rmm_resource_retain(rmm_resource resource);

/** Gives back one OWNED reference; the last one frees the resource. No-op for the empty handle. */
void rmm_resource_release(rmm_resource resource);

/** rmm_resource_release that reports: RMM_ERROR_INVALID_ARGUMENT for a malformed handle or a handle
 *  of this library that was already released (nothing is released then). */
int rmm_resource_release_checked(rmm_resource resource, rmm_error* err);

/** Allocates `bytes` aligned to `alignment` (a power of two; 256 is the default guarantee), ordered
 *  on `stream` (a cudaStream_t, NULL = default stream), into *out. */
int rmm_resource_allocate(rmm_resource resource, void* stream, size_t bytes, size_t alignment, void** out,
                          rmm_error* err);

/** Returns `ptr` (from rmm_resource_allocate with the same bytes and alignment), ordered on `stream`. */
int rmm_resource_deallocate(rmm_resource resource, void* stream, void* ptr, size_t bytes, size_t alignment,
                            rmm_error* err);

/** Allocates memory usable on every stream as soon as this returns. */
int rmm_resource_allocate_sync(rmm_resource resource, size_t bytes, size_t alignment, void** out, rmm_error* err);

/** Returns memory (from rmm_resource_allocate_sync) that no pending work uses. */
int rmm_resource_deallocate_sync(rmm_resource resource, void* ptr, size_t bytes, size_t alignment, rmm_error* err);

/** Access bits (RMM_ACCESS_DEVICE | RMM_ACCESS_HOST); 0 for an invalid handle. */
uint32_t rmm_resource_access(rmm_resource resource);

/** The resource's name, valid while the resource lives; NULL for an invalid handle. */
const char* rmm_resource_name(rmm_resource resource);

/** 1 when memory from `a` may be returned to `b` (same object, or a's is_equal says so), else 0. */
int rmm_resource_is_equal(rmm_resource a, rmm_resource b);

/* What a resource of this library is (`*kind_out`, one of RMM_RESOURCE_KIND_*; the values never
 * change), so that another binary recognises it without comparing names. RMM_RESOURCE_KIND_OTHER is
 * a resource of a type this list does not name. */
#define RMM_RESOURCE_KIND_OTHER 0
#define RMM_RESOURCE_KIND_CUDA 1
#define RMM_RESOURCE_KIND_MANAGED 2
#define RMM_RESOURCE_KIND_PINNED_HOST 3
#define RMM_RESOURCE_KIND_SYSTEM 4
#define RMM_RESOURCE_KIND_SAM_HEADROOM 5
#define RMM_RESOURCE_KIND_CUDA_ASYNC 6
#define RMM_RESOURCE_KIND_CUDA_ASYNC_VIEW 7
#define RMM_RESOURCE_KIND_CUDA_ASYNC_MANAGED 8
#define RMM_RESOURCE_KIND_POOL 9
#define RMM_RESOURCE_KIND_FIXED_SIZE 10
#define RMM_RESOURCE_KIND_BINNING 11
#define RMM_RESOURCE_KIND_ARENA 12
#define RMM_RESOURCE_KIND_CALLBACK 13
#define RMM_RESOURCE_KIND_SIMULATED 14
#define RMM_RESOURCE_KIND_ALIGNED 15
#define RMM_RESOURCE_KIND_LIMITING 16
#define RMM_RESOURCE_KIND_LOGGING 17
#define RMM_RESOURCE_KIND_STATISTICS 18
#define RMM_RESOURCE_KIND_TRACKING 19
#define RMM_RESOURCE_KIND_THREAD_SAFE 20
#define RMM_RESOURCE_KIND_PREFETCH 21
#define RMM_RESOURCE_KIND_FAILURE_CALLBACK 22
#define RMM_RESOURCE_KIND_RECORDING 23
#define RMM_RESOURCE_KIND_EXPANDABLE_POOL 24

/** The kind of `resource` in `*kind_out` and, when `upstream_out` is not NULL, its upstream (an
 *  OWNING handle; {NULL, NULL} for a resource without one). `resource` must be a resource of this
 *  library (not a handle made elsewhere): else RMM_ERROR_INVALID_ARGUMENT. */
int rmm_resource_kind(rmm_resource resource, int* kind_out, rmm_resource* upstream_out, rmm_error* err);

/* ---------------------------------------------------------------------------------------------
 * Base resources
 * ------------------------------------------------------------------------------------------- */

/** A new cuda_memory_resource (cuMemAlloc/cuMemFree). *out is OWNING. Succeeds in host mode too;
 *  allocating from it there fails with RMM_ERROR_NO_DRIVER or RMM_ERROR_NO_DEVICE. */
int rmm_cuda_memory_resource_new(rmm_resource* out, rmm_error* err);

/** A new system_memory_resource (host malloc; device-accessible with HMM/ATS). *out is OWNING. */
int rmm_system_memory_resource_new(rmm_resource* out, rmm_error* err);

/* ---------------------------------------------------------------------------------------------
 * Sub-allocators and adaptors
 *
 * Shared conventions:
 * - an `upstream` (or bin) handle is BORROWED: the new resource retains its own reference, so the
 *   caller may release its handle at once; any valid handle works (Rust, C or C++ resources);
 * - the new resource is written OWNING to *out (the caller must release it); *out is {NULL, NULL}
 *   on failure;
 * - an optional size is a uint64_t where RMM_SIZE_NONE (UINT64_MAX) means "none" (the default);
 * - an accessor takes its `resource` BORROWED and fails with RMM_ERROR_INVALID_ARGUMENT unless it
 *   is a resource of that type made by this librmm.
 * ------------------------------------------------------------------------------------------- */

/** "No value" for an optional size argument. */
#define RMM_SIZE_NONE UINT64_MAX

/** A statistics counter (RMM's statistics_resource_adaptor::counter). */
typedef struct rmm_counter {
  int64_t value; /**< The current amount. */
  int64_t peak;  /**< The highest value reached. */
  int64_t total; /**< Everything ever added. */
} rmm_counter;

/** A new pool_memory_resource over `upstream`. Both sizes may be RMM_SIZE_NONE (initial: rmm-rs's
 *  default; maximum: unbounded); given sizes must be multiples of 256 (else INVALID_ARGUMENT). */
int rmm_pool_memory_resource_new(rmm_resource upstream, uint64_t initial_pool_size, uint64_t maximum_pool_size,
                                 rmm_resource* out, rmm_error* err);

/** The bytes a pool_memory_resource holds from its upstream, into *out. */
int rmm_pool_memory_resource_pool_size(rmm_resource resource, uint64_t* out, rmm_error* err);

/** The maximum size of a pool_memory_resource, into *out: RMM_SIZE_NONE when it is unbounded. */
int rmm_pool_memory_resource_maximum_pool_size(rmm_resource resource, uint64_t* out, rmm_error* err);

/** A new statistics_resource_adaptor over `upstream`. */
int rmm_statistics_resource_adaptor_new(rmm_resource upstream, rmm_resource* out, rmm_error* err);

/** The bytes counter of the adaptor's current frame, into *out. */
int rmm_statistics_resource_adaptor_get_bytes_counter(rmm_resource resource, rmm_counter* out, rmm_error* err);

/** The allocations counter of the adaptor's current frame, into *out. */
int rmm_statistics_resource_adaptor_get_allocations_counter(rmm_resource resource, rmm_counter* out,
                                                            rmm_error* err);

/** Starts a new frame of zero counters; the counters from before go to *bytes_out and
 *  *allocations_out (both required). */
int rmm_statistics_resource_adaptor_push_counters(rmm_resource resource, rmm_counter* bytes_out,
                                                  rmm_counter* allocations_out, rmm_error* err);

/** Ends the current frame, folds it into its parent and returns its counters. Popping the last
 *  frame (no push before) fails with RMM_ERROR_INVALID_ARGUMENT ("cannot pop the last counter pair";
 *  RMM throws std::out_of_range). */
int rmm_statistics_resource_adaptor_pop_counters(rmm_resource resource, rmm_counter* bytes_out,
                                                 rmm_counter* allocations_out, rmm_error* err);

/** A new limiting_resource_adaptor over `upstream`: allocations past `allocation_limit` bytes fail
 *  with RMM_ERROR_OUT_OF_MEMORY; sizes count rounded up to `alignment` (a power of two, RMM's
 *  default 256). */
int rmm_limiting_resource_adaptor_new(rmm_resource upstream, uint64_t allocation_limit, uint64_t alignment,
                                      rmm_resource* out, rmm_error* err);

/** The bytes allocated through a limiting_resource_adaptor and not yet freed, into *out. */
int rmm_limiting_resource_adaptor_get_allocated_bytes(rmm_resource resource, uint64_t* out, rmm_error* err);

/** The limit of a limiting_resource_adaptor in bytes, into *out. */
int rmm_limiting_resource_adaptor_get_allocation_limit(rmm_resource resource, uint64_t* out, rmm_error* err);

/** A new tracking_resource_adaptor over `upstream`; non-zero `capture_stacks` records a stack trace
 *  per allocation. */
int rmm_tracking_resource_adaptor_new(rmm_resource upstream, int capture_stacks, rmm_resource* out, rmm_error* err);

/** The bytes outstanding through a tracking_resource_adaptor, into *out. */
int rmm_tracking_resource_adaptor_get_allocated_bytes(rmm_resource resource, uint64_t* out, rmm_error* err);

/** The outstanding allocations of a tracking_resource_adaptor as text, one line each
 *  ("0x<address>: <bytes> B", then " : callstack:" and the stack when captured): at most
 *  capacity - 1 bytes and a NUL are copied to `buf` (nothing when capacity is 0, where buf may be
 *  NULL); *length_out (required) receives the full length without the NUL. The text may change
 *  between two calls while other threads allocate. */
int rmm_tracking_resource_adaptor_get_outstanding_allocations_str(rmm_resource resource, char* buf, size_t capacity,
                                                                  size_t* length_out, rmm_error* err);

/** A new aligned_resource_adaptor over `upstream`: allocations of at least `alignment_threshold`
 *  bytes (RMM_SIZE_NONE: RMM's default, 0 = every one) are aligned to `alignment` (a power of two;
 *  below 256 means 256). */
int rmm_aligned_resource_adaptor_new(rmm_resource upstream, uint64_t alignment, uint64_t alignment_threshold,
                                     rmm_resource* out, rmm_error* err);

/** A new arena_memory_resource over `upstream`; `arena_size` may be RMM_SIZE_NONE (rmm-rs's
 *  default); non-zero `dump_log_on_failure` writes the arena's state to a log when it runs out. */
int rmm_arena_memory_resource_new(rmm_resource upstream, uint64_t arena_size, int dump_log_on_failure,
                                  rmm_resource* out, rmm_error* err);

/** A new fixed_size_memory_resource over `upstream` (RMM's defaults: 1 MiB blocks, 128 preallocated). */
int rmm_fixed_size_memory_resource_new(rmm_resource upstream, uint64_t block_size, uint64_t blocks_to_preallocate,
                                       rmm_resource* out, rmm_error* err);

/** The block size of a fixed_size_memory_resource, into *out. */
int rmm_fixed_size_memory_resource_get_block_size(rmm_resource resource, uint64_t* out, rmm_error* err);

/** A new binning_memory_resource over `upstream` without bins (every size goes to the upstream
 *  until rmm_binning_memory_resource_add_bin). */
int rmm_binning_memory_resource_new(rmm_resource upstream, rmm_resource* out, rmm_error* err);

/** A new binning_memory_resource with fixed-size bins of 2^min_size_exponent ... 2^max_size_exponent
 *  bytes (negative or min > max: INVALID_ARGUMENT). */
int rmm_binning_memory_resource_new_with_exponents(rmm_resource upstream, int min_size_exponent,
                                                   int max_size_exponent, rmm_resource* out, rmm_error* err);

/** Adds a bin for allocations up to `allocation_size` bytes to a binning_memory_resource:
 *  `bin_resource` (BORROWED and retained: unlike RMM's non-owning ref, it is kept alive), or a new
 *  fixed_size_memory_resource over the upstream when it is the empty handle {NULL, NULL}. */
int rmm_binning_memory_resource_add_bin(rmm_resource resource, uint64_t allocation_size, rmm_resource bin_resource,
                                        rmm_error* err);

/** A new simulated device of `capacity` bytes: fake, never dereferenceable addresses, for testing
 *  sub-allocators that need much address space without a GPU. Not an RMM resource. */
int rmm_simulated_memory_resource_new(uint64_t capacity, rmm_resource* out, rmm_error* err);

/* ---------------------------------------------------------------------------------------------
 * CUDA resources (conventions as for the sub-allocators above)
 * ------------------------------------------------------------------------------------------- */

/** A new managed_memory_resource (cuMemAllocManaged; host and device accessible). *out is OWNING.
 *  Succeeds in host mode too; allocating from it there fails with RMM_ERROR_NO_DRIVER or
 *  RMM_ERROR_NO_DEVICE. */
int rmm_managed_memory_resource_new(rmm_resource* out, rmm_error* err);

/** A new pinned_host_memory_resource (cuMemHostAlloc; host and device accessible). *out is OWNING.
 *  Succeeds in host mode too; allocating from it there fails as for managed memory. */
int rmm_pinned_host_memory_resource_new(rmm_resource* out, rmm_error* err);

/** Values of RMM's allocation_handle_type (the export_handle_type of cuda_async_memory_resource). */
#define RMM_ALLOCATION_HANDLE_TYPE_NONE 0
#define RMM_ALLOCATION_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR 1
#define RMM_ALLOCATION_HANDLE_TYPE_WIN32 2
#define RMM_ALLOCATION_HANDLE_TYPE_WIN32_KMT 4
#define RMM_ALLOCATION_HANDLE_TYPE_FABRIC 8

/** A new cuda_async_memory_resource with its own CUDA memory pool on the current device.
 *  initial_pool_size (primes the pool) and release_threshold (default: keep everything) may be
 *  RMM_SIZE_NONE; export_handle_type is an RMM_ALLOCATION_HANDLE_TYPE_* value. Fails with
 *  RMM_ERROR_NO_DRIVER / RMM_ERROR_NO_DEVICE without a GPU, RMM_ERROR_UNSUPPORTED ("Requested IPC
 *  memory handle type not supported") for a handle type the device cannot export (the win32 kinds
 *  always), RMM_ERROR_INVALID_ARGUMENT for a value that is no allocation_handle_type. */
int rmm_cuda_async_memory_resource_new(uint64_t initial_pool_size, uint64_t release_threshold,
                                       int32_t export_handle_type, rmm_resource* out, rmm_error* err);

/** The CUDA memory pool (a cudaMemPool_t / CUmemoryPool) of a cuda_async_memory_resource, into *out;
 *  it lives while the resource does. */
int rmm_cuda_async_memory_resource_pool_handle(rmm_resource resource, void** out, rmm_error* err);

/** A new sam_headroom_memory_resource: system memory, placed on the current GPU while more than
 *  `headroom` bytes of it stay free. Fails with RMM_ERROR_NO_DRIVER / RMM_ERROR_NO_DEVICE without a
 *  GPU, RMM_ERROR_UNSUPPORTED when the device cannot access system memory. */
int rmm_sam_headroom_memory_resource_new(uint64_t headroom, rmm_resource* out, rmm_error* err);

/* ---------------------------------------------------------------------------------------------
 * More adaptors (conventions as for the sub-allocators above)
 * ------------------------------------------------------------------------------------------- */

/** A new logging_resource_adaptor over `upstream`: one CSV line per event
 *  ("Thread,Time,Action,Pointer,Size,Stream" first) in the file `filename` (created or truncated;
 *  NULL: the file named by the environment variable RMM_LOG_FILE, INVALID_ARGUMENT when unset);
 *  non-zero `auto_flush` flushes every line. A file that cannot be created is INVALID_ARGUMENT. */
int rmm_logging_resource_adaptor_new(rmm_resource upstream, const char* filename, int auto_flush,
                                     rmm_resource* out, rmm_error* err);

/** Writes out the buffered lines of a logging_resource_adaptor. */
int rmm_logging_resource_adaptor_flush(rmm_resource resource, rmm_error* err);

/** The log file's name of a logging_resource_adaptor: at most capacity - 1 bytes of it and a NUL
 *  are copied to `buf` (nothing when capacity is 0, where buf may be NULL); *length_out (required)
 *  receives its full length without the NUL, so a caller may ask for the length first. */
int rmm_logging_resource_adaptor_get_file_name(rmm_resource resource, char* buf, size_t capacity,
                                               size_t* length_out, rmm_error* err);

/** A new prefetch_resource_adaptor over `upstream`: each allocation is prefetched to the current
 *  device on its stream (a no-op for memory that cannot be prefetched). */
int rmm_prefetch_resource_adaptor_new(rmm_resource upstream, rmm_resource* out, rmm_error* err);

/** A new recording_resource_adaptor over `upstream` (an rmm-rs extra): reports every allocation,
 *  free and out-of-memory failure through it to the memory timeline while the timeline records
 *  (rmm_timeline_start), and only forwards otherwise. */
int rmm_recording_resource_adaptor_new(rmm_resource upstream, rmm_resource* out, rmm_error* err);

/** A new thread_safe_resource_adaptor over `upstream`: one mutex around every upstream call. */
int rmm_thread_safe_resource_adaptor_new(rmm_resource upstream, rmm_resource* out, rmm_error* err);

/** A failure callback: gets the size of the failed request and its context; returns non-zero to
 *  retry the request, 0 to give up. It may be called from several threads at once and must not
 *  throw or unwind. */
typedef int (*rmm_failure_callback)(size_t bytes, void* context);

/** Releases a failure callback's context. */
typedef void (*rmm_failure_callback_release)(void* context);

/** A new failure_callback_resource_adaptor over `upstream`: when the upstream is out of memory,
 *  callback(bytes, context) is called and the request retried while it returns non-zero; then the
 *  out-of-memory error is returned. Other errors pass through. The adaptor takes over `context`:
 *  release_context (may be NULL) is called on it once, when the last reference to the adaptor is
 *  gone, or before this call returns if it fails (a NULL callback is INVALID_ARGUMENT). */
int rmm_failure_callback_resource_adaptor_new(rmm_resource upstream, rmm_failure_callback callback, void* context,
                                              rmm_failure_callback_release release_context, rmm_resource* out,
                                              rmm_error* err);

/* ---------------------------------------------------------------------------------------------
 * Streams and stream-ordered memory operations
 *
 * A stream is its raw handle: the CUstream, which is also the runtime's cudaStream_t, so a stream
 * from the CUDA runtime, CuPy or PyTorch can be passed as is. NULL (the default stream),
 * cudaStreamLegacy ((void*)1) and cudaStreamPerThread ((void*)2) are the special default streams.
 * In host mode (no driver or no device) no stream can be created, and the special streams have
 * nothing to wait for: synchronizing or querying them succeeds.
 * ------------------------------------------------------------------------------------------- */

/** rmm_stream_create flags (the values of cudaStreamDefault and cudaStreamNonBlocking). */
#define RMM_STREAM_SYNC_DEFAULT 0
#define RMM_STREAM_NON_BLOCKING 1

/** Creates a stream on the current device with an RMM_STREAM_* flag and writes its handle to *out
 *  (NULL on failure); the caller destroys it with rmm_stream_destroy. Fails with
 *  RMM_ERROR_NO_DRIVER / RMM_ERROR_NO_DEVICE in host mode, RMM_ERROR_INVALID_ARGUMENT for other
 *  flags. */
int rmm_stream_create(int flags, void** out, rmm_error* err);

/** Destroys a stream made by rmm_stream_create (queued work still completes). Any other handle,
 *  or one already destroyed, is RMM_ERROR_INVALID_ARGUMENT and nothing is destroyed. */
int rmm_stream_destroy(void* stream, rmm_error* err);

/** Blocks until all work queued on `stream` has finished. */
int rmm_stream_synchronize(void* stream, rmm_error* err);

/** Writes 1 to *idle_out when all work queued on `stream` has finished, else 0. */
int rmm_stream_query(void* stream, int* idle_out, rmm_error* err);

/** Copies `bytes` bytes from `src` to `dst`, ordered on `stream`: device, managed, pinned and
 *  pageable host memory alike (the direction comes from the addresses); a memmove in host mode.
 *  Both ranges must stay valid until the copy has completed on `stream`. 0 bytes does nothing; a
 *  NULL pointer otherwise is RMM_ERROR_INVALID_ARGUMENT. */
int rmm_memcpy_async(void* dst, const void* src, size_t bytes, void* stream, rmm_error* err);

/** Sets `bytes` bytes at `ptr` to (unsigned char)value, ordered on `stream`, in any kind of memory
 *  (pageable host memory is filled from the host once the work queued before on `stream` is done);
 *  a memset in host mode. */
int rmm_memset_async(void* ptr, int value, size_t bytes, void* stream, rmm_error* err);

/** Migrates `bytes` bytes of managed memory at `ptr` to `device`, ordered on `stream` (RMM's
 *  prefetch). A no-op for memory that is not managed, so always in host mode. */
int rmm_prefetch(const void* ptr, size_t bytes, int device, void* stream, rmm_error* err);

/* ---------------------------------------------------------------------------------------------
 * Device buffers (RMM's device_buffer)
 *
 * An rmm_device_buffer* is an opaque, OWNING pointer to uninitialized memory with a size, a
 * capacity, an alignment, a stream, a resource and the device it was made on.
 * Ownership:
 *   - the constructors (rmm_device_buffer_new, _new_copy, _copy) write an owning pointer to *out
 *     (NULL on failure); give it back with rmm_device_buffer_free(), which frees the memory on the
 *     buffer's stream and device and releases the buffer's reference to its resource;
 *   - a resource passed in is BORROWED: the buffer retains its own reference, so the resource lives
 *     at least as long as the memory. The empty handle {NULL, NULL} means the current device's
 *     resource (RMM's default mr), which the buffer then shares;
 *   - every other function BORROWS the buffer. A buffer may be read from several threads, but not
 *     while one thread changes it (set_stream, reserve, resize, shrink_to_fit, free).
 * Streams: allocation, copies done by the buffer and the final free are ordered on its stream;
 * resize, reserve and shrink_to_fit make their stream the buffer's stream first, as RMM does.
 * ------------------------------------------------------------------------------------------- */

/** An owning device buffer (opaque). */
typedef struct rmm_device_buffer rmm_device_buffer;

/** A new buffer of `size` bytes aligned to `alignment` (a power of two, else
 *  RMM_ERROR_INVALID_ARGUMENT), allocated from `resource` (BORROWED; empty: the current device's) on
 *  `stream`. Size 0 allocates nothing (data is NULL). */
int rmm_device_buffer_new(size_t size, size_t alignment, void* stream, rmm_resource resource,
                          rmm_device_buffer** out, rmm_error* err);

/** As rmm_device_buffer_new, holding a copy of `size` bytes at `src` (host, pinned, managed or
 *  device memory), copied asynchronously on `stream`: `src` must stay valid until then. */
int rmm_device_buffer_new_copy(const void* src, size_t size, size_t alignment, void* stream,
                               rmm_resource resource, rmm_device_buffer** out, rmm_error* err);

/** A deep copy of `other` (its size, with its alignment; capacity = size) allocated from `resource`
 *  (BORROWED; empty: the current device's) and copied asynchronously on `stream`. */
int rmm_device_buffer_copy(const rmm_device_buffer* other, void* stream, rmm_resource resource,
                           rmm_device_buffer** out, rmm_error* err);

/** Frees an OWNING buffer (see Ownership above). NULL is a no-op. */
void rmm_device_buffer_free(rmm_device_buffer* buf);

/** rmm_device_buffer_free that reports: RMM_ERROR_INVALID_ARGUMENT for a buffer already freed
 *  (see "Misuse of handles" above). NULL is a no-op (RMM_OK). */
int rmm_device_buffer_free_checked(rmm_device_buffer* buf, rmm_error* err);

/** The memory (NULL when nothing is allocated, or for a NULL buf). */
void* rmm_device_buffer_data(const rmm_device_buffer* buf);

/** The bytes in use (0 for a NULL buf). */
size_t rmm_device_buffer_size(const rmm_device_buffer* buf);

/** The bytes allocated, at least the size (0 for a NULL buf). */
size_t rmm_device_buffer_capacity(const rmm_device_buffer* buf);

/** The alignment the memory is allocated with (0 for a NULL buf). */
size_t rmm_device_buffer_alignment(const rmm_device_buffer* buf);

/** The buffer's stream (NULL, the default stream, for a NULL buf). */
void* rmm_device_buffer_stream(const rmm_device_buffer* buf);

/** Orders the buffer's future work and final free on `stream`; the caller synchronizes it with the
 *  old stream if work is still queued there. */
int rmm_device_buffer_set_stream(rmm_device_buffer* buf, void* stream, rmm_error* err);

/** Grows the capacity to at least `new_capacity` bytes, keeping size and contents. On failure the
 *  buffer is unchanged (except for its stream). */
int rmm_device_buffer_reserve(rmm_device_buffer* buf, size_t new_capacity, void* stream, rmm_error* err);

/** Sets the size: in place within the capacity, else reallocated to exactly `new_size` bytes with
 *  the contents copied on `stream`. New bytes are uninitialized. */
int rmm_device_buffer_resize(rmm_device_buffer* buf, size_t new_size, void* stream, rmm_error* err);

/** Reallocates to exactly the size when the capacity is larger, copying on `stream`. */
int rmm_device_buffer_shrink_to_fit(rmm_device_buffer* buf, void* stream, rmm_error* err);

/** The buffer's resource: *out receives an OWNING handle (the caller releases it). */
int rmm_device_buffer_memory_resource(const rmm_device_buffer* buf, rmm_resource* out, rmm_error* err);

/** The device the buffer was made on (and is freed on) into *out; -1 for a buffer made in host
 *  mode. */
int rmm_device_buffer_device(const rmm_device_buffer* buf, int* out, rmm_error* err);

/* ---------------------------------------------------------------------------------------------
 * Devices
 *
 * What <rmm/cuda_device.hpp> needs without the CUDA runtime. Host mode has no devices, but the
 * registry keeps host memory in device 0's slot, so the current device is 0 there; counting devices,
 * making one current or asking for its memory fail with RMM_ERROR_NO_DRIVER / RMM_ERROR_NO_DEVICE.
 * ------------------------------------------------------------------------------------------- */

/** The number of CUDA devices into *out. */
int rmm_device_count(int* out, rmm_error* err);

/** The calling thread's current device into *out (0 when it has no context, and in host mode). */
int rmm_device_get_current(int* out, rmm_error* err);

/** Makes `device` current on the calling thread (its primary context, as cudaSetDevice does);
 *  RMM_ERROR_INVALID_ARGUMENT for a device that does not exist. */
int rmm_device_set_current(int device, rmm_error* err);

/** The free and total bytes of the current device's memory into *free_out and *total_out. */
int rmm_available_device_memory(size_t* free_out, size_t* total_out, rmm_error* err);

/* ---------------------------------------------------------------------------------------------
 * Callback resource, CUDA async view and managed pools, logging to a sink (conventions as above)
 * ------------------------------------------------------------------------------------------- */

/** The allocate function of a callback_memory_resource: writes memory for `bytes` bytes (aligned
 *  to 256), usable on `stream` (a cudaStream_t), to *out and returns RMM_OK, or returns an
 *  RMM_ERROR_* kind and fills the optional err. Called only for bytes > 0. It may be called from
 *  several threads at once and must not throw or unwind. A NULL *out with RMM_OK is reported as
 *  RMM_ERROR_OUT_OF_MEMORY. */
typedef int (*rmm_allocate_callback)(size_t bytes, void* stream, void* context, void** out, rmm_error* err);

/** The deallocate function of a callback_memory_resource: returns `ptr` (from the allocate
 *  function, with its `bytes`), ordered on `stream`. Same rules as rmm_allocate_callback. */
typedef int (*rmm_deallocate_callback)(void* ptr, size_t bytes, void* stream, void* context, rmm_error* err);

/** Releases the context of a callback_memory_resource. */
typedef void (*rmm_callback_release)(void* context);

/** A new callback_memory_resource made of `allocate` and `deallocate` (both required), whose memory
 *  has the access bits `access` (RMM_ACCESS_DEVICE and/or RMM_ACCESS_HOST, not 0). The resource
 *  takes over `context`: release_context (may be NULL) is called on it once, when the last
 *  reference is gone, or before this call returns if it fails (INVALID_ARGUMENT for NULL functions
 *  or bad access bits). */
int rmm_callback_memory_resource_new(rmm_allocate_callback allocate, rmm_deallocate_callback deallocate,
                                     void* context, rmm_callback_release release_context, uint32_t access,
                                     rmm_resource* out, rmm_error* err);

/** A new cuda_async_view_memory_resource: stream-ordered memory from the CUDA memory pool
 *  `pool_handle` (a cudaMemPool_t), which the caller keeps alive while the resource or memory from
 *  it is in use (it is never destroyed by the resource). NULL is INVALID_ARGUMENT ("Unexpected null
 *  pool handle."); without a GPU, RMM_ERROR_NO_DRIVER / RMM_ERROR_NO_DEVICE. */
int rmm_cuda_async_view_memory_resource_new(void* pool_handle, rmm_resource* out, rmm_error* err);

/** The CUDA memory pool of a cuda_async_view_memory_resource, into *out. */
int rmm_cuda_async_view_memory_resource_pool_handle(rmm_resource resource, void** out, rmm_error* err);

/** A new cuda_async_managed_memory_resource: managed memory (host and device accessible) from the
 *  current device's default managed memory pool, ordered on streams. Fails with
 *  RMM_ERROR_NO_DRIVER / RMM_ERROR_NO_DEVICE without a GPU, RMM_ERROR_UNSUPPORTED when the driver
 *  or device has no managed memory pools. */
int rmm_cuda_async_managed_memory_resource_new(rmm_resource* out, rmm_error* err);

/** The CUDA memory pool of a cuda_async_managed_memory_resource, into *out. */
int rmm_cuda_async_managed_memory_resource_pool_handle(rmm_resource resource, void** out, rmm_error* err);

/** Writes one whole line of a log: `length` bytes at `data`, the last one '\n' (not NUL-terminated).
 *  Returns 0 on success. It must not throw or unwind. */
typedef int (*rmm_log_write)(const char* data, size_t length, void* context);

/** Flushes a log sink. Returns 0 on success. It must not throw or unwind. */
typedef int (*rmm_log_flush)(void* context);

/** Releases a log sink's context. */
typedef void (*rmm_log_release)(void* context);

/** A new logging_resource_adaptor over `upstream` writing its CSV log (the header line first) to a
 *  sink: write(line, length, context) gets one whole line per call, flush(context) (may be NULL)
 *  runs on rmm_logging_resource_adaptor_flush, after every line with non-zero `auto_flush`, and when
 *  the last reference is gone. Calls come from any thread but never two at once. A failing write
 *  never fails an allocation (the line is lost). The adaptor takes over `context`: release_context
 *  (may be NULL) is called on it once, after the last call, or before this call returns if it fails
 *  (a NULL write is INVALID_ARGUMENT). get_file_name gives "" for such an adaptor. */
int rmm_logging_resource_adaptor_new_with_sink(rmm_resource upstream, rmm_log_write write, rmm_log_flush flush,
                                               void* context, rmm_log_release release_context, int auto_flush,
                                               rmm_resource* out, rmm_error* err);

/* ---- PyTorch's pluggable allocator (torch.cuda.memory.CUDAPluggableAllocator) ---- */

/** Allocates `size` bytes from the per-device resource of `device` (made current for the call),
 *  ordered on `stream` (a cudaStream_t). Returns NULL on any failure; never throws. The functions
 *  RMM ships in _torch_allocator.so as `allocate`. */
void* rmm_torch_allocate(size_t size, int device, void* stream);

/** Returns `ptr` from rmm_torch_allocate(size, device, ...) to the per-device resource of `device`,
 *  ordered on `stream`. A failure is reported on the debug log; never throws. */
void rmm_torch_deallocate(void* ptr, size_t size, int device, void* stream);

/* ---- Process exit (bindings-cpp/src/process_exit.rs): RMM's rmm::process_is_exiting() ---- */

/** 1 once the process has begun exit() (the hook below has run), 0 before. One atomic load: safe from
 *  destructors at any time. */
int rmm_process_is_exiting(void);

/** Registers, once per process, the atexit handler that makes rmm_process_is_exiting() return 1.
 *  Later calls do nothing. Returns 0, or -1 when atexit refused the registration. */
int rmm_register_process_exit_hook(void);

/* ---- Tracking report (bindings-cpp/src/tracking_report.rs): RMM's get_outstanding_allocations() ---- */

/** One outstanding allocation of a tracking_resource_adaptor. */
typedef struct rmm_allocation_record {
  void* ptr;      /**< the pointer the allocation returned */
  size_t bytes;   /**< its size */
  int has_stack;  /**< 1 when its stack was captured (capture_stacks), else 0 */
} rmm_allocation_record;

/** Writes up to `capacity` records of the outstanding allocations of a tracking_resource_adaptor (by
 *  address) to `out`, and their total number to *count_out (capacity 0 and NULL out: the number only).
 *  INVALID_ARGUMENT for another kind of resource or a NULL count_out. */
int rmm_tracking_resource_adaptor_get_outstanding_allocations(rmm_resource resource, rmm_allocation_record* out,
                                                              size_t capacity, size_t* count_out, rmm_error* err);

/** The stack captured for the outstanding allocation at `ptr` as text, copied into buf (at most
 *  capacity - 1 bytes and a NUL); *length_out gets the full length ("" without a stack).
 *  INVALID_ARGUMENT when ptr is not outstanding through the adaptor. */
int rmm_tracking_resource_adaptor_get_allocation_stack(rmm_resource resource, const void* ptr, char* buf,
                                                       size_t capacity, size_t* length_out, rmm_error* err);

/** Writes the outstanding allocations of a tracking_resource_adaptor to the debug log (RMM's
 *  log_outstanding_allocations(), at debug level). INVALID_ARGUMENT for another kind of resource. */
int rmm_tracking_resource_adaptor_log_outstanding_allocations(rmm_resource resource, rmm_error* err);

/* ---- Debug log (bindings-cpp/src/debug_log.rs): the log of the process's engine ----
 *
 * The engine's diagnostics (RMM's debug log: the file named by RMM_DEBUG_LOG_FILE, else stderr) are
 * written by this library. Levels are rapids_logger's level_enum values. */

#define RMM_LOG_LEVEL_TRACE 0
#define RMM_LOG_LEVEL_DEBUG 1
#define RMM_LOG_LEVEL_INFO 2
#define RMM_LOG_LEVEL_WARN 3
#define RMM_LOG_LEVEL_ERROR 4
#define RMM_LOG_LEVEL_CRITICAL 5
#define RMM_LOG_LEVEL_OFF 6

/** Sets the debug log's level (an RMM_LOG_LEVEL_* value, else INVALID_ARGUMENT): messages below it
 *  are not written. */
int rmm_debug_log_set_level(int level, rmm_error* err);

/** The debug log's level (default RMM_LOG_LEVEL_INFO). */
int rmm_debug_log_level(void);

/** 1 when a message at `level` would be written (`level` at or above the log's level), else 0. */
int rmm_debug_log_should_log(int level);

/** Sets the level at and above which each line is written out at once (else INVALID_ARGUMENT). */
int rmm_debug_log_set_flush_level(int level, rmm_error* err);

/** The flush level (default RMM_LOG_LEVEL_TRACE: every line is written out at once). */
int rmm_debug_log_flush_level(void);

/** Writes out the lines buffered below the flush level. */
void rmm_debug_log_flush(void);

/* ---- Memory timeline (bindings-cpp/src/timeline.rs): the process's allocations over time ----
 *
 * One recorder per process, off by default. rmm_timeline_start turns it on and puts a
 * recording_resource_adaptor over each device's resource (unless one is there), so every
 * allocation made from the registry, in any language, is recorded: size, stream, device, time,
 * thread, resource stack and the caller's stack (from the stack provider, or native frames with
 * RMM_TIMELINE_NATIVE_STACKS); pool and arena segment growth and trim, and out-of-memory failures,
 * too. Snapshots have the data of PyTorch's torch.cuda.memory._snapshot() (pickle: what memory_viz
 * reads), or JSON, or RMM's CSV allocation log (for rmm-replay). */

/** rmm_timeline_start flag: capture native stacks, before the stack provider's frames (costly). */
#define RMM_TIMELINE_NATIVE_STACKS 1
/** rmm_timeline_start flag: forget what was recorded before. */
#define RMM_TIMELINE_CLEAR 2
/** Snapshot formats. */
#define RMM_TIMELINE_FORMAT_PICKLE 0
#define RMM_TIMELINE_FORMAT_JSON 1
#define RMM_TIMELINE_FORMAT_CSV 2

/** Takes one frame of a caller's stack, innermost first (strings valid for the call). */
typedef void (*rmm_timeline_frame_sink)(void* sink_context, const char* filename, uint32_t line, const char* name);
/** Gives the calling thread's stack to `sink`, one call per frame, and returns 1; 0 when it has none. */
typedef int (*rmm_timeline_stack_fn)(void* context, rmm_timeline_frame_sink sink, void* sink_context);

/** Turns the recorder on, keeping the last `max_entries` events (at least 1). `dump_on_oom`: NULL,
 *  or a file (.pickle, .json, .csv) the snapshot is written to at the first out-of-memory failure. */
int rmm_timeline_start(uint64_t max_entries, uint32_t flags, const char* dump_on_oom, rmm_error* err);

/** Turns the recorder off and puts back the resources rmm_timeline_start wrapped (where still
 *  current); what was recorded stays for rmm_timeline_snapshot. */
int rmm_timeline_stop(rmm_error* err);

/** 1 while the recorder is on, else 0. */
int rmm_timeline_is_recording(void);

/** Forgets every recorded event, live allocation and segment. */
void rmm_timeline_clear(void);

/** The snapshot in `format` (RMM_TIMELINE_FORMAT_*): `*data` and `*length`; give the bytes back
 *  with rmm_timeline_bytes_free. */
int rmm_timeline_snapshot(int format, void** data, size_t* length, rmm_error* err);

/** Gives back the bytes of rmm_timeline_snapshot (NULL is ignored). */
void rmm_timeline_bytes_free(void* data, size_t length);

/** Writes the snapshot to `path` in the format its extension names (.pickle/.pkl, .json, .csv). */
int rmm_timeline_dump(const char* path, rmm_error* err);

/** Installs `provide` (NULL removes it): called on the allocating thread, inside each recorded
 *  allocation, for the caller's stack; it must not allocate from rmm. */
int rmm_timeline_set_stack_provider(rmm_timeline_stack_fn provide, void* context, rmm_error* err);

/* ---- Owning exports (bindings-cpp/src/capsules.rs): buffers and resources across binaries ----
 *
 * An export is a plain struct that moves ownership between binaries (C++, Python, Rust, any copy of
 * rmm) with no copy of the memory. Each carries the `deleter` of the binary that made it, so any
 * consumer can give it back (DLPack's DLManagedTensor pattern). Python wraps them in versioned
 * capsules (docs/cross-language.md):
 *   RMM_DEVICE_BUFFER_CAPSULE  "rmm.device_buffer.v1"   holds an rmm_buffer_export*; a consumer
 *                              that adopts it renames the capsule RMM_USED_DEVICE_BUFFER_CAPSULE;
 *                              the capsule's destructor calls the deleter only under the first name;
 *   RMM_MEMORY_RESOURCE_CAPSULE "rmm.memory_resource.v1" holds an rmm_resource_export*; importing
 *                              adds a reference, the capsule's destructor calls the deleter.
 */
#define RMM_DEVICE_BUFFER_CAPSULE "rmm.device_buffer.v1"
#define RMM_USED_DEVICE_BUFFER_CAPSULE "used_rmm.device_buffer.v1"
#define RMM_MEMORY_RESOURCE_CAPSULE "rmm.memory_resource.v1"
#define RMM_BUFFER_EXPORT_VERSION 1
#define RMM_RESOURCE_EXPORT_VERSION 1

/** An owning device buffer in transit. To ADOPT it: check version, read the fields, set data to
 *  NULL, size and capacity to 0 and resource to {NULL, NULL}, then call deleter (which then frees
 *  only the struct); the memory is then yours to free with resource, on stream and device. To DROP
 *  it: call deleter as it is (it frees the memory on its stream and device through its resource). */
typedef struct rmm_buffer_export {
  uint32_t version;     /**< RMM_BUFFER_EXPORT_VERSION */
  int32_t device;       /**< the device the memory was made on and is freed on; -1 in host mode */
  void* data;           /**< the memory; NULL exactly when capacity is 0 */
  size_t size;          /**< bytes in use */
  size_t capacity;      /**< bytes allocated from resource (what the free gives back) */
  size_t alignment;     /**< the alignment it was allocated with (a power of two) */
  void* stream;         /**< cudaStream_t the memory is used and freed on (NULL: default stream) */
  rmm_resource resource; /**< OWNING: the resource the memory came from */
  void (*deleter)(struct rmm_buffer_export* self); /**< set by the producer */
  void* manager_ctx;    /**< the producer's; consumers leave it alone */
} rmm_buffer_export;

/** An owning resource reference in transit: importing it adds a reference of your own and leaves
 *  it unchanged; deleter gives its reference back and frees it. */
typedef struct rmm_resource_export {
  uint32_t version;      /**< RMM_RESOURCE_EXPORT_VERSION */
  rmm_resource resource; /**< OWNING: the export's reference */
  void (*deleter)(struct rmm_resource_export* self); /**< set by the producer */
} rmm_resource_export;

/** Moves the memory of `buf` into a new export (no copy). On success `buf` is CONSUMED and *out is
 *  OWNING (give it to a consumer or to rmm_buffer_export_free). On failure (NULL buf or out:
 *  INVALID_ARGUMENT) buf is untouched and *out is NULL. */
int rmm_device_buffer_export(rmm_device_buffer* buf, rmm_buffer_export** out, rmm_error* err);

/** Adopts an export made by any binary as a new OWNING buffer in *out (no copy): the memory is freed
 *  once, by rmm_device_buffer_free, on the export's stream and device, through the export's
 *  resource (even if another resource is current by then). On success the export is CONSUMED; an
 *  export of another version, without deleter or resource, with an invalid resource handle, a bad
 *  alignment or inconsistent sizes is INVALID_ARGUMENT and is NOT consumed. */
int rmm_device_buffer_import(rmm_buffer_export* export_, rmm_device_buffer** out, rmm_error* err);

/** Gives an OWNING export back through its own deleter. NULL is a no-op. */
void rmm_buffer_export_free(rmm_buffer_export* export_);

/** A new OWNING export of `resource` (BORROWED; the export holds its own reference). The empty or an
 *  invalid handle is INVALID_ARGUMENT. */
int rmm_resource_export_new(rmm_resource resource, rmm_resource_export** out, rmm_error* err);

/** The export's resource as a new OWNING handle in *out; the export is unchanged. Another version, a
 *  missing deleter or an invalid handle is INVALID_ARGUMENT. */
int rmm_resource_import(const rmm_resource_export* export_, rmm_resource* out, rmm_error* err);

/** Gives an OWNING resource export back through its own deleter. NULL is a no-op. */
void rmm_resource_export_free(rmm_resource_export* export_);
/* ---- Typed strided views and DLPack 1.x (bindings-cpp/src/views.rs) ---- */

#ifndef __cplusplus
#include <stdbool.h>
#endif

/* DLPack's managed tensors (dlpack.h 1.x). Declared here, not defined: include <dlpack/dlpack.h> to
 * build or read one; these typedefs repeat dlpack.h's and coexist with it. */
typedef struct DLManagedTensorVersioned DLManagedTensorVersioned;
typedef struct DLManagedTensor DLManagedTensor;

/** DLPack's DLDataType, same layout: type code (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLOpaqueHandle 3,
 *  kDLBfloat 4, kDLComplex 5, kDLBool 6, float8/6/4 kinds 7..17), bits per lane, lanes. */
typedef struct rmm_dl_data_type {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} rmm_dl_data_type;

/**
 * A typed strided view of memory owned by a producer (a DLPack tensor, a Python object, a buffer).
 * Caller-owned: an acquire call (rmm_strided_view_from_*) fills it and keeps the producer alive;
 * rmm_strided_view_release() lets go once (like PyObject_GetBuffer / PyBuffer_Release). Read the
 * fields directly; every pointer is valid until the release. `generation` is the validity word:
 * non-zero while acquired, 0 after release; a double release, or a release of a stale copy, is
 * RMM_ERROR_INVALID_ARGUMENT, never a crash.
 */
typedef struct rmm_strided_view {
  uintptr_t ptr;               /**< address of element [0,...,0] (DLPack data + byte_offset) */
  int ndim;                    /**< number of dimensions (0: a scalar) */
  const int64_t* shape;        /**< ndim extents (NULL when ndim is 0) */
  const int64_t* strides;      /**< ndim strides in items, as DLPack (negative: reversed; 0: broadcast) */
  const int64_t* byte_strides; /**< ndim strides in bytes (buffer protocol, CUDA array interface) */
  int64_t itemsize;            /**< bytes per item */
  rmm_dl_data_type dtype;      /**< the DLPack dtype */
  const char* format;          /**< "<f4"-style format string ("|b1", "<c8", "bfloat16", ...) */
  int device_type;             /**< DLPack DLDeviceType: 1 CPU, 2 CUDA, 3 CUDA host, 13 CUDA managed */
  int device_id;               /**< device ordinal (0 for the host) */
  bool device_accessible;      /**< CUDA kernels can read the data */
  bool readonly;               /**< must not be written through this view */
  const void* owner;           /**< identifies the producer kept alive (opaque) */
  /** Non-NULL for a view from rmm_strided_view_to_device(): this struct in device memory, with its
   *  shape, strides, byte_strides and format there too (pass it to a kernel). */
  const struct rmm_strided_view* device_copy;
  uint64_t generation;         /**< validity word: non-zero while acquired, 0 once released */
} rmm_strided_view;

/** Acquires a view of a DLPack 1.x tensor. On success the view owns the tensor (its deleter runs at
 *  release); on failure the caller still owns it. UNSUPPORTED for a major version other than 1 or
 *  packed sub-byte items; INVALID_ARGUMENT for NULL or a malformed tensor. */
int rmm_strided_view_from_dlpack_versioned(DLManagedTensorVersioned* tensor, rmm_strided_view* out,
                                           rmm_error* err);

/** The same for a legacy (unversioned) DLPack tensor (no read-only flag: the view is writable). */
int rmm_strided_view_from_dlpack(DLManagedTensor* tensor, rmm_strided_view* out, rmm_error* err);

/** Acquires a view of a Python DLPack capsule (`PyObject*`, from obj.__dlpack__()): "dltensor_versioned"
 *  or legacy "dltensor", renamed "used_..." on success (the view owns the tensor then). Call with the
 *  GIL held. INVALID_ARGUMENT for a consumed capsule or any other object; UNSUPPORTED outside Python. */
int rmm_strided_view_from_dlpack_capsule(void* capsule, rmm_strided_view* out, rmm_error* err);

/** Acquires a view of memory described by parts, with no owner (the caller keeps `data` alive).
 *  `strides` in items, or NULL for C-contiguous; `format` a format string ("<f4", "d", "bfloat16"). */
int rmm_strided_view_from_parts(const void* data, int ndim, const int64_t* shape, const int64_t* strides,
                                const char* format, int device_type, int device_id, bool readonly,
                                rmm_strided_view* out, rmm_error* err);

/** Releases the view: frees its shape/stride storage, lets go of its producer, clears *view
 *  (generation 0). INVALID_ARGUMENT for a double release, a never-acquired struct or a stale copy. */
int rmm_strided_view_release(rmm_strided_view* view, rmm_error* err);

/** RMM_OK when the view is acquired and not released; INVALID_ARGUMENT with the reason otherwise.
 *  Views of every copy of rmm-core in the process are recognised: one acquired by another copy (a
 *  Python extension module's, e.g. rmm.StridedMemoryView.c_view_address) is asked of that copy. */
int rmm_strided_view_check(const rmm_strided_view* view, rmm_error* err);

/** A copy of rmm-core's check of the views it acquired (the type of rmm_strided_view_check). */
typedef int (*rmm_strided_view_check_fn)(const rmm_strided_view* view, rmm_error* err);

/** Called by another copy of rmm-core that routes to this library's registry (not by applications):
 *  numbers it (*domain_out, 1..: the top 16 bits of its views' generations) and keeps `check`, which
 *  rmm_strided_view_check calls for its views. INVALID_ARGUMENT for a NULL `check` or out-pointer. */
int rmm_strided_view_register_domain(rmm_strided_view_check_fn check, uint32_t* domain_out, rmm_error* err);

/** Writes whether the view is row-major (C) and column-major (F) contiguous (either may be NULL). */
int rmm_strided_view_contiguity(const rmm_strided_view* view, bool* c_contiguous, bool* f_contiguous,
                                rmm_error* err);

/** Acquires into *out a view of the same memory whose struct (out->device_copy), shape, strides and
 *  format are also in memory from `resource` (empty handle: the current device's resource; host
 *  memory in host mode), uploaded on `stream` before this returns; freed on `stream` at out's
 *  release. `view` stays acquired. */
int rmm_strided_view_to_device(const rmm_strided_view* view, rmm_resource resource, void* stream,
                               rmm_strided_view* out, rmm_error* err);

/** Exports a live view as a new DLPack 1.1 tensor that keeps the producer alive; the caller calls
 *  (*out)->deleter(*out) once. */
int rmm_strided_view_to_dlpack_versioned(const rmm_strided_view* view, DLManagedTensorVersioned** out,
                                         rmm_error* err);

/** The number of views acquired through this ABI and not yet released (a leak check). */
size_t rmm_strided_view_live_count(void);

/* ---------------------------------------------------------------------------------------------
 * Experimental (not RMM types; the API may change between releases)
 *
 * expandable_pool_memory_resource: a stream-ordered pool on one reserved range of virtual
 * addresses that grows in place (granules mapped with cuMemCreate + cuMemMap + cuMemSetAccess) and
 * gives memory back granule by granule, even between live blocks. Host mode: host memory stands in
 * for the device. docs/design/expandable-pool.md.
 * ------------------------------------------------------------------------------------------- */

/** Counters of an expandable_pool_memory_resource, taken at one moment. */
typedef struct rmm_expandable_pool_statistics {
  uint64_t reserved_bytes;     /**< Bytes of addresses reserved: the most the pool can hold. */
  uint64_t granularity;        /**< The granule: the unit of mapping and of giving back. */
  uint64_t mapped_bytes;       /**< Bytes mapped now (device memory the pool holds). */
  uint64_t peak_mapped_bytes;  /**< The most bytes mapped at once so far. */
  uint64_t used_bytes;         /**< Bytes handed out (requests rounded up to 256). */
  uint64_t free_mapped_bytes;  /**< mapped - used. */
  uint64_t releasable_bytes;   /**< Mapped bytes a trim would give back now. */
  uint64_t books_bytes;        /**< Bytes the pool's books span from the range's start. */
  uint64_t free_blocks;        /**< Free blocks, cached ones included. */
  uint64_t largest_free_block; /**< The largest free block of the shared list (mapped or not). */
  uint64_t cached_bytes;       /**< Free bytes in the per-thread caches. */
  uint64_t growth_steps;       /**< Times the books grew. */
  uint64_t granules_mapped;    /**< Granules mapped so far. */
  uint64_t granules_released;  /**< Granules given back so far. */
} rmm_expandable_pool_statistics;

/** An allocation of another process mapped into this one (rmm_imported_span_receive). */
typedef struct rmm_imported_span rmm_imported_span;

/** A new expandable_pool_memory_resource on the current device: `initial_size` bytes mapped at once
 *  (0 or RMM_SIZE_NONE: none), at most `maximum_size` bytes ever (the reservation, rounded up to the
 *  granule; RMM_SIZE_NONE: twice the device's memory), `release_threshold` mapped bytes kept when
 *  frees give idle granules back (RMM_SIZE_NONE: none; everything stays mapped until a trim).
 *  `peers` holds `peer_count` device ordinals that get access to the pool's memory (NULL when 0;
 *  UNSUPPORTED in host mode or for a device that cannot access this one). OUT_OF_MEMORY when the
 *  device cannot map `initial_size`. */
int rmm_expandable_pool_memory_resource_new(uint64_t initial_size, uint64_t maximum_size, uint64_t release_threshold,
                                            const int32_t* peers, size_t peer_count, rmm_resource* out,
                                            rmm_error* err);

/** The pool's counters, into *out. */
int rmm_expandable_pool_memory_resource_statistics(rmm_resource resource, rmm_expandable_pool_statistics* out,
                                                   rmm_error* err);

/** The bytes the pool has mapped now, into *out. */
int rmm_expandable_pool_memory_resource_mapped_bytes(rmm_resource resource, uint64_t* out, rmm_error* err);

/** The bytes the pool has handed out now, into *out. */
int rmm_expandable_pool_memory_resource_used_bytes(rmm_resource resource, uint64_t* out, rmm_error* err);

/** Gives back every mapped granule that lies wholly in free memory (between live blocks too), after
 *  the work queued on the streams that freed into it; the bytes released into *released_out (may be
 *  NULL). */
int rmm_expandable_pool_memory_resource_trim(rmm_resource resource, uint64_t* released_out, rmm_error* err);

/** The pool's release threshold, into *out (RMM_SIZE_NONE: none). */
int rmm_expandable_pool_memory_resource_release_threshold(rmm_resource resource, uint64_t* out, rmm_error* err);

/** Sets the pool's release threshold (RMM_SIZE_NONE: none); it applies from the next free on. */
int rmm_expandable_pool_memory_resource_set_release_threshold(rmm_resource resource, uint64_t bytes,
                                                              rmm_error* err);

/** Exports the live allocation `ptr` of `bytes` (as allocated) to another process: synchronizes
 *  `stream` (where its bytes were last written), then sends one shareable handle per granule it
 *  touches and where its bytes lie in them over the connected Unix socket `socket_fd` (which stays
 *  the caller's). Keep the allocation until the other process is done with it. INVALID_ARGUMENT when
 *  `ptr` is not a live allocation of `bytes` of this pool; UNSUPPORTED when its granules carry no
 *  shareable handle. */
int rmm_expandable_pool_memory_resource_export(rmm_resource resource, void* ptr, size_t bytes, void* stream,
                                               int socket_fd, rmm_error* err);

/** Receives an allocation another process exported (rmm_expandable_pool_memory_resource_export) from
 *  the connected Unix socket `socket_fd` and maps it here with no copy: *out is the handle to free
 *  with rmm_imported_span_free, *ptr_out its first byte, *size_out its size in bytes. */
int rmm_imported_span_receive(int socket_fd, rmm_imported_span** out, void** ptr_out, size_t* size_out,
                              rmm_error* err);

/** Unmaps an imported allocation (NULL is ignored); its memory goes back to its device once every
 *  process has let go of it. */
void rmm_imported_span_free(rmm_imported_span* span);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RMM_RMM_C_H */
