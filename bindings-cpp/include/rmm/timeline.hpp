/**
 * @file timeline.hpp
 * @brief rmm::timeline: the process's memory timeline (an rmm-rs extra), through librmm's C ABI
 * (rmm_timeline_*): start and stop recording, snapshots in PyTorch's memory_viz format.
 *
 * One recorder per process, off by default, shared by Python, C++ and Rust. While it records, every
 * allocation made from a device's resource (start() puts a recording_resource_adaptor over each) is
 * kept with its size, stream, device, time, thread, resource stack and, with native_stacks, its
 * native call stack; pool and arena segment growth and trim and out-of-memory failures too.
 *
 * @code
 * rmm::timeline::options opts;
 * opts.native_stacks = true;
 * opts.dump_on_oom   = "oom.pickle";
 * rmm::timeline::start(opts);
 * run_the_workload();
 * rmm::timeline::dump_snapshot("snapshot.pickle");  // open it in https://pytorch.org/memory_viz
 * rmm::timeline::stop();
 * @endcode
 */
#pragma once

#include <rmm/detail/error.hpp>
#include <rmm/error.hpp>
#include <rmm/rmm_c.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rmm::timeline {

/** @brief How the recorder records. */
struct options {
  /** The last this many events are kept (at least 1). */
  std::uint64_t max_entries = 100000;
  /** Capture each allocation's native call stack (costly: microseconds per event). */
  bool native_stacks = false;
  /** Forget what was recorded before. */
  bool clear = false;
  /** When not empty: the file (.pickle, .json or .csv) the snapshot is written to at the first
   *  out-of-memory failure. */
  std::string dump_on_oom{};
};

/** @brief A snapshot's format. */
enum class format : int {
  pickle = RMM_TIMELINE_FORMAT_PICKLE,  ///< PyTorch's snapshot pickle (memory_viz, torch.cuda._memory_viz)
  json   = RMM_TIMELINE_FORMAT_JSON,    ///< the same data as JSON
  csv    = RMM_TIMELINE_FORMAT_CSV,     ///< RMM's allocation log, for rmm-replay
};

/**
 * @brief Turns the recorder on (or changes its options).
 * @throws rmm::logic_error for max_entries of 0
 */
inline void start(options const& opts = {})
{
  rmm_error err{};
  std::uint32_t flags = (opts.native_stacks ? RMM_TIMELINE_NATIVE_STACKS : 0u) | (opts.clear ? RMM_TIMELINE_CLEAR : 0u);
  rmm::detail::check(rmm_timeline_start(opts.max_entries, flags,
                                        opts.dump_on_oom.empty() ? nullptr : opts.dump_on_oom.c_str(), &err),
                     err, "timeline::start");
}

/** @brief Turns the recorder off and puts back the resources start() wrapped; what it recorded stays. */
inline void stop()
{
  rmm_error err{};
  rmm::detail::check(rmm_timeline_stop(&err), err, "timeline::stop");
}

/** @brief True while the recorder is on. */
inline bool is_recording() noexcept { return rmm_timeline_is_recording() != 0; }

/** @brief Forgets what was recorded. */
inline void clear() noexcept { rmm_timeline_clear(); }

/** @brief The snapshot as bytes in @p fmt (pickle by default). */
inline std::vector<std::byte> snapshot(format fmt = format::pickle)
{
  rmm_error err{};
  void* data{};
  std::size_t length{};
  rmm::detail::check(rmm_timeline_snapshot(static_cast<int>(fmt), &data, &length, &err), err, "timeline::snapshot");
  struct bytes_free {
    std::size_t length;
    void operator()(void* p) const noexcept { rmm_timeline_bytes_free(p, length); }
  };
  std::unique_ptr<void, bytes_free> owned{data, bytes_free{length}};
  auto const* begin = static_cast<std::byte const*>(data);
  return std::vector<std::byte>(begin, begin + length);
}

/**
 * @brief Writes the snapshot to @p path, in the format its extension names (.pickle/.pkl, .json, .csv).
 * @throws rmm::logic_error for an unknown extension or a file that cannot be written
 */
inline void dump_snapshot(std::string const& path)
{
  rmm_error err{};
  rmm::detail::check(rmm_timeline_dump(path.c_str(), &err), err, "timeline::dump_snapshot");
}

}  // namespace rmm::timeline
