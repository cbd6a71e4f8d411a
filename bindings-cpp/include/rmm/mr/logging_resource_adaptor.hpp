/**
 * @file logging_resource_adaptor.hpp
 * @brief rmm::mr::logging_resource_adaptor: a CSV line per allocation event (in librmm).
 */
#pragma once

#include <rmm/error.hpp>
#include <rmm/mr/detail/c_resource.hpp>
#include <rmm/mr/detail/upstream.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/resource_ref.hpp>
#include <rmm/rmm_c.h>

#include <cuda/memory_resource>

#if __has_include(<rapids_logger/logger.hpp>)
#include <rapids_logger/logger.hpp>

#include <initializer_list>
#include <memory>
#include <vector>
#endif

#include <cstddef>
#include <cstdlib>
#include <ios>
#include <ostream>
#include <string>
#include <utility>

namespace rmm::mr {

namespace detail {

/** @brief Writes one log line to the std::ostream @p context; an exception counts as a failure
 *  (it never reaches librmm). */
inline int ostream_write(const char* data, std::size_t length, void* context) noexcept
{
  try {
    auto* stream = static_cast<std::ostream*>(context);
    stream->write(data, static_cast<std::streamsize>(length));
    return stream->good() ? 0 : 1;
  } catch (...) {
    return 1;
  }
}

/** @brief Flushes the std::ostream @p context (failures as above). */
inline int ostream_flush(void* context) noexcept
{
  try {
    auto* stream = static_cast<std::ostream*>(context);
    stream->flush();
    return stream->good() ? 0 : 1;
  } catch (...) {
    return 1;
  }
}

#if __has_include(<rapids_logger/logger.hpp>)
/** @brief Writes one log line (without its '\n', which the sinks add) to the rapids_logger::logger
 *  @p context, at info level (failures as above). */
inline int rapids_logger_write(const char* data, std::size_t length, void* context) noexcept
{
  try {
    if (length > 0 && data[length - 1] == '\n') { --length; }
    static_cast<rapids_logger::logger*>(context)->log(rapids_logger::level_enum::info, std::string{data, length});
    return 0;
  } catch (...) {
    return 1;
  }
}

/** @brief Flushes the rapids_logger::logger @p context (failures as above). */
inline int rapids_logger_flush(void* context) noexcept
{
  try {
    static_cast<rapids_logger::logger*>(context)->flush();
    return 0;
  } catch (...) {
    return 1;
  }
}

/** @brief Deletes the rapids_logger::logger @p context when librmm drops the adaptor. */
inline void rapids_logger_release(void* context) noexcept { delete static_cast<rapids_logger::logger*>(context); }
#endif

}  // namespace detail

/**
 * @brief Writes one CSV line per allocation, free and failed allocation to a file, then forwards
 * to its upstream. Lines are `Thread,Time,Action,Pointer,Size,Stream` (header()).
 *
 * A value type: copies share one librmm resource and one log (== compares identity). The upstream
 * may be any `any_resource<device_accessible>`, a user's C++ resource included; an rmm resource
 * passes its librmm handle through. RMM's file-name and std::ostream constructors are provided, and
 * the one taking rapids_logger sinks when rapids-logger's headers are on the include path (then
 * link rapids_logger::rapids_logger; librmm itself does not use rapids-logger).
 */
class logging_resource_adaptor : public detail::resource_over_upstream {
 public:
  /**
   * @brief Logs to @p filename (created or truncated; default: get_default_filename()).
   * @param auto_flush flush every line as it is written
   * @throws rmm::logic_error when RMM_LOG_FILE is unset (default name) or the file cannot be created
   */
  explicit logging_resource_adaptor(detail::upstream_holder upstream,
                                    std::string const& filename = get_default_filename(),
                                    bool auto_flush             = false)
    : resource_over_upstream{std::move(upstream),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) {
          return rmm_logging_resource_adaptor_new(up, filename.c_str(), auto_flush ? 1 : 0, out, err);
        },
        "logging_resource_adaptor"}
  {
  }

  /**
   * @brief Logs to @p stream, which must outlive this resource and every copy of it. Lines are
   * written whole, one at a time (never two threads at once), and flushed with flush(), after
   * every line with @p auto_flush, and when the last copy is destroyed. A stream that fails
   * loses the lines (allocations still succeed); flush() then throws.
   */
  logging_resource_adaptor(detail::upstream_holder upstream, std::ostream& stream, bool auto_flush = false)
    : resource_over_upstream{std::move(upstream),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) {
          // The stream stays the caller's: no release function.
          return rmm_logging_resource_adaptor_new_with_sink(up, &detail::ostream_write, &detail::ostream_flush, &stream,
                                                            nullptr, auto_flush ? 1 : 0, out, err);
        },
        "logging_resource_adaptor"}
  {
  }

#if __has_include(<rapids_logger/logger.hpp>)
  /**
   * @brief Logs to the rapids_logger sinks @p sinks (each gets every line, pattern "%v"), through a
   * rapids_logger::logger that the adaptor owns. Lines, flushing and failures as for a std::ostream.
   */
  logging_resource_adaptor(detail::upstream_holder upstream, std::initializer_list<rapids_logger::sink_ptr> sinks,
                           bool auto_flush = false)
    : logging_resource_adaptor{std::move(upstream), make_logger(sinks), auto_flush}
  {
  }
#endif

  /**
   * @brief The value of the environment variable RMM_LOG_FILE.
   * @throws rmm::logic_error when it is unset
   */
  static std::string get_default_filename()
  {
    const char* name = std::getenv("RMM_LOG_FILE");
    if (name == nullptr) {
      throw rmm::logic_error{"RMM logging requested without an explicit file name, but RMM_LOG_FILE is unset"};
    }
    return name;
  }

  /** @brief The log's first line. */
  static std::string header() { return "Thread,Time,Action,Pointer,Size,Stream"; }

  /** @brief Writes out the buffered lines. @throws rmm::logic_error when writing fails */
  void flush()
  {
    rmm_error err{};
    rmm::detail::check(rmm_logging_resource_adaptor_flush(handle(), &err), err, "logging_resource_adaptor::flush");
  }

  /** @brief The log file's name, as given ("" when logging to a std::ostream). */
  [[nodiscard]] std::string get_file_name() const
  {
    return detail::get_string(
      [&](char* buf, std::size_t capacity, std::size_t* length, rmm_error* err) {
        return rmm_logging_resource_adaptor_get_file_name(handle(), buf, capacity, length, err);
      },
      "logging_resource_adaptor::get_file_name");
  }

 private:
#if __has_include(<rapids_logger/logger.hpp>)
  static std::unique_ptr<rapids_logger::logger> make_logger(std::initializer_list<rapids_logger::sink_ptr> sinks)
  {
    auto logger = std::make_unique<rapids_logger::logger>("RMM", std::vector<rapids_logger::sink_ptr>{sinks});
    logger->set_pattern("%v");
    return logger;
  }

  logging_resource_adaptor(detail::upstream_holder upstream, std::unique_ptr<rapids_logger::logger> logger,
                           bool auto_flush)
    : resource_over_upstream{std::move(upstream),
        [&](rmm_resource up, rmm_resource* out, rmm_error* err) {
          // librmm owns the logger from here on, also when the call fails (it then releases it at once).
          return rmm_logging_resource_adaptor_new_with_sink(
            up, &detail::rapids_logger_write, &detail::rapids_logger_flush, logger.release(),
            &detail::rapids_logger_release, auto_flush ? 1 : 0, out, err);
        },
        "logging_resource_adaptor"}
  {
  }
#endif
};

static_assert(cuda::mr::resource_with<logging_resource_adaptor, cuda::mr::device_accessible>);

}  // namespace rmm::mr
