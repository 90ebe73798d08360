//===- RuntimeBackendsTest.cpp - the runtime's backend table --------------===//
//
// spmd_rt_set_backend's table (runtime/lib/Backends.h): the CPU backend
// provides every kernel of KernelList.def, the C entry points call the
// running backend's kernel, and a kernel the backend lacks ends the job with
// a message naming the kernel and the backend rather than crashing.
//
//===----------------------------------------------------------------------===//

#include "Backends.h"
#include "spmd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstdint>

using spmd::rt::Backend;

namespace {

TEST(RuntimeBackends, CpuProvidesEveryKernel) {
  const Backend &cpu = spmd::rt::cpu::backend();
  EXPECT_STREQ(cpu.name, "cpu");
#define SPMD_RT_KERNEL(kernel, params, args)                                   \
  EXPECT_NE(cpu.kernel, nullptr) << "spmd_rt_" #kernel;
#include "spmd/Runtime/KernelList.def"
}

TEST(RuntimeBackends, SetBackendPicksTheEntryByName) {
  EXPECT_EQ(spmd::rt::findBackend("cpu"), &spmd::rt::cpu::backend());
  EXPECT_EQ(spmd::rt::findBackend("tpu"), nullptr);
  EXPECT_EQ(spmd_rt_set_backend("cpu"), 0);
  EXPECT_STREQ(spmd_rt_backend(), "cpu");
  EXPECT_EQ(&spmd::rt::activeBackend(), &spmd::rt::cpu::backend());
}

TEST(RuntimeBackendsDeathTest, MissingKernelIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        static Backend partial = spmd::rt::cpu::backend();
        partial.name = "partial";
        partial.gelu = nullptr;
        spmd::rt::useBackendForTesting(partial);
        const int64_t shape[] = {2};
        SpmdBuffer *self = spmd_rt_alloc(SPMD_F32, 1, shape);
        SpmdBuffer *out = spmd_rt_alloc(SPMD_F32, 1, shape);
        spmd_rt_neg(out, self); // Kernels it has still run.
        spmd_rt_gelu(out, self, 0);
      },
      "spmd-run: rank 0: error: spmd_rt_gelu: not implemented by backend "
      "'partial'");
}

} // namespace
