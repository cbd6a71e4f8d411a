/**
 * @file error.hpp
 * @brief The exceptions of rmm (RMM 26.x names), and the mapping from the C ABI's rmm_error to them.
 */
#pragma once

#include <rmm/rmm_c.h>

#include <cstddef>
#include <new>
#include <stdexcept>
#include <string>

namespace rmm {

/** @brief Thrown when a precondition or an argument check fails. */
struct logic_error : public std::logic_error {
  using std::logic_error::logic_error;
};

/** @brief Thrown when a CUDA call fails, or CUDA (driver or device) is not available. */
struct cuda_error : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

/** @brief Thrown when an allocation fails for a reason other than running out of memory. */
class bad_alloc : public std::bad_alloc {
 public:
  /** @brief Constructs with a message (not explicit, as in RMM). */
  bad_alloc(const char* msg) : msg_{std::string{std::bad_alloc::what()} + ": " + msg} {}  // NOLINT(google-explicit-constructor)
  /** @brief Constructs with a message (not explicit, as in RMM). */
  bad_alloc(std::string const& msg) : bad_alloc{msg.c_str()} {}  // NOLINT(google-explicit-constructor)
  /** @brief The message. */
  [[nodiscard]] const char* what() const noexcept override { return msg_.c_str(); }

 private:
  std::string msg_;
};

/** @brief Thrown when a resource has not enough memory for an allocation. what() is
 *  "std::bad_alloc: out_of_memory: <msg>", as in RMM. */
class out_of_memory : public bad_alloc {
 public:
  /** @brief Constructs with a message. */
  out_of_memory(const char* msg) : bad_alloc{std::string{"out_of_memory: "} + msg} {}  // NOLINT(google-explicit-constructor)
  /** @brief Constructs with a message. */
  out_of_memory(std::string const& msg) : out_of_memory{msg.c_str()} {}  // NOLINT(google-explicit-constructor)
};

/** @brief Thrown when an argument is outside the valid range. */
class out_of_range : public std::out_of_range {
 public:
  using std::out_of_range::out_of_range;
};

/** @brief Thrown when an argument is invalid. */
class invalid_argument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace detail {

/**
 * @brief Throws the exception that matches a failed C ABI call.
 *
 * - RMM_ERROR_OUT_OF_MEMORY -> rmm::out_of_memory
 * - RMM_ERROR_CUDA, RMM_ERROR_NO_DRIVER, RMM_ERROR_NO_DEVICE -> rmm::cuda_error
 * - RMM_ERROR_INVALID_ARGUMENT -> rmm::logic_error: RMM checks arguments with RMM_EXPECTS, which
 *   throws logic_error (not invalid_argument), so code written against RMM catches logic_error.
 * - RMM_ERROR_UNSUPPORTED, RMM_ERROR_PANIC and unknown kinds -> rmm::logic_error
 *
 * @param status the call's return value (not RMM_OK)
 * @param err the call's error details (may be null)
 * @param what what was being done, prefixed to the message
 */
[[noreturn]] inline void throw_rmm_error(int status, rmm_error const* err, const char* what)
{
  std::string msg = std::string{what} + ": " + rmm_error_kind_name(status);
  if (err != nullptr && err->message[0] != '\0') {
    std::size_t len = 0;
    while (len < RMM_ERROR_MESSAGE_SIZE && err->message[len] != '\0') { ++len; }
    msg += ": ";
    msg.append(err->message, len);
  }
  switch (status) {
    case RMM_ERROR_OUT_OF_MEMORY: throw rmm::out_of_memory{msg};
    case RMM_ERROR_CUDA:
    case RMM_ERROR_NO_DRIVER:
    case RMM_ERROR_NO_DEVICE: throw rmm::cuda_error{msg};
    case RMM_ERROR_INVALID_ARGUMENT:
    case RMM_ERROR_UNSUPPORTED:
    case RMM_ERROR_PANIC:
    default: throw rmm::logic_error{msg};
  }
}

/** @brief Calls throw_rmm_error() when @p status is not RMM_OK. */
inline void check(int status, rmm_error const& err, const char* what)
{
  if (status != RMM_OK) { throw_rmm_error(status, &err, what); }
}

}  // namespace detail
}  // namespace rmm
