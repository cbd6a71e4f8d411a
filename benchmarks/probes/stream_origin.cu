// Probe for issue 27's CUDA_STREAM_POOL_BENCH gap: does the CUDA runtime answer slower for a stream
// the driver API made (cuStreamCreate, as librmm_rs's rmm_stream_create does) than for one it made
// itself (cudaStreamCreateWithFlags, as RMM's rmm::cuda_stream does)? Prints ns per cudaStreamQuery
// and µs per create+query+destroy for each origin; with -DWITH_RMM_RS also for streams made by
// librmm_rs's C ABI. Build: nvcc -O2 stream_origin.cu -lcuda [-DWITH_RMM_RS -I bindings-cpp/include
// -L DIR -lrmm_rs]
#include <cuda.h>
#include <cuda_runtime.h>

#ifdef WITH_RMM_RS
#include <rmm/rmm_c.h>
#endif

#include <chrono>
#include <cstdio>

namespace {
double ns_per_query(cudaStream_t s, int n)
{
  auto const t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) { cudaStreamQuery(s); }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
}

// As BM_StreamPoolGetStream: round robin over 16 streams, one query each.
double ns_per_query_round_robin(cudaStream_t const* s, int n)
{
  auto const t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) { cudaStreamQuery(s[i % 16]); }
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
}

template <class Make, class Destroy>
double us_per_make_query_destroy(Make make, Destroy destroy, int m)
{
  auto const t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < m; ++i) {
    cudaStream_t s = make();
    cudaStreamQuery(s);
    destroy(s);
  }
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / m;
}
}  // namespace

int main()
{
  constexpr int n = 1'000'000;
  cudaFree(nullptr);  // the runtime's primary context, current
  cudaStream_t by_runtime{};
  cudaStreamCreateWithFlags(&by_runtime, cudaStreamDefault);
  CUstream by_driver{};
  cuStreamCreate(&by_driver, CU_STREAM_DEFAULT);
  for (int round = 0; round < 3; ++round) {
    std::printf("round %d: cudaStreamQuery  runtime-made %.1f ns  driver-made %.1f ns  legacy %.1f ns\n", round,
                ns_per_query(by_runtime, n), ns_per_query(reinterpret_cast<cudaStream_t>(by_driver), n),
                ns_per_query(cudaStreamLegacy, n));
  }
  cudaStream_t rt16[16], dr16[16];
  for (int i = 0; i < 16; ++i) {
    cudaStreamCreateWithFlags(&rt16[i], cudaStreamDefault);
    cuStreamCreate(reinterpret_cast<CUstream*>(&dr16[i]), CU_STREAM_DEFAULT);
  }
#ifdef WITH_RMM_RS
  cudaStream_t rs16[16];
  for (int i = 0; i < 16; ++i) {
    void* made{};
    rmm_error err{};
    rmm_stream_create(0, &made, &err);
    rs16[i] = static_cast<cudaStream_t>(made);
  }
#endif
  for (int round = 0; round < 3; ++round) {
    std::printf("round %d: round robin over 16, cudaStreamQuery  runtime-made %.1f ns  driver-made %.1f ns", round,
                ns_per_query_round_robin(rt16, n), ns_per_query_round_robin(dr16, n));
#ifdef WITH_RMM_RS
    std::printf("  rmm_stream_create-made %.1f ns", ns_per_query_round_robin(rs16, n));
#endif
    std::printf("\n");
  }
  constexpr int m = 20'000;
  for (int round = 0; round < 3; ++round) {
    auto rt = us_per_make_query_destroy(
      [] {
        cudaStream_t s{};
        cudaStreamCreateWithFlags(&s, cudaStreamDefault);
        return s;
      },
      [](cudaStream_t s) { cudaStreamDestroy(s); }, m);
    auto dr = us_per_make_query_destroy(
      [] {
        CUstream s{};
        cuStreamCreate(&s, CU_STREAM_DEFAULT);
        return reinterpret_cast<cudaStream_t>(s);
      },
      [](cudaStream_t s) { cuStreamDestroy(reinterpret_cast<CUstream>(s)); }, m);
    auto id = us_per_make_query_destroy(
      [] {
        CUstream s{};
        cuStreamCreate(&s, CU_STREAM_DEFAULT);
        unsigned long long stream_id{};
        cuStreamGetId(s, &stream_id);
        return reinterpret_cast<cudaStream_t>(s);
      },
      [](cudaStream_t s) { cuStreamDestroy(reinterpret_cast<CUstream>(s)); }, m);
    std::printf("round %d: make+query+destroy  runtime %.2f us  driver %.2f us  driver+cuStreamGetId %.2f us", round,
                rt, dr, id);
#ifdef WITH_RMM_RS
    auto rs = us_per_make_query_destroy(
      [] {
        void* made{};
        rmm_error err{};
        rmm_stream_create(0, &made, &err);
        return static_cast<cudaStream_t>(made);
      },
      [](cudaStream_t s) {
        rmm_error err{};
        rmm_stream_destroy(s, &err);
      },
      m);
    std::printf("  rmm_stream_create %.2f us", rs);
#endif
    std::printf("\n");
  }
  for (int round = 0; round < 3; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < m; ++i) {
      cudaStream_t s{};
      cudaStreamCreateWithFlags(&s, cudaStreamDefault);
      cudaStreamSynchronize(s);
      cudaStreamDestroy(s);
    }
    double const rt = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / m;
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < m; ++i) {
      CUstream s{};
      cuStreamCreate(&s, CU_STREAM_DEFAULT);
      cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(s));
      cuStreamDestroy(s);
    }
    double const dr = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / m;
    std::printf("round %d: create+sync+destroy  runtime %.2f us  driver %.2f us\n", round, rt, dr);
  }
  return 0;
}
