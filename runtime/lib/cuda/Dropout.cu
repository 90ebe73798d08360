//===- Dropout.cu - dropout and the other random kernels on the GPU -------===//
//
// The draws of cpu/Dropout.cpp, bit for bit: local element i gets
// philox::uniform(seed, step, op_id, g) where g is its row-major index in the
// GLOBAL tensor (global_shape, global_offset), so an element draws the same
// number on any rank, mesh and backend. Each thread computes g from i and
// draws independently; nothing is read back to the host.
//
// bf16 draws the same numbers; native_dropout computes
// input * keep * scale in float and rounds it to bf16 once (ATen's
// opmath_type).
//
//===----------------------------------------------------------------------===//

#include "../Math.h"
#include "../Philox.h"
#include "Cuda.h"

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

/// Where the local elements lie in the global tensor: local element i, with
/// coordinates c_d in the dims `size` (the local shape with size-1 dims
/// dropped and dims merged where the global layout is contiguous too), has
/// global index base + sum_d c_d * globalStride[d]. Merging keeps the
/// per-element divisions few: a slab of whole global rows is one dim.
struct DrawSpace {
  int32_t rank;
  int64_t base;
  Dims size, globalStride;
};

/// Host side of cpu/Dropout.cpp's forEachDraw: the same offset check
/// (checkGlobalOffset), then the coalesced space.
DrawSpace drawSpace(const char *kernel, const SpmdBuffer *local,
                    const int64_t *globalShape, const int64_t *globalOffset) {
  int64_t strides[SPMD_MAX_RANK];
  DrawSpace s{};
  s.base = checkGlobalOffset(kernel, local, globalShape, globalOffset, strides);
  for (int32_t d = 0; d < local->rank; ++d) {
    const int64_t size = local->shape[d];
    if (size == 1)
      continue;
    // The local buffer is contiguous, so only the global strides decide.
    if (s.rank > 0 && s.globalStride.v[s.rank - 1] == strides[d] * size) {
      s.size.v[s.rank - 1] *= size;
      s.globalStride.v[s.rank - 1] = strides[d];
      continue;
    }
    s.size.v[s.rank] = size;
    s.globalStride.v[s.rank] = strides[d];
    ++s.rank;
  }
  if (s.rank == 0) // One element (rank 0 or all dims 1): the base.
    s = DrawSpace{1, s.base, {{1}}, {{0}}};
  return s;
}

/// The global row-major index of local element `i` (i < numel).
__device__ inline uint64_t globalIndex(const DrawSpace &s, int64_t i) {
  int64_t g = s.base;
  // Unrolled with constant indices, so `s` is read from the kernel
  // parameters rather than copied to local memory.
#pragma unroll
  for (int32_t d = SPMD_MAX_RANK - 1; d > 0; --d) {
    if (d >= s.rank)
      continue;
    const int64_t size = s.size.v[d];
    g += (i % size) * s.globalStride.v[d];
    i /= size;
  }
  return static_cast<uint64_t>(g + i * s.globalStride.v[0]);
}

/// The job's Philox key and counter parts (Random.cpp), read on the host.
struct DrawKey {
  uint64_t seed, step, opId;
};

DrawKey drawKey(int64_t opId) {
  return {randomSeed(), randomStep(), static_cast<uint64_t>(opId)};
}

__device__ inline float draw(const DrawKey &key, const DrawSpace &s,
                             int64_t i) {
  return spmd::runtime::philox::uniform(key.seed, key.step, key.opId,
                                        globalIndex(s, i));
}

/// out[i] = numberOf(u) of element i's draw u, rounded to T.
template <typename T, typename Draw>
__global__ void drawKernel(T *out, int64_t n, DrawSpace s, DrawKey key,
                           Draw numberOf) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = convertValue<T>(numberOf(draw(key, s, i)));
}

/// Launches drawKernel for out's dtype (within `Set`).
template <unsigned Set, typename Draw>
void fillDraws(const char *kernel, SpmdBuffer *out, int64_t opId,
               const int64_t *globalShape, const int64_t *globalOffset,
               Draw numberOf) {
  dispatchDevice<Set>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const DrawSpace s = drawSpace(kernel, out, globalShape, globalOffset);
    const int64_t n = out->numel;
    drawKernel<T><<<gridFor(n), kBlock, 0, computeStream()>>>(
        dataOf<T>(out), n, s, drawKey(opId), numberOf);
    checkLaunch(kernel);
  });
}

/// out = x * keep * scale in M = OpMathT<T>, rounded to T once.
template <typename T>
__global__ void dropoutKernel(T *out, Bool8 *mask, const T *x, int64_t n,
                              DrawSpace s, DrawKey key, double keepProbability,
                              OpMathT<T> scale) {
  using M = OpMathT<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const bool keep = static_cast<double>(draw(key, s, i)) < keepProbability;
    mask[i] = keep;
    out[i] = convertValue<T>(convertValue<M>(x[i]) * M(keep) * scale);
  }
}

} // namespace

/// out[i] = 1 with probability p: u < p.
void spmd_rt_bernoulli_p(SpmdBuffer *out, double p, int64_t op_id,
                         const int64_t *global_shape,
                         const int64_t *global_offset) {
  fillDraws<kAll | kBFloat16>("spmd_rt_bernoulli_p", out, op_id, global_shape,
                              global_offset, BernoulliDraw{p});
}

/// out[i] = from + (to - from) * u.
void spmd_rt_uniform_range(SpmdBuffer *out, double from, double to,
                           int64_t op_id, const int64_t *global_shape,
                           const int64_t *global_offset) {
  fillDraws<kFloat | kBFloat16>("spmd_rt_uniform_range", out, op_id,
                                global_shape, global_offset,
                                UniformDraw{from, to});
}

/// out[i] = -log1p(-u) / lambd.
void spmd_rt_exponential(SpmdBuffer *out, double lambd, int64_t op_id,
                         const int64_t *global_shape,
                         const int64_t *global_offset) {
  fillDraws<kFloat | kBFloat16>("spmd_rt_exponential", out, op_id, global_shape,
                                global_offset, ExponentialDraw{lambd});
}

/// ATen's native_dropout_cuda: with train, keep = bernoulli(1 - p),
/// output = input * keep * scale with scale = 1 / (1 - p) (0 when p == 1);
/// without, output = input and the mask is all ones.
void spmd_rt_native_dropout(SpmdBuffer *output, SpmdBuffer *mask,
                            const SpmdBuffer *input, double p, int64_t train,
                            int64_t op_id, const int64_t *global_shape,
                            const int64_t *global_offset) {
  const char *kernel = "spmd_rt_native_dropout";
  checkNativeDropout(kernel, output, mask, input);
  if (!train) {
    // Qualified: ADL on SpmdBuffer would also find the C entry point.
    cuda::spmd_rt_copy(output, input);
    check(cudaMemsetAsync(mask->data, 1, static_cast<size_t>(mask->numel),
                          computeStream()),
          kernel);
    return;
  }
  const double keepProbability = 1.0 - p;
  const double scale = dropoutScale(keepProbability);
  dispatchDevice<kFloat | kBFloat16>(output->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    std::unique_ptr<Scratch> storage;
    const T *x = dataAs<T>(input, storage, kernel);
    const DrawSpace s = drawSpace(kernel, output, global_shape, global_offset);
    const int64_t n = output->numel;
    dropoutKernel<T><<<gridFor(n), kBlock, 0, computeStream()>>>(
        dataOf<T>(output), dataOf<Bool8>(mask), x, n, s, drawKey(op_id),
        keepProbability, static_cast<OpMathT<T>>(scale));
    checkLaunch(kernel);
  });
}

} // namespace spmd::rt::cuda
