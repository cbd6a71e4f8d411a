// A small test harness for the C++ tests built against RAPIDS RMM's wheel (which ships no
// GoogleTest): TEST(name) registers a test, CHECK(cond) records a failure and goes on, SKIP(why)
// ends a test as skipped. main() runs every test and prints `N passed, N failed, N skipped`;
// the exit status is 1 when one failed.
#pragma once

#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace beside_test {

struct skipped {
  std::string why;
};

struct registry {
  struct entry {
    const char* name;
    std::function<void()> body;
  };
  std::vector<entry> tests;
  int failures_in_test = 0;
  static registry& get()
  {
    static registry r;
    return r;
  }
};

struct registrar {
  registrar(const char* name, std::function<void()> body)
  {
    registry::get().tests.push_back({name, std::move(body)});
  }
};

inline void fail(const char* file, int line, const std::string& what)
{
  std::printf("    %s:%d: CHECK failed: %s\n", file, line, what.c_str());
  registry::get().failures_in_test++;
}

inline int run_all()
{
  int passed = 0, failed = 0, skipped_count = 0;
  for (auto& test : registry::get().tests) {
    registry::get().failures_in_test = 0;
    std::printf("[ RUN  ] %s\n", test.name);
    std::fflush(stdout);
    try {
      test.body();
    } catch (const skipped& s) {
      std::printf("[ SKIP ] %s: %s\n", test.name, s.why.c_str());
      skipped_count++;
      continue;
    } catch (const std::exception& e) {
      fail(__FILE__, __LINE__, std::string("unexpected exception: ") + e.what());
    } catch (...) {
      fail(__FILE__, __LINE__, "unexpected exception of an unknown type");
    }
    if (registry::get().failures_in_test == 0) {
      std::printf("[  OK  ] %s\n", test.name);
      passed++;
    } else {
      std::printf("[ FAIL ] %s\n", test.name);
      failed++;
    }
  }
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped_count);
  return failed == 0 ? 0 : 1;
}

}  // namespace beside_test

#define BESIDE_CONCAT2(a, b) a##b
#define BESIDE_CONCAT(a, b) BESIDE_CONCAT2(a, b)
#define TEST(name)                                                                     \
  static void name();                                                                  \
  static ::beside_test::registrar BESIDE_CONCAT(name, _registrar){#name, &name};        \
  static void name()
#define CHECK(cond) \
  ((cond) ? (void)0 : ::beside_test::fail(__FILE__, __LINE__, #cond))
#define SKIP(why) throw ::beside_test::skipped{why}
// CHECK_THROWS(type, expr): expr throws an exception of `type` (or a type derived from it).
#define CHECK_THROWS(type, expr)                                                           \
  do {                                                                                     \
    bool beside_thrown = false;                                                            \
    try {                                                                                  \
      (void)(expr);                                                                        \
    } catch (const type&) {                                                                \
      beside_thrown = true;                                                                \
    } catch (...) {                                                                        \
      ::beside_test::fail(__FILE__, __LINE__, #expr " threw something other than " #type); \
      beside_thrown = true;                                                                \
    }                                                                                      \
    if (!beside_thrown) ::beside_test::fail(__FILE__, __LINE__, #expr " did not throw " #type); \
  } while (0)
