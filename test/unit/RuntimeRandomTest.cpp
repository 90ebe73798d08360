//===- RuntimeRandomTest.cpp - Philox4x32-10 and spmd_rt_uniform ----------===//
//
// The block function against the Random123 known-answer vectors of
// philox4x32-10 (Random123 kat_vectors), and the runtime's draws: a pure,
// deterministic function of (seed, step, op_id, index) in [0, 1).
//
//===----------------------------------------------------------------------===//

#include "Philox.h"
#include "spmd/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

using namespace spmd::runtime::philox;

namespace {

struct KnownAnswer {
  Block4x32 counter;
  Key2x32 key;
  Block4x32 expected;
};

// Random123 kat_vectors, "philox4x32 10" lines.
constexpr KnownAnswer kKnownAnswers[] = {
    {{{0x00000000, 0x00000000, 0x00000000, 0x00000000}},
     {{0x00000000, 0x00000000}},
     {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff}},
     {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0}},
     {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
};

// The block function is usable in constant expressions (and so on a device).
static_assert(philox4x32_10(kKnownAnswers[0].counter, kKnownAnswers[0].key)
                      .v[0] == 0x6627e8d5u,
              "philox4x32_10 is constexpr");

/// Restores the default seed and step around each test.
class RuntimeRandom : public ::testing::Test {
protected:
  void SetUp() override { reset(); }
  void TearDown() override { reset(); }
  static void reset() {
    spmd_rt_set_seed(0);
    spmd_rt_set_step(0);
  }
};

TEST(Philox, KnownAnswerVectors) {
  for (const KnownAnswer &answer : kKnownAnswers) {
    Block4x32 got = philox4x32_10(answer.counter, answer.key);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(got.v[i], answer.expected.v[i])
          << "word " << i << " for counter " << std::hex << answer.counter.v[0]
          << " key " << answer.key.v[0];
  }
}

TEST(Philox, UniformFromBits) {
  EXPECT_EQ(uniformFromBits(0), 0.0f);
  EXPECT_EQ(uniformFromBits(0xff), 0.0f);
  EXPECT_EQ(uniformFromBits(0x80000000u), 0.5f);
  EXPECT_LT(uniformFromBits(0xffffffffu), 1.0f);
  EXPECT_EQ(uniformFromBits(0xffffffffu), 1.0f - std::ldexp(1.0f, -24));
}

// Key = (seed low, seed high), counter = (index low, index high, op_id, step),
// the first output word: checked through the third known-answer vector.
TEST_F(RuntimeRandom, KeyAndCounterLayout) {
  spmd_rt_set_seed((uint64_t{0x299f31d0} << 32) | 0xa4093822);
  spmd_rt_set_step(0x03707344);
  float got =
      spmd_rt_uniform(0x13198a2e, (uint64_t{0x85a308d3} << 32) | 0x243f6a88);
  EXPECT_EQ(got, uniformFromBits(0xd16cfe09));
  EXPECT_EQ(got, static_cast<float>(0xd16cfe09u >> 8) / 16777216.0f);
}

TEST_F(RuntimeRandom, DefaultsAreZero) {
  EXPECT_EQ(spmd_rt_uniform(0, 0), uniformFromBits(0x6627e8d5));
}

TEST_F(RuntimeRandom, DeterministicAndStateless) {
  float first = spmd_rt_uniform(3, 12345);
  // Other draws in between do not advance anything.
  for (uint64_t i = 0; i < 100; ++i)
    (void)spmd_rt_uniform(3, i);
  EXPECT_EQ(spmd_rt_uniform(3, 12345), first);
  // Any order of the elements gives the same numbers (sharded runs).
  std::vector<float> forward, backward(1000);
  for (uint64_t i = 0; i < 1000; ++i)
    forward.push_back(spmd_rt_uniform(7, i));
  for (uint64_t i = 1000; i-- > 0;)
    backward[i] = spmd_rt_uniform(7, i);
  EXPECT_EQ(forward, backward);
}

TEST_F(RuntimeRandom, DependsOnEveryInput) {
  const uint64_t index = 42, op = 5;
  float base = spmd_rt_uniform(op, index);
  EXPECT_NE(spmd_rt_uniform(op, index + 1), base);
  EXPECT_NE(spmd_rt_uniform(op, index + (uint64_t{1} << 32)), base);
  EXPECT_NE(spmd_rt_uniform(op + 1, index), base);
  spmd_rt_set_step(1);
  EXPECT_NE(spmd_rt_uniform(op, index), base);
  spmd_rt_set_step(0);
  spmd_rt_set_seed(1);
  EXPECT_NE(spmd_rt_uniform(op, index), base);
  spmd_rt_set_seed(uint64_t{1} << 32);
  EXPECT_NE(spmd_rt_uniform(op, index), base);
  spmd_rt_set_seed(0);
  EXPECT_EQ(spmd_rt_uniform(op, index), base);
}

TEST_F(RuntimeRandom, UniformInUnitIntervalWithMeanOneHalf) {
  spmd_rt_set_seed(0x5eed);
  spmd_rt_set_step(3);
  const int draws = 100000;
  double sum = 0, sumSquares = 0;
  std::set<float> distinct;
  int below[10] = {0};
  for (int i = 0; i < draws; ++i) {
    float x = spmd_rt_uniform(1, static_cast<uint64_t>(i));
    ASSERT_GE(x, 0.0f);
    ASSERT_LT(x, 1.0f);
    sum += x;
    sumSquares += static_cast<double>(x) * x;
    distinct.insert(x);
    ++below[static_cast<int>(x * 10)];
  }
  double mean = sum / draws;
  double variance = sumSquares / draws - mean * mean;
  // Standard error of the mean: sqrt(1/12 / 1e5) ~ 0.0009.
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(variance, 1.0 / 12, 0.002);
  // 24 random bits: almost no collisions among 1e5 draws.
  EXPECT_GT(distinct.size(), static_cast<size_t>(draws * 0.99));
  for (int bucket = 0; bucket < 10; ++bucket)
    EXPECT_NEAR(below[bucket], draws / 10, 500) << "bucket " << bucket;
}

} // namespace
