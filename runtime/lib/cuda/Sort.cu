//===- Sort.cu - sort and topk on CUB's segmented sort --------------------===//
//
// cpu/Shape.cpp's sort (sort.stable) and topk on the device. Each line of
// self along `dim` is a segment of CUB's stable segmented sort
// (cub::DeviceSegmentedSort::StableSortPairs, ascending or descending) of
// keys with their positions: the keys are the values mapped to unsigned
// integers in the order the CPU's comparator uses (NaN above every number,
// -0 equal to +0), so that equal values keep their positions' order, as on
// the CPU. topk takes the first k of each sorted line. Results are the
// CPU's exactly, for every dtype of kNumeric and bf16.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

#include <cub/device/device_segmented_sort.cuh>

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

/// An unsigned key whose order is the CPU comparator's order of values:
/// integers offset by 2^63, floats (bf16 and f32 widened exactly to double)
/// by their bits with the sign folded, -0 as +0, every NaN above +inf.
template <typename T> __device__ uint64_t sortKey(T value) {
  constexpr uint64_t kSign = uint64_t(1) << 63;
  if constexpr (std::is_integral_v<T>) {
    return static_cast<uint64_t>(static_cast<int64_t>(value)) ^ kSign;
  } else {
    const double v = static_cast<double>(toOpMath(value));
    if (v != v)
      return ~uint64_t(0);
    const uint64_t bits =
        static_cast<uint64_t>(__double_as_longlong(v == 0 ? 0.0 : v));
    return (bits & kSign) ? ~bits : bits | kSign;
  }
}

/// Line l of self along `dim` (outer l / inner, inner l % inner), copied
/// to keys[l * size + j] and positions j.
template <typename T>
__global__ void keyKernel(uint64_t *keys, int64_t *positions, const T *in,
                          int64_t n, int64_t size, int64_t inner) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t line = i / size, j = i % size;
    keys[i] = sortKey(in[((line / inner) * size + j) * inner + line % inner]);
    positions[i] = j;
  }
}

/// Segment l begins at offsets[l] = l * size (l <= lines).
__global__ void offsetKernel(int64_t *offsets, int64_t lines, int64_t size) {
  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l <= lines;
       l += int64_t(gridDim.x) * blockDim.x)
    offsets[l] = l * size;
}

/// The first k of each sorted line: values read from self at the sorted
/// positions, and the positions.
template <typename T>
__global__ void takeKernel(T *values, int64_t *indices, const T *in,
                           const int64_t *sorted, int64_t n, int64_t size,
                           int64_t k, int64_t inner) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t line = i / k, j = i % k;
    const int64_t outer = line / inner, within = line % inner;
    const int64_t at = sorted[line * size + j];
    const int64_t to = (outer * k + j) * inner + within;
    values[to] = in[(outer * size + at) * inner + within];
    indices[to] = at;
  }
}

void checkCub(cudaError_t rc, const char *kernel) {
  check(rc, kernel);
  checkLaunch(kernel);
}

/// The first k of self's elements along `dim` in order, largest first
/// (`largest`) or smallest first: topk, and sort (k the whole dim).
void selectAlong(const char *kernel, SpmdBuffer *values, SpmdBuffer *indices,
                 const SpmdBuffer *self, int64_t k, int64_t dim, bool largest) {
  const DimLayout l = checkTopk(kernel, values, indices, self, k, dim);
  const int64_t lines = l.outer * l.inner, n = lines * l.size;
  if (values->numel == 0)
    return;
  dispatchDevice<kNumeric | kBFloat16>(self->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const T *in = dataOf<T>(self);
    Scratch keys(n * int64_t(sizeof(uint64_t)), kernel);
    Scratch sortedKeys(n * int64_t(sizeof(uint64_t)), kernel);
    Scratch positions(n * int64_t(sizeof(int64_t)), kernel);
    Scratch sorted(n * int64_t(sizeof(int64_t)), kernel);
    Scratch offsets((lines + 1) * int64_t(sizeof(int64_t)), kernel);
    keyKernel<T><<<gridFor(n), kBlock, 0, computeStream()>>>(
        keys.as<uint64_t>(), positions.as<int64_t>(), in, n, l.size, l.inner);
    offsetKernel<<<gridFor(lines + 1), kBlock, 0, computeStream()>>>(
        offsets.as<int64_t>(), lines, l.size);
    checkLaunch(kernel);
    const int64_t *begin = offsets.as<int64_t>(), *end = begin + 1;
    auto sort = [&](void *storage, size_t &bytes) {
      return largest ? cub::DeviceSegmentedSort::StableSortPairsDescending(
                           storage, bytes, keys.as<uint64_t>(),
                           sortedKeys.as<uint64_t>(), positions.as<int64_t>(),
                           sorted.as<int64_t>(), n, lines, begin, end,
                           computeStream())
                     : cub::DeviceSegmentedSort::StableSortPairs(
                           storage, bytes, keys.as<uint64_t>(),
                           sortedKeys.as<uint64_t>(), positions.as<int64_t>(),
                           sorted.as<int64_t>(), n, lines, begin, end,
                           computeStream());
    };
    size_t bytes = 0;
    checkCub(sort(nullptr, bytes), kernel);
    Scratch storage(static_cast<int64_t>(bytes), kernel);
    checkCub(sort(storage.data(), bytes), kernel);
    const int64_t taken = lines * k;
    takeKernel<T><<<gridFor(taken), kBlock, 0, computeStream()>>>(
        dataOf<T>(values), dataOf<int64_t>(indices), in, sorted.as<int64_t>(),
        taken, l.size, k, l.inner);
    checkLaunch(kernel);
  });
}

} // namespace

void spmd_rt_topk(SpmdBuffer *values, SpmdBuffer *indices,
                  const SpmdBuffer *self, int64_t k, int64_t dim,
                  int64_t largest) {
  selectAlong("spmd_rt_topk", values, indices, self, k, dim, largest != 0);
}

void spmd_rt_sort(SpmdBuffer *values, SpmdBuffer *indices,
                  const SpmdBuffer *self, int64_t dim, int64_t descending) {
  const char *kernel = "spmd_rt_sort";
  checkDim(kernel, self, dim);
  selectAlong(kernel, values, indices, self, self->shape[dim], dim,
              descending != 0);
}

} // namespace spmd::rt::cuda
