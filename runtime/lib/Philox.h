//===- Philox.h - Philox4x32-10 counter-based random numbers ----*- C++ -*-===//
//
// The Philox4x32-10 block function of Random123 (J. K. Salmon, M. A. Moraes,
// R. O. Dror, D. E. Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3",
// SC 2011), bit-identical to Random123's `philox4x32_R(10, ctr, key)`.
//
// It is a pure function of a 128-bit counter and a 64-bit key, so any
// element of a random tensor can be drawn independently of the others, on
// any rank and any device. This header has no dependencies and every
// function is constexpr and inline so that the CPU runtime and a CUDA
// backend share the exact same code (`__host__ __device__` under nvcc).
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_PHILOX_H
#define SPMD_RUNTIME_PHILOX_H

#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define SPMD_PHILOX_FUNC __host__ __device__ inline constexpr
#else
#define SPMD_PHILOX_FUNC inline constexpr
#endif

namespace spmd {
namespace runtime {
namespace philox {

/// The four 32-bit words of a Philox4x32 counter or output block.
struct Block4x32 {
  uint32_t v[4];
};

/// The two 32-bit words of a Philox4x32 key.
struct Key2x32 {
  uint32_t v[2];
};

/// Round multipliers and Weyl key increments (Random123 PHILOX_M4x32_0/1 and
/// PHILOX_W32_0/1: the golden ratio and sqrt(3) - 1).
constexpr uint32_t kM0 = 0xD2511F53u;
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;
constexpr uint32_t kW1 = 0xBB67AE85u;
/// Number of rounds of Philox4x32-10.
constexpr int kRounds = 10;

/// High and low 32-bit halves of the 64-bit product a * b.
SPMD_PHILOX_FUNC uint32_t mulhi(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}
SPMD_PHILOX_FUNC uint32_t mullo(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>(static_cast<uint64_t>(a) * b);
}

/// One Philox4x32 round (Random123 `_philox4x32round`).
SPMD_PHILOX_FUNC Block4x32 round4x32(Block4x32 ctr, Key2x32 key) {
  uint32_t hi0 = mulhi(kM0, ctr.v[0]), lo0 = mullo(kM0, ctr.v[0]);
  uint32_t hi1 = mulhi(kM1, ctr.v[2]), lo1 = mullo(kM1, ctr.v[2]);
  return Block4x32{
      {hi1 ^ ctr.v[1] ^ key.v[0], lo1, hi0 ^ ctr.v[3] ^ key.v[1], lo0}};
}

/// Key schedule between rounds (Random123 `_philox4x32bumpkey`).
SPMD_PHILOX_FUNC Key2x32 bumpKey(Key2x32 key) {
  return Key2x32{{key.v[0] + kW0, key.v[1] + kW1}};
}

/// Philox4x32-10: the random block of `ctr` under `key` (Random123
/// `philox4x32_R(10, ctr, key)`).
SPMD_PHILOX_FUNC Block4x32 philox4x32_10(Block4x32 ctr, Key2x32 key) {
  for (int r = 0; r < kRounds; ++r) {
    if (r != 0)
      key = bumpKey(key);
    ctr = round4x32(ctr, key);
  }
  return ctr;
}

/// A float in [0, 1) from the 24 high bits of a random word: (x >> 8) * 2^-24.
/// Every value is exactly representable, and the largest is 1 - 2^-24.
SPMD_PHILOX_FUNC float uniformFromBits(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

/// The runtime's draw (Runtime.h, spmd_rt_uniform): key = (seed low 32,
/// seed high 32), counter = (index low 32, index high 32, op_id low 32,
/// step low 32); the first output word gives the float.
SPMD_PHILOX_FUNC float uniform(uint64_t seed, uint64_t step, uint64_t opId,
                               uint64_t index) {
  Block4x32 ctr{{static_cast<uint32_t>(index),
                 static_cast<uint32_t>(index >> 32),
                 static_cast<uint32_t>(opId), static_cast<uint32_t>(step)}};
  Key2x32 key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  return uniformFromBits(philox4x32_10(ctr, key).v[0]);
}

} // namespace philox
} // namespace runtime
} // namespace spmd

#undef SPMD_PHILOX_FUNC

#endif // SPMD_RUNTIME_PHILOX_H
