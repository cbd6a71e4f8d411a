/**
 * @file process_is_exiting.hpp
 * @brief rmm::process_is_exiting() (RMM 26.x): whether the process has begun `exit()`.
 */
#pragma once

#include <rmm/rmm_c.h>

namespace rmm {

/**
 * @brief True once the process has entered `exit()` and run RMM's exit hook; false before.
 *
 * For destructors that may run during process termination (after `main()` returned), when calling
 * into CUDA is undefined behaviour: check this and skip CUDA calls (leaking what the OS reclaims
 * anyway). The flag lives in librmm, one per process, and is set by an `atexit` handler registered
 * when the per-device resource functions are first used (rmm::detail::register_process_exit_hook),
 * so `atexit` handlers registered before that, and static objects constructed before it, see `true`.
 * A single atomic load: safe to call from any destructor; never calls CUDA.
 */
inline bool process_is_exiting() noexcept { return rmm_process_is_exiting() != 0; }

}  // namespace rmm
