//===- Random.cpp - seed, step and uniform draws (Philox4x32-10) ----------===//
//
// spmd_rt_uniform is a pure function of (seed, step, op_id, index): nothing
// advances between draws, so a sharded run draws, for each element of the
// GLOBAL tensor, the number the single-device run draws, whichever rank holds
// that element. The block function is Random123 philox4x32-10 (Philox.h).
//
//===----------------------------------------------------------------------===//

#include "Backends.h"
#include "JobStatus.h"
#include "Philox.h"
#include "spmd/Runtime/Runtime.h"

#include <atomic>

namespace {
// Part of the key of every draw; both default to 0. Atomics only so that a
// kernel drawing from several threads never races with a setter.
std::atomic<uint64_t> jobSeed{0};
std::atomic<uint64_t> jobStep{0};
} // namespace

uint64_t spmd::rt::randomSeed() {
  return jobSeed.load(std::memory_order_relaxed);
}
uint64_t spmd::rt::randomStep() {
  return jobStep.load(std::memory_order_relaxed);
}

extern "C" {

void spmd_rt_set_seed(uint64_t seed) {
  jobSeed.store(seed, std::memory_order_relaxed);
}

void spmd_rt_set_step(uint64_t step) {
  jobStep.store(step, std::memory_order_relaxed);
  spmd::rt::jobStatusStep(step);
}

float spmd_rt_uniform(uint64_t op_id, uint64_t index) {
  return spmd::runtime::philox::uniform(jobSeed.load(std::memory_order_relaxed),
                                        jobStep.load(std::memory_order_relaxed),
                                        op_id, index);
}

const int64_t *spmd_rt_rank_row(const int64_t *table, int64_t row_length) {
  return table + static_cast<int64_t>(spmd_rt_rank()) * row_length;
}

} // extern "C"
