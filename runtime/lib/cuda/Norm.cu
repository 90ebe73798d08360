//===- Norm.cu - native_layer_norm and its backward on the GPU ------------===//
//
// cpu/Norm.cpp on the device. The input is viewed as [M, N] rows, N the
// product of the trailing `normalized_rank` dims. A group of threads owns a
// row (a warp for rows of up to 1024 elements, a block above), reads it
// coalesced (into registers, when it has at most 16 elements a thread, so
// that the passes read memory once) and combines its sums with warp
// shuffles and shared memory; row statistics
// accumulate in double and the per element math is ATen's LayerNormKernel
// in the input's float type, as on the CPU. bf16 follows ATen's
// CUDA kernels: statistics and math in float, each result rounded to bf16
// once on store; its mean and rstd are bf16 or f32 buffers (PyTorch's CPU
// and CUDA kernels differ; the captured program decides).
//
// The weight and bias gradients are column sums over the rows: blocks of
// 32 columns by 8 rows walk a chunk of rows each (coalesced along the
// columns), and a second pass adds up the chunks' partial sums (AccT) in a
// fixed order, so the results are deterministic.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

#include <cmath>

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

/// `b`'s data as T, or NULL when `b` is NULL (the kernels read an absent
/// weight as 1 and an absent bias as 0).
template <typename T>
const T *optionalData(const SpmdBuffer *b, std::unique_ptr<Scratch> &storage,
                      const char *kernel) {
  return b ? dataAs<T>(b, storage, kernel) : nullptr;
}

/// Calls `fn(S{})` with the C++ type of the mean and rstd buffers of float
/// type T: T itself for f32 and f64, as on the CPU. For bf16, bf16 when
/// `mean` holds bf16 (PyTorch's CPU kernel) and float otherwise (its CUDA
/// kernel; a backward reads other dtypes converted, as mixed inputs).
template <typename T, typename Fn>
void dispatchStats(const SpmdBuffer *mean, Fn &&fn) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    if (mean->dtype == SPMD_BF16)
      return fn(BFloat16{});
    fn(float{});
  } else {
    fn(T{});
  }
}

/// This thread's elements j = lane, lane + kGroup, ... of a row of n.
/// With kCache > 0 (rows of at most kGroup * kCache elements) `forEach`
/// unrolls over kCache slots k, so that the kernels keep their rows in
/// registers (slot k) and read memory once; else it loops (k is 0).
template <int kGroup, int kCache> struct Lanes {
  static constexpr int kSlots = kCache > 0 ? kCache : 1;
  int64_t n;
  int lane;

  template <typename F> __device__ void forEach(F f) const {
    if constexpr (kCache > 0) {
#pragma unroll
      for (int k = 0; k < kCache; ++k) {
        const int j = lane + k * kGroup;
        if (j < int(n))
          f(int64_t(j), k);
      }
    } else {
#pragma unroll 4
      for (int64_t j = lane; j < n; j += kGroup)
        f(j, 0);
    }
  }

  /// Element j (slot k) of a row `p` whose elements this thread cached in
  /// `cache`.
  template <typename T>
  __device__ T at(const T *p, const T *cache, int64_t j, int k) const {
    if constexpr (kCache > 0)
      return cache[k];
    else
      return p[j];
  }

  /// Fills `cache` with this thread's elements of row `p` (if cached).
  template <typename T> __device__ void load(const T *p, T *cache) const {
    if constexpr (kCache > 0)
      forEach([&](int64_t j, int k) { cache[k] = p[j]; });
  }
};

/// `p[j]` in OpMathT<T>, or `absent` when p is NULL (an absent weight reads
/// as 1, an absent bias as 0).
template <typename T>
__device__ OpMathT<T> optionalAt(const T *p, int64_t j, OpMathT<T> absent) {
  return p ? toOpMath(p[j]) : absent;
}

/// The forward, per row: mean, then the biased variance around it (two
/// passes, sums in AccT<T>: double, so the float results match ATen's
/// Welford moments to rounding; float for bf16, as ATen's CUDA kernel), then
/// y = (x * rstd - rstd * mean) * gamma + beta in A = OpMathT<T>. mean and
/// rstd are stored as S.
template <typename T, typename S, int kGroup, int kCache>
__global__ void __launch_bounds__(kRowThreads<kGroup>)
    layerNormRows(T *__restrict__ y, S *__restrict__ meanOut,
                  S *__restrict__ rstdOut, const T *__restrict__ x,
                  const T *__restrict__ gamma, const T *__restrict__ beta,
                  int64_t m, int64_t n, double eps) {
  using A = OpMathT<T>;
  using Acc = AccT<T>;
  const RowCursor<kGroup> cursor;
  const Lanes<kGroup, kCache> lanes{n, cursor.lane()};
  for (int64_t row = cursor.first(); row < m; row += cursor.step()) {
    const T *xr = x + row * n;
    T xc[lanes.kSlots];
    lanes.load(xr, xc);
    auto xAt = [&](int64_t j, int k) {
      return toOpMath(lanes.at(xr, xc, j, k));
    };
    Acc sum = 0;
    lanes.forEach([&](int64_t j, int k) { sum += xAt(j, k); });
    const A mean = static_cast<A>(groupReduce<kGroup>(sum) / Acc(n));
    // Deviations from the mean rounded to A, as in ATen's float moments.
    Acc squares = 0;
    lanes.forEach([&](int64_t j, int k) {
      const A dev = xAt(j, k) - mean;
      squares += dev * dev;
    });
    const Acc var = groupReduce<kGroup>(squares) / Acc(n);
    const A rstd = static_cast<A>(Acc(1) / sqrt(var + static_cast<Acc>(eps)));
    const A shift = -rstd * mean;
    T *yr = y + row * n;
    lanes.forEach([&](int64_t j, int k) {
      yr[j] =
          toStorage<T>((xAt(j, k) * rstd + shift) * optionalAt(gamma, j, A(1)) +
                       optionalAt(beta, j, A(0)));
    });
    if (lanes.lane == 0) {
      meanOut[row] = toStorage<S>(mean);
      rstdOut[row] = toStorage<S>(rstd);
    }
  }
}

/// The input gradient, per row (ATen's formula, see
/// spmd_rt_native_layer_norm_backward): sums in AccT<T>, math in OpMathT<T>,
/// mean and rstd read as S.
template <typename T, typename S, int kGroup, int kCache>
__global__ void __launch_bounds__(kRowThreads<kGroup>)
    layerNormBackwardRows(T *__restrict__ dx, const T *__restrict__ dy,
                          const T *__restrict__ x, const S *__restrict__ mean,
                          const S *__restrict__ rstd,
                          const T *__restrict__ gamma, int64_t m, int64_t n,
                          OpMathT<T> scale) {
  using A = OpMathT<T>;
  using Acc = AccT<T>;
  const RowCursor<kGroup> cursor;
  const Lanes<kGroup, kCache> lanes{n, cursor.lane()};
  for (int64_t row = cursor.first(); row < m; row += cursor.step()) {
    const T *dyr = dy + row * n;
    const T *xr = x + row * n;
    T dyc[lanes.kSlots], xc[lanes.kSlots];
    lanes.load(dyr, dyc);
    lanes.load(xr, xc);
    auto dyAt = [&](int64_t j, int k) {
      return toOpMath(lanes.at(dyr, dyc, j, k));
    };
    auto xAt = [&](int64_t j, int k) {
      return toOpMath(lanes.at(xr, xc, j, k));
    };
    Acc dsSum = 0, dbSum = 0;
    lanes.forEach([&](int64_t j, int k) {
      const A g = optionalAt(gamma, j, A(1));
      dsSum += dyAt(j, k) * xAt(j, k) * g;
      dbSum += dyAt(j, k) * g;
    });
    const A ds = static_cast<A>(groupReduce<kGroup>(dsSum));
    const A db = static_cast<A>(groupReduce<kGroup>(dbSum));
    const A mu = toOpMath(mean[row]);
    const A a = toOpMath(rstd[row]);
    const A b = (db * mu - ds) * a * a * a * scale;
    const A c = -b * mu - db * a * scale;
    T *dxr = dx + row * n;
    lanes.forEach([&](int64_t j, int k) {
      dxr[j] = toStorage<T>(a * dyAt(j, k) * optionalAt(gamma, j, A(1)) +
                            b * xAt(j, k) + c);
    });
  }
}

/// Launches over the rows.m rows of rows.n elements the row kernel that
/// `pick(kGroup, kCache)` (integral constants) returns, with `args`: a warp
/// per row up to 1024 elements, else a block; rows of up to 16 elements a
/// thread stay in registers.
template <typename Pick, typename... Args>
void launchRows(const char *kernel, NormRows rows, Pick pick, Args... args) {
  auto run = [&](auto group, auto cache) {
    constexpr int kGroup = decltype(group)::value;
    pick(group, cache)<<<rowBlocks<kGroup>(rows.m), kRowThreads<kGroup>, 0,
                         computeStream()>>>(args...);
    checkLaunch(kernel);
  };
  using std::integral_constant;
  if (rows.n <= 32 * 16)
    run(integral_constant<int, 32>(), integral_constant<int, 16>());
  else if (rows.n <= 1024)
    run(integral_constant<int, 32>(), integral_constant<int, 0>());
  else if (rows.n <= 256 * 16)
    run(integral_constant<int, 256>(), integral_constant<int, 16>());
  else if (rows.n <= 512 * 16)
    run(integral_constant<int, 512>(), integral_constant<int, 16>());
  else
    run(integral_constant<int, 256>(), integral_constant<int, 0>());
}

/// Tile of the column sums: kTileCols columns (a warp, coalesced) by
/// kTileRows rows.
constexpr int kTileCols = 32;
constexpr int kTileRows = kBlock / kTileCols;

/// Column sums over rows [chunk * rowsPerChunk, + rowsPerChunk) of
///   dgamma: dy * (rstd * x - rstd * mean), dbeta: dy,
/// each in Acc = AccT<T> (the terms in OpMathT<T>). With one chunk the sums
/// are the results (`dgamma`, `dbeta`, rounded to T once); else they go to
/// `*Part[chunk * n + column]`. A NULL result (both pointers NULL) is not
/// computed.
template <typename T, typename S, typename Acc>
__global__ void __launch_bounds__(kBlock)
    layerNormParamGrads(T *dgamma, T *dbeta, Acc *dgammaPart, Acc *dbetaPart,
                        const T *__restrict__ dy, const T *__restrict__ x,
                        const S *__restrict__ mean, const S *__restrict__ rstd,
                        int64_t m, int64_t n, int64_t rowsPerChunk) {
  using A = OpMathT<T>;
  const bool weight = dgamma || dgammaPart;
  const bool bias = dbeta || dbetaPart;
  const int64_t col = blockIdx.x * int64_t(kTileCols) + threadIdx.x;
  const int64_t begin = blockIdx.y * rowsPerChunk;
  const int64_t end = std::min(m, begin + rowsPerChunk);
  Acc gammaSum = 0, betaSum = 0;
  if (col < n) {
#pragma unroll 4
    for (int64_t r = begin + threadIdx.y; r < end; r += kTileRows) {
      const A d = toOpMath(dy[r * n + col]);
      if (weight) {
        const A a = toOpMath(rstd[r]);
        gammaSum += d * (a * toOpMath(x[r * n + col]) + -a * toOpMath(mean[r]));
      }
      betaSum += d;
    }
  }
  __shared__ Acc gammaTile[kTileRows][kTileCols];
  __shared__ Acc betaTile[kTileRows][kTileCols];
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
      dgamma[col] = toStorage<T>(gammaSum);
    else
      dgammaPart[blockIdx.y * n + col] = gammaSum;
  }
  if (bias) {
    if (dbeta)
      dbeta[col] = toStorage<T>(betaSum);
    else
      dbetaPart[blockIdx.y * n + col] = betaSum;
  }
}

/// The fewest rows a chunk of the column sums gets (8 per thread).
constexpr int64_t kMinChunkRows = 8 * kTileRows;

/// grad_weight and grad_bias (either may be NULL) of rows.m rows.
template <typename T, typename S>
void paramGrads(const char *kernel, SpmdBuffer *gradWeight,
                SpmdBuffer *gradBias, const T *dy, const T *x, const S *mean,
                const S *rstd, NormRows rows) {
  using Acc = AccT<T>;
  const int64_t tiles = ceilDiv(rows.n, kTileCols);
  const RowChunks split = chunkRows(rows.m, tiles, kMinChunkRows);
  const int64_t chunks = split.count, rowsPerChunk = split.rowsPerChunk;
  T *dgamma = gradWeight ? dataOf<T>(gradWeight) : nullptr;
  T *dbeta = gradBias ? dataOf<T>(gradBias) : nullptr;
  const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks));
  const dim3 block(kTileCols, kTileRows);
  if (chunks == 1) {
    layerNormParamGrads<T, S, Acc><<<grid, block, 0, computeStream()>>>(
        dgamma, dbeta, nullptr, nullptr, dy, x, mean, rstd, rows.m, rows.n,
        rowsPerChunk);
    checkLaunch(kernel);
    return;
  }
  const int64_t partBytes = chunks * rows.n * int64_t(sizeof(Acc));
  std::unique_ptr<Scratch> gammaPart, betaPart;
  if (dgamma)
    gammaPart = std::make_unique<Scratch>(partBytes, kernel);
  if (dbeta)
    betaPart = std::make_unique<Scratch>(partBytes, kernel);
  layerNormParamGrads<T, S, Acc><<<grid, block, 0, computeStream()>>>(
      nullptr, nullptr, gammaPart ? gammaPart->as<Acc>() : nullptr,
      betaPart ? betaPart->as<Acc>() : nullptr, dy, x, mean, rstd, rows.m,
      rows.n, rowsPerChunk);
  checkLaunch(kernel);
  auto addChunks = [&](T *result, const Scratch &part) {
    reduceChunks<<<gridFor(rows.n * 32), kBlock, 0, computeStream()>>>(
        result, part.as<Acc>(), rows.n, chunks);
    checkLaunch(kernel);
  };
  if (dgamma)
    addChunks(dgamma, *gammaPart);
  if (dbeta)
    addChunks(dbeta, *betaPart);
}

} // namespace

/// ATen's LayerNormKernel: biased variance, rstd = 1 / sqrt(var + eps),
/// y = (x * rstd - rstd * mean) * weight + bias.
void spmd_rt_native_layer_norm(SpmdBuffer *output, SpmdBuffer *mean,
                               SpmdBuffer *rstd, const SpmdBuffer *input,
                               const SpmdBuffer *weight, const SpmdBuffer *bias,
                               int64_t normalized_rank, double eps) {
  const char *kernel = "spmd_rt_native_layer_norm";
  const NormRows rows = checkLayerNorm(kernel, output, mean, rstd, input,
                                       weight, bias, normalized_rank);
  dispatchDevice<kFloat | kBFloat16>(output->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    // The kernel writes mean and rstd in their own dtype (dispatchStats), so
    // no conversion can take a stray one.
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (rstd->dtype != mean->dtype ||
          (mean->dtype != SPMD_BF16 && mean->dtype != SPMD_F32))
        spmd_rt_fatal("%s: mean and rstd must both be bf16 or both f32 for "
                      "bf16 output",
                      kernel);
    } else {
      checkLayerNormStatDTypes(kernel, output, mean, rstd);
    }
    // No rows, nothing to write (rows of no elements do get their NaN
    // statistics, as on the CPU).
    if (rows.m == 0)
      return;
    std::unique_ptr<Scratch> xS, gammaS, betaS;
    const T *x = dataAs<T>(input, xS, kernel);
    const T *gamma = optionalData<T>(weight, gammaS, kernel);
    const T *beta = optionalData<T>(bias, betaS, kernel);
    T *y = dataOf<T>(output);
    dispatchStats<T>(mean, [&](auto statTag) {
      using S = decltype(statTag);
      S *meanOut = dataOf<S>(mean);
      S *rstdOut = dataOf<S>(rstd);
      launchRows(
          kernel, rows,
          [](auto group, auto cache) {
            return layerNormRows<T, S, group, cache>;
          },
          y, meanOut, rstdOut, x, gamma, beta, rows.m, rows.n, eps);
    });
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
  const NormRows rows = checkLayerNormBackward(kernel, grad_input, grad_weight,
                                               grad_bias, grad_out, input, mean,
                                               rstd, weight, normalized_rank);
  // The first non-NULL result fixes the float type.
  const SpmdBuffer *typed =
      layerNormGradTyped(grad_input, grad_weight, grad_bias);
  if (!typed)
    return;
  dispatchDevice<kFloat | kBFloat16>(typed->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    using A = OpMathT<T>;
    checkLayerNormGradDTypes(kernel, grad_input, grad_weight, grad_bias);
    // Without rows only grad_weight and grad_bias have elements (zeros).
    if (rows.n == 0 || (rows.m == 0 && !grad_weight && !grad_bias))
      return;
    std::unique_ptr<Scratch> dyS, xS, gammaS;
    const T *dy = dataAs<T>(grad_out, dyS, kernel);
    const T *x = dataAs<T>(input, xS, kernel);
    const T *gamma = optionalData<T>(weight, gammaS, kernel);
    dispatchStats<T>(mean, [&](auto statTag) {
      using S = decltype(statTag);
      std::unique_ptr<Scratch> meanS, rstdS;
      const S *meanV = dataAs<S>(mean, meanS, kernel);
      const S *rstdV = dataAs<S>(rstd, rstdS, kernel);
      if (grad_input && rows.m > 0) {
        const A scale = A(1) / static_cast<A>(rows.n);
        T *dx = dataOf<T>(grad_input);
        launchRows(
            kernel, rows,
            [](auto group, auto cache) {
              return layerNormBackwardRows<T, S, group, cache>;
            },
            dx, dy, x, meanV, rstdV, gamma, rows.m, rows.n, scale);
      }
      if (grad_weight || grad_bias)
        paramGrads<T, S>(kernel, grad_weight, grad_bias, dy, x, meanV, rstdV,
                         rows);
    });
  });
}

} // namespace spmd::rt::cuda
