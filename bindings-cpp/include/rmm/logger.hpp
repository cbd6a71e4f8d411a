/**
 * @file logger.hpp
 * @brief RMM's logger (RMM 26.x names): rmm::default_logger(), default_sink(), default_pattern()
 * and the RMM_LOG_* macros, built on rapids-logger as RMM's are.
 *
 * rapids-logger is an optional dependency of rmm-rs: this header (and the logging adaptor's
 * constructor taking rapids_logger sinks, and tracking_resource_adaptor::log_outstanding_allocations)
 * need its headers on the include path and its library linked (`pip install rapids-logger`, or
 * conda's `rapids-logger`; in CMake `find_package(rapids_logger)` and link
 * `rapids_logger::rapids_logger`). librmm does not use it: its own diagnostics go through Rust's
 * `tracing`, to a log librmm installs when it is loaded (stderr, or the file named by
 * RMM_DEBUG_LOG_FILE, in the pattern below).
 *
 * The default logger is one object per binary that includes this header (an inline function's
 * static): with several shared libraries built with hidden visibility, each has its own.
 */
#pragma once

#if !__has_include(<rapids_logger/logger.hpp>)
#error "<rmm/logger.hpp> needs rapids-logger's headers (pip install rapids-logger; find_package(rapids_logger), link rapids_logger::rapids_logger)"
#endif

#include <rapids_logger/log_levels.h>
#include <rapids_logger/logger.hpp>

#include <cstdlib>
#include <memory>
#include <string>

/** @brief The lowest level the RMM_LOG_* macros compile in (RMM's default: info). */
#if !defined(RMM_LOG_ACTIVE_LEVEL)
#define RMM_LOG_ACTIVE_LEVEL RAPIDS_LOGGER_LOG_LEVEL_INFO
#endif

/** @brief Logs through @p logger at @p level (printf-style arguments). */
#define RMM_LOGGER_CALL(logger, level, ...) (logger).log(level, __VA_ARGS__)

#if RMM_LOG_ACTIVE_LEVEL <= RAPIDS_LOGGER_LOG_LEVEL_TRACE
#define RMM_LOG_TRACE(...) RMM_LOGGER_CALL(rmm::default_logger(), rapids_logger::level_enum::trace, __VA_ARGS__)
#else
#define RMM_LOG_TRACE(...) (void)0
#endif

#if RMM_LOG_ACTIVE_LEVEL <= RAPIDS_LOGGER_LOG_LEVEL_DEBUG
#define RMM_LOG_DEBUG(...) RMM_LOGGER_CALL(rmm::default_logger(), rapids_logger::level_enum::debug, __VA_ARGS__)
#else
#define RMM_LOG_DEBUG(...) (void)0
#endif

#if RMM_LOG_ACTIVE_LEVEL <= RAPIDS_LOGGER_LOG_LEVEL_INFO
#define RMM_LOG_INFO(...) RMM_LOGGER_CALL(rmm::default_logger(), rapids_logger::level_enum::info, __VA_ARGS__)
#else
#define RMM_LOG_INFO(...) (void)0
#endif

#if RMM_LOG_ACTIVE_LEVEL <= RAPIDS_LOGGER_LOG_LEVEL_WARN
#define RMM_LOG_WARN(...) RMM_LOGGER_CALL(rmm::default_logger(), rapids_logger::level_enum::warn, __VA_ARGS__)
#else
#define RMM_LOG_WARN(...) (void)0
#endif

#if RMM_LOG_ACTIVE_LEVEL <= RAPIDS_LOGGER_LOG_LEVEL_ERROR
#define RMM_LOG_ERROR(...) RMM_LOGGER_CALL(rmm::default_logger(), rapids_logger::level_enum::error, __VA_ARGS__)
#else
#define RMM_LOG_ERROR(...) (void)0
#endif

#if RMM_LOG_ACTIVE_LEVEL <= RAPIDS_LOGGER_LOG_LEVEL_CRITICAL
#define RMM_LOG_CRITICAL(...) \
  RMM_LOGGER_CALL(rmm::default_logger(), rapids_logger::level_enum::critical, __VA_ARGS__)
#else
#define RMM_LOG_CRITICAL(...) (void)0
#endif

namespace rmm {

/**
 * @brief The default logger's sink: a file sink on the path in RMM_DEBUG_LOG_FILE (truncated) when
 * that is set, stderr otherwise.
 */
inline rapids_logger::sink_ptr default_sink()
{
  auto* filename = std::getenv("RMM_DEBUG_LOG_FILE");
  if (filename != nullptr) { return std::make_shared<rapids_logger::basic_file_sink_mt>(filename, true); }
  return std::make_shared<rapids_logger::stderr_sink_mt>();
}

/** @brief The default logger's pattern: thread id, time, level, message. */
inline std::string default_pattern() { return "[%6t][%H:%M:%S:%f][%-6l] %v"; }

/** @brief The logger named "RMM" that the RMM_LOG_* macros write to (level info at first). */
inline rapids_logger::logger& default_logger()
{
  static rapids_logger::logger logger_ = [] {
    rapids_logger::logger logger{"RMM", {default_sink()}};
    logger.set_pattern(default_pattern());
    return logger;
  }();
  return logger_;
}

}  // namespace rmm
