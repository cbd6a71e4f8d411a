/**
 * @file detail/runtime_shutdown.hpp
 * @brief rmm::detail::register_process_exit_hook() (RMM 26.x): arms rmm::process_is_exiting().
 */
#pragma once

#include <rmm/detail/error.hpp>
#include <rmm/rmm_c.h>

namespace rmm::detail {

/**
 * @brief Registers (once per process) the `atexit` handler that makes rmm::process_is_exiting()
 * return true. The per-device resource functions call it when their reference map is first built.
 * @throws rmm::logic_error when `atexit` refuses the registration (as RMM's RMM_EXPECTS does)
 */
inline void register_process_exit_hook()
{
  RMM_EXPECTS(rmm_register_process_exit_hook() == 0, "Unable to register process-exit hook");
}

}  // namespace rmm::detail
