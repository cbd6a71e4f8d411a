/**
 * @file detail/format.hpp
 * @brief RMM's string helpers for logs and messages (RMM 26.x names): format_bytes, format_stream.
 */
#pragma once

#include <rmm/cuda_stream_view.hpp>

#include <array>
#include <cstddef>
#include <sstream>
#include <string>

namespace rmm::detail {

/** @brief @p value bytes in the largest binary unit that keeps it above 1, e.g. "1.500000 KiB" (as RMM). */
inline std::string format_bytes(std::size_t value)
{
  static std::array const units{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  std::size_t index = 0;
  auto size = static_cast<double>(value);
  while (size > 1024) {
    size /= 1024;
    index++;
  }
  return std::to_string(size) + ' ' + units.at(index);
}

/** @brief The stream's handle in hexadecimal (as RMM's logs show it). */
inline std::string format_stream(rmm::cuda_stream_view stream)
{
  std::stringstream sstr{};
  sstr << std::hex << stream.value();
  return sstr.str();
}

}  // namespace rmm::detail
