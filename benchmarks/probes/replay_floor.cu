// Probe for issue 27's REPLAY_BENCH cells: how much of a replay's time is the harness and the
// synchronization RMM 26.10's `allocate_sync`/`deallocate_sync` do, whatever the allocator?
//
// REPLAY_BENCH (RMM 26.10, benchmarks/replay/replay.cpp) plays each log event under one mutex, in
// log order across threads (a condition variable hands the turn over), keeps an unordered_map from
// the log's pointers to live allocations, and calls `allocate_sync` / `deallocate_sync`: RMM's pool,
// binning and arena synchronize the legacy default stream in both; rmm-rs's in `allocate_sync` only
// (its `deallocate_sync` promises that no queued work uses the memory, so it needs no wait).
//
// This program replays the same log with that harness, copied, and an allocator that costs nothing
// (a counter), in three modes: `null` (the harness alone), `sync-alloc` (one
// cudaStreamSynchronize(0) per allocation: rmm-rs's floor) and `sync-both` (one per allocation and
// one per free: RMM 26.10's floor). A REPLAY cell's time minus its mode's floor is the allocator's
// share; the floor bounds the best ratio any allocator can reach against RMM's time.
//
// Build: nvcc -std=c++20 -O2 replay_floor.cu -o replay_floor
// Run:   replay_floor LOG.csv [iterations=20]  (prints one line per mode: ms per replay, µs per event)
#include <cuda_runtime.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {
struct event {
  bool allocate;
  std::uintptr_t pointer;
  std::size_t size;
  std::size_t index;  // position in the whole log
};

enum class mode { null, sync_alloc, sync_both };

std::vector<std::vector<event>> parse(char const* path)
{
  std::ifstream in{path};
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path);
    std::exit(2);
  }
  std::string line;
  std::getline(in, line);  // header: Thread,Time,Action,Pointer,Size,Stream
  std::map<std::string, std::vector<event>> by_thread;
  std::size_t index = 0;
  while (std::getline(in, line)) {
    std::stringstream fields{line};
    std::string thread, time, action, pointer, size;
    std::getline(fields, thread, ',');
    std::getline(fields, time, ',');
    std::getline(fields, action, ',');
    std::getline(fields, pointer, ',');
    std::getline(fields, size, ',');
    if (action != "allocate" && action != "free") { continue; }  // failures are not replayed
    by_thread[thread].push_back(
      // A zero-byte allocation is logged with the pointer "(nil)": strtoull reads it as 0.
      {action == "allocate", std::strtoull(pointer.c_str(), nullptr, 16),
       std::strtoull(size.c_str(), nullptr, 10), index++});
  }
  std::vector<std::vector<event>> out;
  for (auto& [_, events] : by_thread) { out.push_back(std::move(events)); }
  return out;
}

double replay_ms(std::vector<std::vector<event>> const& log, mode m, int iterations)
{
  std::mutex mutex;
  std::condition_variable cv;
  std::size_t event_index = 0;
  std::unordered_map<std::uintptr_t, std::uintptr_t> live{log.size()};
  std::uintptr_t next = 256;
  std::barrier<> barrier{static_cast<std::ptrdiff_t>(log.size())};
  double total_ms = 0;
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < log.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int it = 0; it < iterations; ++it) {
        if (t == 0) { event_index = 0; }
        barrier.arrive_and_wait();
        auto const start = std::chrono::steady_clock::now();
        for (auto const& e : log[t]) {
          std::unique_lock<std::mutex> lock{mutex};
          if (event_index != e.index) {
            cv.wait(lock, [&] { return event_index == e.index; });
          }
          if (e.allocate) {
            live.insert({e.pointer, next});
            next += (e.size + 255) / 256 * 256;
            if (m != mode::null) { cudaStreamSynchronize(0); }
          } else {
            auto found = live.find(e.pointer);
            if (found != live.end()) { live.erase(found); }
            if (m == mode::sync_both) { cudaStreamSynchronize(0); }
          }
          ++event_index;
          cv.notify_all();
        }
        barrier.arrive_and_wait();
        if (t == 0) {
          total_ms +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
          live.clear();
        }
      }
    });
  }
  for (auto& th : threads) { th.join(); }
  return total_ms / iterations;
}
}  // namespace

int main(int argc, char** argv)
{
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s LOG.csv [iterations]\n", argv[0]);
    return 2;
  }
  auto const log = parse(argv[1]);
  int const iterations = argc > 2 ? std::atoi(argv[2]) : 20;
  std::size_t events = 0, allocations = 0;
  for (auto const& t : log) {
    events += t.size();
    for (auto const& e : t) { allocations += e.allocate; }
  }
  cudaFree(nullptr);  // the context, outside the timing
  std::printf("log %s: %zu threads, %zu events (%zu allocations)\n", argv[1], log.size(), events,
              allocations);
  for (auto [name, m] : {std::pair{"null", mode::null},
                         std::pair{"sync-alloc", mode::sync_alloc},
                         std::pair{"sync-both", mode::sync_both}}) {
    replay_ms(log, m, 2);  // warm-up
    double const ms = replay_ms(log, m, iterations);
    std::printf("mode %-10s %9.3f ms per replay  %7.3f us per event\n", name, ms,
                1000.0 * ms / static_cast<double>(events));
  }
  return 0;
}
