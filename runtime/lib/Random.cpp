//===- Random.cpp - seed, step, uniform draws, per-rank table rows --------===//
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
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

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

const int64_t *spmd_rt_runs_row(const int64_t *starts, const int64_t *counts,
                                int64_t runs, int64_t rank_stride,
                                int64_t row_length) {
  static std::mutex mutex;
  // Keyed by everything that decides the row: the lowering shares equal
  // tables between takes, which may read them per rank or uniformly.
  static std::map<
      std::tuple<const int64_t *, const int64_t *, int64_t, int64_t, int64_t>,
      std::vector<int64_t>>
      rows;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, inserted] =
      rows.try_emplace({starts, counts, runs, rank_stride, row_length});
  std::vector<int64_t> &row = it->second;
  if (!inserted)
    return row.data();
  row.reserve(row_length);
  const int64_t first = static_cast<int64_t>(spmd_rt_rank()) * rank_stride;
  for (int64_t j = first; j < first + runs; ++j) {
    if (counts[j] > row_length - static_cast<int64_t>(row.size()))
      spmd_rt_fatal("local_take: the runs of rank %d are longer than its %lld "
                    "positions",
                    spmd_rt_rank(), static_cast<long long>(row_length));
    for (int64_t i = 0; i < counts[j]; ++i)
      row.push_back(starts[j] < 0 ? -1 : starts[j] + i);
  }
  row.resize(row_length, -1);
  return row.data();
}

} // extern "C"
