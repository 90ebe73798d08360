//===- Norm.cu - native_layer_norm and its backward on the GPU ------------===//
//
// cpu/Norm.cpp on the device. The input is viewed as [M, N] rows, N the
// product of the trailing `normalized_rank` dims. A group of threads owns a
// row (a warp for rows of up to 1024 elements, a block above), reads it
// coalesced and combines its sums with warp shuffles; row statistics
// accumulate in double and the per element math is ATen's LayerNormKernel
// in the input's float type, as on the CPU.
//
// The weight and bias gradients are column sums over the rows: blocks of
// 32 columns by 8 rows walk a chunk of rows each (coalesced along the
// columns), and a second pass adds up the chunks' double partial sums in a
// fixed order, so the results are deterministic.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

#include <cmath>

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

struct Rows {
  int64_t m, n;
};

/// Checks `input` against normalized_rank and returns its [M, N] view.
Rows normRows(const char *kernel, const SpmdBuffer *input,
              int64_t normalizedRank) {
  if (normalizedRank < 0 || normalizedRank > input->rank)
    spmd_rt_fatal("%s: normalized_rank %lld is out of range for input %s",
                  kernel, static_cast<long long>(normalizedRank),
                  shapeStr(input).c_str());
  int64_t split = input->rank - normalizedRank;
  return {product(input->shape, 0, split),
          product(input->shape, split, input->rank)};
}

/// Fatal unless `b` is shaped like the normalized dims (weight, bias,
/// their gradients).
void checkNormalizedShape(const char *kernel, const char *name,
                          const SpmdBuffer *b, const SpmdBuffer *input,
                          int64_t normalizedRank) {
  bool ok = b->rank == normalizedRank;
  for (int32_t d = 0; d < b->rank && ok; ++d)
    ok = b->shape[d] == input->shape[input->rank - normalizedRank + d];
  if (!ok)
    spmd_rt_fatal("%s: %s %s does not match the last %lld dims of input %s",
                  kernel, name, shapeStr(b).c_str(),
                  static_cast<long long>(normalizedRank),
                  shapeStr(input).c_str());
}

/// Fatal unless `b` is input's shape with the normalized dims set to 1
/// (mean, rstd).
void checkStatShape(const char *kernel, const char *name, const SpmdBuffer *b,
                    const SpmdBuffer *input, int64_t normalizedRank) {
  bool ok = b->rank == input->rank;
  for (int32_t d = 0; d < b->rank && ok; ++d)
    ok = b->shape[d] ==
         (d >= input->rank - normalizedRank ? 1 : input->shape[d]);
  if (!ok)
    spmd_rt_fatal("%s: %s %s does not match input %s with the last %lld dims "
                  "set to 1",
                  kernel, name, shapeStr(b).c_str(), shapeStr(input).c_str(),
                  static_cast<long long>(normalizedRank));
}

/// `b`'s data as T, or NULL when `b` is NULL (the kernels read an absent
/// weight as 1 and an absent bias as 0).
template <typename T>
const T *optionalData(const SpmdBuffer *b, std::unique_ptr<Scratch> &storage,
                      const char *kernel) {
  return b ? dataAs<T>(b, storage, kernel) : nullptr;
}

constexpr int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Sum over the 32 lanes of a warp; every lane gets lane 0's result.
__device__ double warpSum(double v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return __shfl_sync(0xffffffffu, v, 0);
}

/// Sum over the kGroup threads of a row: a warp (kGroup == 32) or the block
/// (kGroup == blockDim.x); every thread gets the result.
template <int kGroup> __device__ double groupSum(double v) {
  v = warpSum(v);
  if constexpr (kGroup > 32) {
    __shared__ double partial[kGroup / 32];
    if (threadIdx.x % 32 == 0)
      partial[threadIdx.x / 32] = v;
    __syncthreads();
    v = partial[0];
    for (int w = 1; w < kGroup / 32; ++w)
      v += partial[w];
    // `partial` is reused by the next sum.
    __syncthreads();
  }
  return v;
}

/// Threads of a block: kGroup, or several warps of a row each.
template <int kGroup> constexpr int kRowThreads = std::max(kGroup, kBlock);

/// The row of this thread's group, its lane, and the grid's row step. With
/// kGroup > 32 a block owns one row, so loops over rows are block-uniform.
template <int kGroup> struct RowCursor {
  static constexpr int kRowsPerBlock = kRowThreads<kGroup> / kGroup;
  __device__ int64_t first() const {
    return blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kGroup;
  }
  __device__ int64_t step() const { return int64_t(gridDim.x) * kRowsPerBlock; }
  __device__ int lane() const { return threadIdx.x % kGroup; }
};

/// Blocks for `rows` rows of kGroup threads each.
template <int kGroup> unsigned rowBlocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(
      ceilDiv(rows, RowCursor<kGroup>::kRowsPerBlock), int64_t(1) << 30));
}

/// The forward, per row: mean, then the biased variance around it (two
/// passes, sums in double, so the float results match ATen's Welford
/// moments to rounding), then y = (x * rstd - rstd * mean) * gamma + beta.
template <typename T, int kGroup>
__global__ void __launch_bounds__(kRowThreads<kGroup>)
    layerNormRows(T *__restrict__ y, T *__restrict__ meanOut,
                  T *__restrict__ rstdOut, const T *__restrict__ x,
                  const T *__restrict__ gamma, const T *__restrict__ beta,
                  int64_t m, int64_t n, double eps) {
  const RowCursor<kGroup> cursor;
  const int lane = cursor.lane();
  for (int64_t row = cursor.first(); row < m; row += cursor.step()) {
    const T *xr = x + row * n;
    double sum = 0;
#pragma unroll 4
    for (int64_t j = lane; j < n; j += kGroup)
      sum += xr[j];
    const T mean = static_cast<T>(groupSum<kGroup>(sum) / double(n));
    // Deviations from the mean rounded to T, as in ATen's float moments.
    double squares = 0;
#pragma unroll 4
    for (int64_t j = lane; j < n; j += kGroup) {
      const T dev = xr[j] - mean;
      squares += dev * dev;
    }
    const double var = groupSum<kGroup>(squares) / double(n);
    const T rstd = static_cast<T>(1.0 / sqrt(var + eps));
    const T shift = -rstd * mean;
    T *yr = y + row * n;
#pragma unroll 4
    for (int64_t j = lane; j < n; j += kGroup)
      yr[j] = (xr[j] * rstd + shift) * (gamma ? gamma[j] : T(1)) +
              (beta ? beta[j] : T(0));
    if (lane == 0) {
      meanOut[row] = mean;
      rstdOut[row] = rstd;
    }
  }
}

/// The input gradient, per row (ATen's formula, see
/// spmd_rt_native_layer_norm_backward).
template <typename T, int kGroup>
__global__ void __launch_bounds__(kRowThreads<kGroup>)
    layerNormBackwardRows(T *__restrict__ dx, const T *__restrict__ dy,
                          const T *__restrict__ x, const T *__restrict__ mean,
                          const T *__restrict__ rstd,
                          const T *__restrict__ gamma, int64_t m, int64_t n,
                          T scale) {
  const RowCursor<kGroup> cursor;
  const int lane = cursor.lane();
  for (int64_t row = cursor.first(); row < m; row += cursor.step()) {
    const T *dyr = dy + row * n;
    const T *xr = x + row * n;
    double dsSum = 0, dbSum = 0;
#pragma unroll 4
    for (int64_t j = lane; j < n; j += kGroup) {
      const T g = gamma ? gamma[j] : T(1);
      dsSum += dyr[j] * xr[j] * g;
      dbSum += dyr[j] * g;
    }
    const T ds = static_cast<T>(groupSum<kGroup>(dsSum));
    const T db = static_cast<T>(groupSum<kGroup>(dbSum));
    const T mu = mean[row];
    const T a = rstd[row];
    const T b = (db * mu - ds) * a * a * a * scale;
    const T c = -b * mu - db * a * scale;
    T *dxr = dx + row * n;
#pragma unroll 4
    for (int64_t j = lane; j < n; j += kGroup)
      dxr[j] = a * dyr[j] * (gamma ? gamma[j] : T(1)) + b * xr[j] + c;
  }
}

/// Tile of the column sums: kTileCols columns (a warp, coalesced) by
/// kTileRows rows.
constexpr int kTileCols = 32;
constexpr int kTileRows = kBlock / kTileCols;

/// Column sums over rows [chunk * rowsPerChunk, + rowsPerChunk) of
///   dgamma: dy * (rstd * x - rstd * mean), dbeta: dy,
/// each in double. With one chunk the sums are the results (`dgamma`,
/// `dbeta`); else they go to `*Part[chunk * n + column]`. A NULL result
/// (both pointers NULL) is not computed.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    layerNormParamGrads(T *dgamma, T *dbeta, double *dgammaPart,
                        double *dbetaPart, const T *__restrict__ dy,
                        const T *__restrict__ x, const T *__restrict__ mean,
                        const T *__restrict__ rstd, int64_t m, int64_t n,
                        int64_t rowsPerChunk) {
  const bool weight = dgamma || dgammaPart;
  const bool bias = dbeta || dbetaPart;
  const int64_t col = blockIdx.x * int64_t(kTileCols) + threadIdx.x;
  const int64_t begin = blockIdx.y * rowsPerChunk;
  const int64_t end = std::min(m, begin + rowsPerChunk);
  double gammaSum = 0, betaSum = 0;
  if (col < n) {
#pragma unroll 4
    for (int64_t r = begin + threadIdx.y; r < end; r += kTileRows) {
      const T d = dy[r * n + col];
      if (weight) {
        const T a = rstd[r];
        gammaSum += d * (a * x[r * n + col] + -a * mean[r]);
      }
      betaSum += d;
    }
  }
  __shared__ double gammaTile[kTileRows][kTileCols];
  __shared__ double betaTile[kTileRows][kTileCols];
  gammaTile[threadIdx.y][threadIdx.x] = gammaSum;
  betaTile[threadIdx.y][threadIdx.x] = betaSum;
  __syncthreads();
  if (threadIdx.y != 0 || col >= n)
    return;
  for (int k = 1; k < kTileRows; ++k) {
    gammaSum += gammaTile[k][threadIdx.x];
    betaSum += betaTile[k][threadIdx.x];
  }
  if (weight) {
    if (dgamma)
      dgamma[col] = static_cast<T>(gammaSum);
    else
      dgammaPart[blockIdx.y * n + col] = gammaSum;
  }
  if (bias) {
    if (dbeta)
      dbeta[col] = static_cast<T>(betaSum);
    else
      dbetaPart[blockIdx.y * n + col] = betaSum;
  }
}

/// out[col] = sum over the chunks of part[chunk * n + col]: a warp per
/// column.
template <typename T>
__global__ void sumChunks(T *out, const double *part, int64_t n,
                          int64_t chunks) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t col = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
       col < n; col += warps) {
    double sum = 0;
    for (int64_t k = lane; k < chunks; k += 32)
      sum += part[k * n + col];
    sum = warpSum(sum);
    if (lane == 0)
      out[col] = static_cast<T>(sum);
  }
}

/// Blocks the column sums aim at (a few waves of an H100's 132 SMs), and the
/// fewest rows a chunk gets (8 per thread).
constexpr int64_t kTargetBlocks = 2048;
constexpr int64_t kMinChunkRows = 8 * kTileRows;

/// grad_weight and grad_bias (either may be NULL) of rows.m rows.
template <typename T>
void paramGrads(const char *kernel, SpmdBuffer *gradWeight,
                SpmdBuffer *gradBias, const T *dy, const T *x, const T *mean,
                const T *rstd, Rows rows) {
  const int64_t tiles = ceilDiv(rows.n, kTileCols);
  int64_t chunks = std::max<int64_t>(
      1, std::min({ceilDiv(kTargetBlocks, tiles),
                   ceilDiv(rows.m, kMinChunkRows), int64_t(65535)}));
  const int64_t rowsPerChunk = std::max<int64_t>(1, ceilDiv(rows.m, chunks));
  chunks = std::max<int64_t>(1, ceilDiv(rows.m, rowsPerChunk));
  T *dgamma = gradWeight ? dataOf<T>(gradWeight) : nullptr;
  T *dbeta = gradBias ? dataOf<T>(gradBias) : nullptr;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks));
  const dim3 block(kTileCols, kTileRows);
  if (chunks == 1) {
    layerNormParamGrads<T><<<grid, block, 0, computeStream()>>>(
        dgamma, dbeta, nullptr, nullptr, dy, x, mean, rstd, rows.m, rows.n,
        rowsPerChunk);
    checkLaunch(kernel);
    return;
  }
  const int64_t partBytes = chunks * rows.n * int64_t(sizeof(double));
  std::unique_ptr<Scratch> gammaPart, betaPart;
  if (dgamma)
    gammaPart = std::make_unique<Scratch>(partBytes, kernel);
  if (dbeta)
    betaPart = std::make_unique<Scratch>(partBytes, kernel);
  layerNormParamGrads<T><<<grid, block, 0, computeStream()>>>(
      nullptr, nullptr, gammaPart ? gammaPart->as<double>() : nullptr,
      betaPart ? betaPart->as<double>() : nullptr, dy, x, mean, rstd, rows.m,
      rows.n, rowsPerChunk);
  checkLaunch(kernel);
  const unsigned blocks = gridFor(rows.n * 32);
  if (dgamma) {
    sumChunks<T><<<blocks, kBlock, 0, computeStream()>>>(
        dgamma, gammaPart->as<double>(), rows.n, chunks);
    checkLaunch(kernel);
  }
  if (dbeta) {
    sumChunks<T><<<blocks, kBlock, 0, computeStream()>>>(
        dbeta, betaPart->as<double>(), rows.n, chunks);
    checkLaunch(kernel);
  }
}

} // namespace

/// ATen's LayerNormKernel: biased variance, rstd = 1 / sqrt(var + eps),
/// y = (x * rstd - rstd * mean) * weight + bias.
void spmd_rt_native_layer_norm(SpmdBuffer *output, SpmdBuffer *mean,
                               SpmdBuffer *rstd, const SpmdBuffer *input,
                               const SpmdBuffer *weight, const SpmdBuffer *bias,
                               int64_t normalized_rank, double eps) {
  const char *kernel = "spmd_rt_native_layer_norm";
  Rows rows = normRows(kernel, input, normalized_rank);
  checkSameShape(kernel, "output", output, "input", input);
  checkStatShape(kernel, "mean", mean, input, normalized_rank);
  checkStatShape(kernel, "rstd", rstd, input, normalized_rank);
  if (weight)
    checkNormalizedShape(kernel, "weight", weight, input, normalized_rank);
  if (bias)
    checkNormalizedShape(kernel, "bias", bias, input, normalized_rank);
  dispatch<kFloat>(output->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    if (mean->dtype != output->dtype || rstd->dtype != output->dtype)
      spmd_rt_fatal("%s: mean and rstd must be %s like output", kernel,
                    spmd_rt_dtype_name(output->dtype));
    // No rows, nothing to write (rows of no elements do get their NaN
    // statistics, as on the CPU).
    if (rows.m == 0)
      return;
    std::unique_ptr<Scratch> xS, gammaS, betaS;
    const T *x = dataAs<T>(input, xS, kernel);
    const T *gamma = optionalData<T>(weight, gammaS, kernel);
    const T *beta = optionalData<T>(bias, betaS, kernel);
    T *y = dataOf<T>(output);
    T *meanOut = dataOf<T>(mean);
    T *rstdOut = dataOf<T>(rstd);
    auto launch = [&](auto group) {
      constexpr int kGroup = decltype(group)::value;
      layerNormRows<T, kGroup><<<rowBlocks<kGroup>(rows.m), kRowThreads<kGroup>,
                                 0, computeStream()>>>(
          y, meanOut, rstdOut, x, gamma, beta, rows.m, rows.n, eps);
      checkLaunch(kernel);
    };
    if (rows.n <= 1024)
      launch(std::integral_constant<int, 32>());
    else
      launch(std::integral_constant<int, 256>());
  });
}

/// ATen's LayerNormBackwardKernel: per row, with g = weight (1 if absent),
///   ds = sum(dy * x * g), db = sum(dy * g), a = rstd,
///   b = (db * mean - ds) * a^3 / N, c = -b * mean - db * a / N,
///   dx = a * dy * g + b * x + c;
/// dweight = sum over rows of dy * (x - mean) * rstd, dbias = sum of dy.
void spmd_rt_native_layer_norm_backward(
    SpmdBuffer *grad_input, SpmdBuffer *grad_weight, SpmdBuffer *grad_bias,
    const SpmdBuffer *grad_out, const SpmdBuffer *input, const SpmdBuffer *mean,
    const SpmdBuffer *rstd, const SpmdBuffer *weight, const SpmdBuffer *bias,
    int64_t normalized_rank) {
  (void)bias; // The bias does not enter any gradient.
  const char *kernel = "spmd_rt_native_layer_norm_backward";
  Rows rows = normRows(kernel, input, normalized_rank);
  checkSameShape(kernel, "grad_out", grad_out, "input", input);
  checkStatShape(kernel, "mean", mean, input, normalized_rank);
  checkStatShape(kernel, "rstd", rstd, input, normalized_rank);
  if (grad_input)
    checkSameShape(kernel, "grad_input", grad_input, "input", input);
  if (weight)
    checkNormalizedShape(kernel, "weight", weight, input, normalized_rank);
  if (grad_weight)
    checkNormalizedShape(kernel, "grad_weight", grad_weight, input,
                         normalized_rank);
  if (grad_bias)
    checkNormalizedShape(kernel, "grad_bias", grad_bias, input,
                         normalized_rank);
  // The first non-NULL result fixes the float type.
  const SpmdBuffer *typed = grad_input    ? grad_input
                            : grad_weight ? grad_weight
                                          : grad_bias;
  if (!typed)
    return;
  dispatch<kFloat>(typed->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    for (const SpmdBuffer *result : {grad_input, grad_weight, grad_bias})
      if (result && result->dtype != typed->dtype)
        spmd_rt_fatal("%s: the gradients must share one dtype", kernel);
    // Without rows only grad_weight and grad_bias have elements (zeros).
    if (rows.n == 0 || (rows.m == 0 && !grad_weight && !grad_bias))
      return;
    std::unique_ptr<Scratch> dyS, xS, meanS, rstdS, gammaS;
    const T *dy = dataAs<T>(grad_out, dyS, kernel);
    const T *x = dataAs<T>(input, xS, kernel);
    const T *meanV = dataAs<T>(mean, meanS, kernel);
    const T *rstdV = dataAs<T>(rstd, rstdS, kernel);
    const T *gamma = optionalData<T>(weight, gammaS, kernel);
    if (grad_input && rows.m > 0) {
      const T scale = T(1) / static_cast<T>(rows.n);
      T *dx = dataOf<T>(grad_input);
      auto launch = [&](auto group) {
        constexpr int kGroup = decltype(group)::value;
        layerNormBackwardRows<T, kGroup>
            <<<rowBlocks<kGroup>(rows.m), kRowThreads<kGroup>, 0,
               computeStream()>>>(dx, dy, x, meanV, rstdV, gamma, rows.m,
                                  rows.n, scale);
        checkLaunch(kernel);
      };
      if (rows.n <= 1024)
        launch(std::integral_constant<int, 32>());
      else
        launch(std::integral_constant<int, 256>());
    }
    if (grad_weight || grad_bias)
      paramGrads<T>(kernel, grad_weight, grad_bias, dy, x, meanV, rstdV, rows);
  });
}

} // namespace spmd::rt::cuda
