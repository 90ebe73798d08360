//===- Attention.cu - scaled-dot-product attention and its backward -------===//
//
// cpu/Attention.cpp on the device: query [B, H, L, E], key and value
// [B, H, S, E], an optional additive attn_mask broadcasting to [B, H, L, S],
// is_causal hiding key j from query i when j > i (top-left aligned). The
// forward keeps the output and each row's logsumexp; the backward recomputes
// the probabilities from them (FlashAttention-2's formulation, as ATen's):
//
//   P  = exp(scale * Q K^T + mask - logsumexp)
//   dV = P^T dO,  dP = dO V^T,  D = rowsum(dO * O),  dS = P * (dP - D)
//   dQ = scale * dS K,  dK = scale * dS^T Q
//
// bf16 attention runs fused where the head size allows (forward: 16, 32,
// 64, 96 or 128; backward: 16, 32 or 64): FlashAttention-2's tiling,
// tensor-core mma.sync, scores never stored, causal tiles skipped
// (flashForward, flashBackward). Everything else runs unfused:
// the products are cuBLAS strided-batched GEMMs (gemmBatched) over a chunk
// of the B * H heads at a time; the row work between them is one kernel per
// pass, a block per row of scores. Scores and dP are kept in the compute
// type (f32 for bf16: the GEMM's f32 accumulator, unrounded); P and dS are
// stored in the tensors' type before the GEMMs that read them (as
// FlashAttention rounds P to bf16 before P V). Chunks bound the scratch to
// kScratchBytes whatever B and H are: [L, S] scores are not fused away, so
// memory and time grow with L * S per head, unlike a fused kernel.
//
// A row that sees no key (all -inf) gives zeros and logsumexp 0, as ATen
// and the CPU kernel. A bf16 attention's logsumexp is f32 (ATen's).
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

#include <initializer_list>
#include <limits>

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

/// At most this many bytes of [L, S] scratch per chunk of heads (at least
/// one head per chunk).
constexpr int64_t kScratchBytes = int64_t(256) << 20;

/// The additive mask and causal rule of one head's scores (i, j): query i,
/// key j.
template <typename T> struct HeadMask {
  const T *mask; // the head's [L, S] view, or null
  int64_t rowStride, colStride;
  bool causal;

  __device__ OpMathT<T> apply(OpMathT<T> s, int64_t i, int64_t j) const {
    if (causal && j > i)
      return -std::numeric_limits<OpMathT<T>>::infinity();
    if (mask)
      s += toOpMath(mask[i * rowStride + j * colStride]);
    return s;
  }
};

/// The mask of every head: flat head g = b * heads + h.
template <typename T> struct ScoreMask {
  const T *mask;
  int64_t strides[4];
  int64_t heads;
  bool causal;

  /// Head g's mask (the divisions once per head, not per score).
  __device__ HeadMask<T> head(int64_t g) const {
    return {mask ? mask + (g / heads) * strides[0] + (g % heads) * strides[1]
                 : nullptr,
            strides[2], strides[3], causal};
  }
};

/// Forward rows r < rows of the chunk starting at flat head g0 (row r is
/// query r % l of head g0 + r / l): p = softmax(scores + mask) stored as T,
/// logsumexp[g, i] = max + log(sum(exp(s - max))), kept in OpMathT<T> (f32
/// for bf16, as ATen).
template <typename T>
__global__ void __launch_bounds__(kBlock)
    softmaxRows(T *p, OpMathT<T> *lse, const OpMathT<T> *scores, int64_t g0,
                int64_t rows, int64_t l, int64_t s, ScoreMask<T> mask) {
  using A = OpMathT<T>;
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t g = g0 + r / l, i = r % l;
    const HeadMask<T> head = mask.head(g);
    const A *row = scores + r * s;
    T *out = p + r * s;
    A max = kNegInf;
    for (int64_t j = threadIdx.x; j < s; j += kBlock)
      max = MaxOp()(max, head.apply(row[j], i, j));
    max = groupReduce<kBlock>(max, MaxOp());
    if (max == kNegInf) {
      for (int64_t j = threadIdx.x; j < s; j += kBlock)
        out[j] = toStorage<T>(A(0));
      if (threadIdx.x == 0)
        lse[g * l + i] = A(0);
      continue;
    }
    A sum = 0;
    for (int64_t j = threadIdx.x; j < s; j += kBlock)
      sum += expOf(head.apply(row[j], i, j) - max);
    sum = groupReduce<kBlock>(sum);
    const A reciprocal = A(1) / sum;
    for (int64_t j = threadIdx.x; j < s; j += kBlock)
      out[j] = toStorage<T>(expOf(head.apply(row[j], i, j) - max) * reciprocal);
    if (threadIdx.x == 0)
      lse[g * l + i] = max + logOf(sum);
  }
}

/// Backward rows (as softmaxRows): p = exp(scores + mask - logsumexp) and
/// ds = p * (dp - D), D = dO_i . O_i over the e elements of the row's
/// output, both stored as T.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    softmaxGradRows(T *p, T *ds, const OpMathT<T> *scores, const OpMathT<T> *dp,
                    const OpMathT<T> *lse, const T *out, const T *dout,
                    int64_t g0, int64_t rows, int64_t l, int64_t s, int64_t e,
                    ScoreMask<T> mask) {
  using A = OpMathT<T>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t g = g0 + r / l, i = r % l;
    const int64_t q = g * l + i;
    const HeadMask<T> head = mask.head(g);
    A d = 0;
    for (int64_t k = threadIdx.x; k < e; k += kBlock)
      d += toOpMath(dout[q * e + k]) * toOpMath(out[q * e + k]);
    d = groupReduce<kBlock>(d);
    const A m = lse[q];
    for (int64_t j = threadIdx.x; j < s; j += kBlock) {
      const A pj = expOf(head.apply(scores[r * s + j], i, j) - m);
      p[r * s + j] = toStorage<T>(pj);
      ds[r * s + j] = toStorage<T>(pj * (dp[r * s + j] - d));
    }
  }
}

/// c = alpha * op(a) op(b) per head of a chunk (gemmBatched), writing zeros
/// when there is nothing to sum over (k == 0, which cuBLAS rejects).
template <typename T, typename C>
void product(const char *kernel, int64_t batch, int64_t n, int64_t k, int64_t m,
             double alpha, const T *a, bool transA, int64_t strideA, const T *b,
             bool transB, int64_t strideB, C *c, int64_t strideC) {
  if (batch == 0 || n == 0 || m == 0)
    return;
  if (k == 0) {
    check(cudaMemsetAsync(c, 0, batch * n * m * sizeof(C), computeStream()),
          kernel);
    return;
  }
  gemmBatched<T, C>(kernel, batch, n, k, m, alpha, a, transA, strideA, b,
                    transB, strideB, 0.0, c, strideC);
}

template <typename T>
ScoreMask<T> scoreMask(const AttentionShape &a, const SpmdBuffer *mask,
                       bool causal) {
  return {
      mask ? dataOf<T>(mask) : nullptr,
      {a.maskStrides[0], a.maskStrides[1], a.maskStrides[2], a.maskStrides[3]},
      a.heads,
      causal};
}

/// Heads per chunk when each head needs `bytesPerHead` of scratch.
int64_t headsPerChunk(const AttentionShape &a, int64_t bytesPerHead) {
  const int64_t heads = a.batch * a.heads;
  return std::clamp<int64_t>(kScratchBytes / std::max<int64_t>(bytesPerHead, 1),
                             1, std::max<int64_t>(heads, 1));
}

unsigned rowGrid(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, int64_t(1) << 20));
}

//===----------------------------------------------------------------------===//
// Tensor-core tiles of the fused bf16 kernels (FlashAttention-2)
//===----------------------------------------------------------------------===//

/// Rows of a tile (queries of a forward block, keys of a backward block;
/// 16 a warp) and threads of a block.
constexpr int kTile = 64;
constexpr int kFlashThreads = 128;
/// Row strides of a [64][D] tile and of a transposed [D][64] tile in shared
/// memory: 8 elements of padding keep a warp's fragment loads on distinct
/// banks.
template <int D> constexpr int kRowStride = D + 8;
constexpr int kColumnStride = kTile + 8;

/// Two floats as the bf16 pair of an mma operand register (the lower
/// column in the low half), rounded to nearest even.
__device__ inline uint32_t packBf16(float lo, float hi) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&pair);
}

__device__ inline uint32_t loadPair(const BFloat16 *p) {
  return *reinterpret_cast<const uint32_t *>(p);
}

/// c += a b for a 16x16 bf16 A (row-major fragment), a 16x8 bf16 B (column
/// fragment) and a 16x8 f32 C: PTX mma.sync.m16n8k16. Lane (g = lane / 4,
/// t = lane % 4) holds c[0..1] at row g, columns 2t and 2t+1, c[2..3] at
/// row g + 8; a[0] row g, columns 2t..2t+1, a[1] row g + 8, a[2] and a[3]
/// the same 8 columns on; b0 rows 2t..2t+1 of column g, b1 rows 8 on.
__device__ inline void mma16816(float c[4], const uint32_t a[4], uint32_t b0,
                                uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap(); // Launched only where the device has mma (flashSupported).
#endif
}

/// Rows [r0, r0 + 64) of a [count, D] matrix (zero rows past count) into
/// shared memory: row-major ([64][D + 8]) and/or transposed ([D][64 + 8]),
/// each when given. 8 elements a load; consecutive lanes take consecutive
/// rows, so that the transposed stores hit distinct banks.
template <int D>
__device__ void loadTile(BFloat16 *rowMajor, BFloat16 *transposed,
                         const BFloat16 *src, int64_t r0, int64_t count) {
  for (int at = threadIdx.x; at < kTile * D / 8; at += kFlashThreads) {
    const int r = at % kTile, c = at / kTile * 8;
    uint4 x = {0, 0, 0, 0};
    if (r0 + r < count)
      x = *reinterpret_cast<const uint4 *>(src + (r0 + r) * D + c);
    if (rowMajor)
      *reinterpret_cast<uint4 *>(rowMajor + r * kRowStride<D> + c) = x;
    if (transposed) {
      const BFloat16 *e = reinterpret_cast<const BFloat16 *>(&x);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        transposed[(c + k) * kColumnStride + r] = e[k];
    }
  }
}

/// acc[n] += A B_n^T for n < N: A is rows [r0, r0 + 16) of the row-major
/// tile `a`, B_n rows [8 n, 8 n + 8) of the row-major tile `b`, both over
/// their first D columns (row strides kRowStride<D>).
template <int N, int D>
__device__ void mmaRowsByRows(float acc[N][4], const BFloat16 *a, int r0,
                              const BFloat16 *b) {
  constexpr int kStride = kRowStride<D>;
  const int gr = threadIdx.x % 32 / 4, tq = threadIdx.x % 4;
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) {
    const BFloat16 *at = a + (r0 + gr) * kStride + kc * 16 + 2 * tq;
    const uint32_t frag[4] = {loadPair(at), loadPair(at + 8 * kStride),
                              loadPair(at + 8), loadPair(at + 8 * kStride + 8)};
#pragma unroll
    for (int n = 0; n < N; ++n) {
      const BFloat16 *bt = b + (n * 8 + gr) * kStride + kc * 16 + 2 * tq;
      mma16816(acc[n], frag, loadPair(bt), loadPair(bt + 8));
    }
  }
}

/// Columns [16 kk, 16 kk + 16) of the 16 x 64 block `p` held as 8
/// accumulator fragments, rounded to bf16 as an A fragment (two 8-column
/// accumulators make one 16-column operand).
__device__ inline void fragmentsAsA(uint32_t a[4], const float p[8][4],
                                    int kk) {
  a[0] = packBf16(p[2 * kk][0], p[2 * kk][1]);
  a[1] = packBf16(p[2 * kk][2], p[2 * kk][3]);
  a[2] = packBf16(p[2 * kk + 1][0], p[2 * kk + 1][1]);
  a[3] = packBf16(p[2 * kk + 1][2], p[2 * kk + 1][3]);
}

/// acc[nd] += P B for nd < D / 8: P the 16 x 64 block of accumulator
/// fragments `p` (rounded to bf16), B [64, D] given transposed (`bt`, [D][64
/// + 8]).
template <int D>
__device__ void mmaFragmentsByColumns(float acc[D / 8][4], const float p[8][4],
                                      const BFloat16 *bt) {
  const int gr = threadIdx.x % 32 / 4, tq = threadIdx.x % 4;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    uint32_t a[4];
    fragmentsAsA(a, p, kk);
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      const BFloat16 *at =
          bt + (nd * 8 + gr) * kColumnStride + kk * 16 + 2 * tq;
      mma16816(acc[nd], a, loadPair(at), loadPair(at + 8));
    }
  }
}

//===----------------------------------------------------------------------===//
// The fused bf16 forward
//===----------------------------------------------------------------------===//

/// Bytes of flashForward<D>'s shared memory: the block's queries and a tile
/// of keys row-major, and the tile's values transposed.
template <int D> constexpr int flashSharedBytes() {
  return (2 * kTile * kRowStride<D> + D * kColumnStride) *
         int(sizeof(BFloat16));
}

/// Attention of one block of 64 queries of flat head blockIdx.y, head size
/// D, never storing scores: each warp keeps its 16 rows' scores, running
/// max and sum and output in registers and walks the keys a tile at a time
/// (online softmax), with tensor-core products for Q K^T and P V (P rounded
/// to bf16, as the unfused path). Under is_causal the tiles past the
/// block's last query are skipped. Output bf16, logsumexp f32.
template <int D>
__global__ void __launch_bounds__(kFlashThreads)
    flashForward(BFloat16 *out, float *lse, const BFloat16 *q,
                 const BFloat16 *k, const BFloat16 *v, int64_t l, int64_t s,
                 float scale, ScoreMask<BFloat16> mask) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  extern __shared__ __align__(16) unsigned char shared[];
  BFloat16 *qs = reinterpret_cast<BFloat16 *>(shared);
  BFloat16 *ks = qs + kTile * kRowStride<D>;
  BFloat16 *vt = ks + kTile * kRowStride<D>;
  const int64_t g = blockIdx.y, q0 = int64_t(blockIdx.x) * kTile;
  const int row0 = threadIdx.x / 32 * 16, gr = threadIdx.x % 32 / 4,
            tq = threadIdx.x % 4;
  const HeadMask<BFloat16> head = mask.head(g);
  loadTile<D>(qs, nullptr, q + g * l * D, q0, l);

  // This lane's two query rows; their output, running max and sum.
  const int64_t rows[2] = {q0 + row0 + gr, q0 + row0 + gr + 8};
  float o[D / 8][4] = {};
  float runMax[2] = {kNegInf, kNegInf}, runSum[2] = {0, 0};
  const int64_t keyEnd = mask.causal && q0 + kTile < s ? q0 + kTile : s;
  for (int64_t k0 = 0; k0 < keyEnd; k0 += kTile) {
    __syncthreads(); // the previous tile is consumed
    loadTile<D>(ks, nullptr, k + g * s * D, k0, s);
    loadTile<D>(nullptr, vt, v + g * s * D, k0, s);
    __syncthreads();

    // Scores of the tile: 8 fragments of 8 keys.
    float sc[8][4] = {};
    mmaRowsByRows<8, D>(sc, qs, row0, ks);
    float tileMax[2] = {runMax[0], runMax[1]};
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t i = rows[c / 2], j = k0 + n * 8 + 2 * tq + (c & 1);
        float x = sc[n][c] * scale;
        x = i < l && j < s ? head.apply(x, i, j) : kNegInf;
        sc[n][c] = x;
        tileMax[c / 2] = fmaxf(tileMax[c / 2], x);
      }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      // The 4 lanes of a quad hold a row's columns.
      tileMax[r] =
          fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffu, tileMax[r], 1));
      tileMax[r] =
          fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffu, tileMax[r], 2));
      // Rows that have seen no key keep exp(-inf - 0) = 0.
      base[r] = tileMax[r] == kNegInf ? 0.f : tileMax[r];
      const float correction = expf(runMax[r] - base[r]);
      runMax[r] = tileMax[r];
      runSum[r] *= correction;
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd) {
        o[nd][2 * r] *= correction;
        o[nd][2 * r + 1] *= correction;
      }
    }
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float p = expf(sc[n][c] - base[c / 2]);
        sc[n][c] = p;
        runSum[c / 2] += p;
      }
    mmaFragmentsByColumns<D>(o, sc, vt);
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    runSum[r] += __shfl_xor_sync(0xffffffffu, runSum[r], 1);
    runSum[r] += __shfl_xor_sync(0xffffffffu, runSum[r], 2);
    const int64_t i = rows[r];
    if (i >= l)
      continue;
    const float reciprocal = runSum[r] > 0 ? 1.f / runSum[r] : 0.f;
    BFloat16 *dst = out + (g * l + i) * D + 2 * tq;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd)
      *reinterpret_cast<uint32_t *>(dst + nd * 8) =
          packBf16(o[nd][2 * r] * reciprocal, o[nd][2 * r + 1] * reciprocal);
    if (tq == 0)
      lse[g * l + i] = runMax[r] == kNegInf ? 0.f : runMax[r] + logf(runSum[r]);
  }
}

/// Whether the fused kernels run this attention: bf16, a head size
/// flashForward is instantiated for, every operand in `operands` 16-byte
/// aligned, a device with mma (sm_80 on), and a grid that fits.
bool flashSupported(const AttentionShape &a,
                    std::initializer_list<const void *> operands) {
  static const bool hasMma = [] {
    int device = 0, major = 0;
    return cudaGetDevice(&device) == cudaSuccess &&
           cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                  device) == cudaSuccess &&
           major >= 8;
  }();
  uintptr_t addresses = 0;
  for (const void *p : operands)
    addresses |= reinterpret_cast<uintptr_t>(p);
  const bool headSize =
      a.e == 16 || a.e == 32 || a.e == 64 || a.e == 96 || a.e == 128;
  return hasMma && addresses % 16 == 0 && headSize &&
         a.batch * a.heads <= 65535 &&
         ceilDiv(a.l, kTile) <= (int64_t(1) << 31) - 1;
}

template <int D>
void launchFlash(const char *kernel, const AttentionShape &a, BFloat16 *out,
                 float *lse, const BFloat16 *q, const BFloat16 *k,
                 const BFloat16 *v, double scale,
                 const ScoreMask<BFloat16> &mask) {
  constexpr int bytes = flashSharedBytes<D>();
  static const cudaError_t configured = cudaFuncSetAttribute(
      flashForward<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  check(configured, kernel);
  const dim3 grid(static_cast<unsigned>(ceilDiv(a.l, kTile)),
                  static_cast<unsigned>(a.batch * a.heads));
  flashForward<D><<<grid, kFlashThreads, bytes, computeStream()>>>(
      out, lse, q, k, v, a.l, a.s, static_cast<float>(scale), mask);
  checkLaunch(kernel);
}

/// flashForward for head size a.e (flashSupported's sizes).
void flashAttention(const char *kernel, const AttentionShape &a, BFloat16 *out,
                    float *lse, const BFloat16 *q, const BFloat16 *k,
                    const BFloat16 *v, double scale,
                    const ScoreMask<BFloat16> &mask) {
  switch (a.e) {
  case 16:
    return launchFlash<16>(kernel, a, out, lse, q, k, v, scale, mask);
  case 32:
    return launchFlash<32>(kernel, a, out, lse, q, k, v, scale, mask);
  case 64:
    return launchFlash<64>(kernel, a, out, lse, q, k, v, scale, mask);
  case 96:
    return launchFlash<96>(kernel, a, out, lse, q, k, v, scale, mask);
  default:
    return launchFlash<128>(kernel, a, out, lse, q, k, v, scale, mask);
  }
}

//===----------------------------------------------------------------------===//
// The fused bf16 backward
//===----------------------------------------------------------------------===//

/// delta[r] = dO_r . O_r over the D elements of each of `rows` rows, in f32
/// (FlashAttention-2's D): a warp a row.
__global__ void rowDots(float *delta, const BFloat16 *dout, const BFloat16 *out,
                        int64_t rows, int64_t d) {
  const int lane = threadIdx.x % 32;
  for (int64_t r = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
       r < rows; r += int64_t(gridDim.x) * (blockDim.x / 32)) {
    float sum = 0;
    for (int64_t e = lane; e < d; e += 32)
      sum +=
          __bfloat162float(dout[r * d + e]) * __bfloat162float(out[r * d + e]);
    sum = warpReduce(sum);
    if (lane == 0)
      delta[r] = sum;
  }
}

/// Bytes of flashBackward<D>'s shared memory: K, V, Q and dO tiles
/// row-major, K, Q and dO transposed, dS^T, and the queries' logsumexp and
/// delta.
template <int D> constexpr int flashBackwardSharedBytes() {
  return (4 * kTile * kRowStride<D> + 3 * D * kColumnStride +
          kTile * kColumnStride) *
             int(sizeof(BFloat16)) +
         2 * kTile * int(sizeof(float));
}

/// The gradients reaching the 64 keys [k0, k0 + 64) of flat head
/// blockIdx.y (k0 = 64 blockIdx.x), never storing scores: for each tile of
/// 64 queries (under is_causal, those at k0 or later), warp w recomputes
/// P^T for its 16 keys from logsumexp, accumulates dV += P^T dO and dK +=
/// dS^T Q in registers (dS^T = P^T (dP^T - delta), dP^T = V dO^T), and the
/// block adds dQ += dS K for the tile's queries to the f32 `dqAcc`
/// (atomically: key blocks run concurrently, so dQ's summation order, and
/// its last bits, vary between runs, as FlashAttention's). P and dS are
/// rounded to bf16 before the products that read them.
template <int D>
__global__ void __launch_bounds__(kFlashThreads)
    flashBackward(BFloat16 *dk, BFloat16 *dv, float *dqAcc, const BFloat16 *q,
                  const BFloat16 *k, const BFloat16 *v, const BFloat16 *dout,
                  const float *lse, const float *delta, int64_t l, int64_t s,
                  float scale, ScoreMask<BFloat16> mask) {
  constexpr int kT = kColumnStride;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  extern __shared__ __align__(16) unsigned char shared[];
  BFloat16 *ks = reinterpret_cast<BFloat16 *>(shared);
  BFloat16 *vs = ks + kTile * kRowStride<D>;
  BFloat16 *qs = vs + kTile * kRowStride<D>;
  BFloat16 *dos = qs + kTile * kRowStride<D>;
  BFloat16 *kt = dos + kTile * kRowStride<D>;
  BFloat16 *qt = kt + D * kT;
  BFloat16 *dot = qt + D * kT;
  BFloat16 *dst = dot + D * kT;
  float *lses = reinterpret_cast<float *>(dst + kTile * kT);
  float *deltas = lses + kTile;

  const int64_t g = blockIdx.y, k0 = int64_t(blockIdx.x) * kTile;
  const int warp = threadIdx.x / 32, gr = threadIdx.x % 32 / 4,
            tq = threadIdx.x % 4, key0 = warp * 16;
  const BFloat16 *qh = q + g * l * D, *doh = dout + g * l * D;
  const HeadMask<BFloat16> head = mask.head(g);
  loadTile<D>(ks, kt, k + g * s * D, k0, s);
  loadTile<D>(vs, nullptr, v + g * s * D, k0, s);

  float dkAcc[D / 8][4] = {}, dvAcc[D / 8][4] = {};
  // Under is_causal the queries before k0 see none of these keys.
  for (int64_t q0 = mask.causal ? k0 : 0; q0 < l; q0 += kTile) {
    __syncthreads(); // the previous query tile is consumed
    loadTile<D>(qs, qt, qh, q0, l);
    loadTile<D>(dos, dot, doh, q0, l);
    for (int r = threadIdx.x; r < kTile; r += kFlashThreads) {
      lses[r] = q0 + r < l ? lse[g * l + q0 + r] : 0.f;
      deltas[r] = q0 + r < l ? delta[g * l + q0 + r] : 0.f;
    }
    __syncthreads();

    // P^T from S^T = K_w Q^T (16 keys x 64 queries).
    float pt[8][4] = {};
    mmaRowsByRows<8, D>(pt, ks, key0, qs);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int iq = n * 8 + 2 * tq + (c & 1);
        const int64_t i = q0 + iq, j = k0 + key0 + gr + (c >= 2 ? 8 : 0);
        float x = pt[n][c] * scale;
        x = i < l && j < s ? head.apply(x, i, j) : kNegInf;
        pt[n][c] = expf(x - lses[iq]);
      }
    mmaFragmentsByColumns<D>(dvAcc, pt, dot); // dV_w += P^T dO
    // dS^T = P^T (dP^T - delta), dP^T = V_w dO^T, in pt.
    float dpt[8][4] = {};
    mmaRowsByRows<8, D>(dpt, vs, key0, dos);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        pt[n][c] *= dpt[n][c] - deltas[n * 8 + 2 * tq + (c & 1)];
    mmaFragmentsByColumns<D>(dkAcc, pt, qt); // dK_w += dS^T Q, scaled last
                                             // dS^T to shared memory, for dQ.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t a[4];
      fragmentsAsA(a, pt, kk);
      BFloat16 *row = dst + (key0 + gr) * kT + kk * 16 + 2 * tq;
      *reinterpret_cast<uint32_t *>(row) = a[0];
      *reinterpret_cast<uint32_t *>(row + 8 * kT) = a[1];
      *reinterpret_cast<uint32_t *>(row + 8) = a[2];
      *reinterpret_cast<uint32_t *>(row + 8 * kT + 8) = a[3];
    }
    __syncthreads(); // dS^T of every warp's keys is in shared memory
    // dQ for queries [16 w, 16 w + 16) of the tile: dS (their rows of dS^T's
    // columns) times the tile's K.
    float dq[D / 8][4] = {};
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      // A = dS[query][key]: dS^T read down its columns.
      auto pairAt = [&](int key, int query) {
        __nv_bfloat162 pair;
        pair.x = dst[key * kT + query];
        pair.y = dst[(key + 1) * kT + query];
        return *reinterpret_cast<uint32_t *>(&pair);
      };
      const int kr = kk * 16 + 2 * tq, qr = warp * 16 + gr;
      const uint32_t a[4] = {pairAt(kr, qr), pairAt(kr, qr + 8),
                             pairAt(kr + 8, qr), pairAt(kr + 8, qr + 8)};
#pragma unroll
      for (int nd = 0; nd < D / 8; ++nd) {
        const BFloat16 *at = kt + (nd * 8 + gr) * kT + kk * 16 + 2 * tq;
        mma16816(dq[nd], a, loadPair(at), loadPair(at + 8));
      }
    }
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t i = q0 + warp * 16 + gr + (c >= 2 ? 8 : 0);
        if (i < l)
          atomicAdd(dqAcc + (g * l + i) * D + nd * 8 + 2 * tq + (c & 1),
                    scale * dq[nd][c]);
      }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t j = k0 + key0 + gr + 8 * r;
    if (j >= s)
      continue;
#pragma unroll
    for (int nd = 0; nd < D / 8; ++nd) {
      const int64_t at = (g * s + j) * D + nd * 8 + 2 * tq;
      *reinterpret_cast<uint32_t *>(dk + at) =
          packBf16(scale * dkAcc[nd][2 * r], scale * dkAcc[nd][2 * r + 1]);
      *reinterpret_cast<uint32_t *>(dv + at) =
          packBf16(dvAcc[nd][2 * r], dvAcc[nd][2 * r + 1]);
    }
  }
}

template <int D>
void launchFlashBackward(const char *kernel, const AttentionShape &a,
                         BFloat16 *dk, BFloat16 *dv, float *dqAcc,
                         const BFloat16 *q, const BFloat16 *k,
                         const BFloat16 *v, const BFloat16 *dout,
                         const float *lse, const float *delta, double scale,
                         const ScoreMask<BFloat16> &mask) {
  constexpr int bytes = flashBackwardSharedBytes<D>();
  static const cudaError_t configured = cudaFuncSetAttribute(
      flashBackward<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  check(configured, kernel);
  const dim3 grid(static_cast<unsigned>(ceilDiv(a.s, kTile)),
                  static_cast<unsigned>(a.batch * a.heads));
  flashBackward<D><<<grid, kFlashThreads, bytes, computeStream()>>>(
      dk, dv, dqAcc, q, k, v, dout, lse, delta, a.l, a.s,
      static_cast<float>(scale), mask);
  checkLaunch(kernel);
}

/// The fused backward for head size a.e (16, 32 or 64: flashSupported and
/// a.e <= 64, where its accumulators fit in registers): delta, then
/// flashBackward, then dQ rounded to bf16.
void flashAttentionBackward(const char *kernel, const AttentionShape &a,
                            BFloat16 *dq, BFloat16 *dk, BFloat16 *dv,
                            const BFloat16 *dout, const BFloat16 *q,
                            const BFloat16 *k, const BFloat16 *v,
                            const BFloat16 *out, const float *lse, double scale,
                            const ScoreMask<BFloat16> &mask) {
  const int64_t rows = a.batch * a.heads * a.l, n = rows * a.e;
  Scratch delta(rows * int64_t(sizeof(float)), kernel);
  Scratch dqAcc(n * int64_t(sizeof(float)), kernel);
  cudaStream_t stream = computeStream();
  rowDots<<<static_cast<unsigned>(std::min<int64_t>(ceilDiv(rows, 8), 65536)),
            kBlock, 0, stream>>>(delta.as<float>(), dout, out, rows, a.e);
  checkLaunch(kernel);
  check(cudaMemsetAsync(dqAcc.data(), 0, n * sizeof(float), stream), kernel);
  switch (a.e) {
  case 16:
    launchFlashBackward<16>(kernel, a, dk, dv, dqAcc.as<float>(), q, k, v, dout,
                            lse, delta.as<float>(), scale, mask);
    break;
  case 32:
    launchFlashBackward<32>(kernel, a, dk, dv, dqAcc.as<float>(), q, k, v, dout,
                            lse, delta.as<float>(), scale, mask);
    break;
  default:
    launchFlashBackward<64>(kernel, a, dk, dv, dqAcc.as<float>(), q, k, v, dout,
                            lse, delta.as<float>(), scale, mask);
  }
  // dQ rounded to bf16 by the backend's cast.
  SpmdBuffer accumulated = {};
  accumulated.data = dqAcc.data();
  accumulated.numel = n;
  accumulated.dtype = SPMD_F32;
  convert(dq, SPMD_BF16, &accumulated, kernel);
}

} // namespace

void spmd_rt_attention(SpmdBuffer *output, SpmdBuffer *logsumexp,
                       const SpmdBuffer *query, const SpmdBuffer *key,
                       const SpmdBuffer *value, const SpmdBuffer *attn_mask,
                       int64_t is_causal, double scale) {
  const char *kernel = "spmd_rt_attention";
  const AttentionShape a =
      checkAttention(kernel, query, key, value, attn_mask, output, logsumexp);
  dispatchDevice<kFloat | kBFloat16>(query->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    using A = OpMathT<T>;
    const int64_t heads = a.batch * a.heads, l = a.l, s = a.s, e = a.e;
    if (heads == 0 || l == 0)
      return;
    const ScoreMask<T> mask = scoreMask<T>(a, attn_mask, is_causal != 0);
    const T *q = dataOf<T>(query), *k = dataOf<T>(key), *v = dataOf<T>(value);
    T *o = dataOf<T>(output);
    A *lse = dataOf<A>(logsumexp);
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (flashSupported(a, {q, k, v, o}))
        return flashAttention(kernel, a, o, lse, q, k, v, scale, mask);
    }
    const int64_t chunk =
        headsPerChunk(a, l * s * int64_t(sizeof(A) + sizeof(T)));
    Scratch scores(chunk * l * s * int64_t(sizeof(A)), kernel);
    Scratch probs(chunk * l * s * int64_t(sizeof(T)), kernel);
    for (int64_t g0 = 0; g0 < heads; g0 += chunk) {
      const int64_t count = std::min(chunk, heads - g0);
      product<T, A>(kernel, count, l, e, s, scale, q + g0 * l * e, false, l * e,
                    k + g0 * s * e, true, s * e, scores.as<A>(), l * s);
      softmaxRows<T><<<rowGrid(count * l), kBlock, 0, computeStream()>>>(
          probs.as<T>(), lse, scores.as<A>(), g0, count * l, l, s, mask);
      checkLaunch(kernel);
      product<T, T>(kernel, count, l, s, e, 1.0, probs.as<T>(), false, l * s,
                    v + g0 * s * e, false, s * e, o + g0 * l * e, l * e);
    }
  });
}

void spmd_rt_attention_backward(
    SpmdBuffer *grad_query, SpmdBuffer *grad_key, SpmdBuffer *grad_value,
    const SpmdBuffer *grad_out, const SpmdBuffer *query, const SpmdBuffer *key,
    const SpmdBuffer *value, const SpmdBuffer *out, const SpmdBuffer *logsumexp,
    const SpmdBuffer *attn_mask, int64_t is_causal, double scale) {
  const char *kernel = "spmd_rt_attention_backward";
  const AttentionShape a =
      checkAttentionBackward(kernel, grad_query, grad_key, grad_value, grad_out,
                             query, key, value, out, logsumexp, attn_mask);
  dispatchDevice<kFloat | kBFloat16>(query->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    using A = OpMathT<T>;
    const int64_t heads = a.batch * a.heads, l = a.l, s = a.s, e = a.e;
    if (heads == 0)
      return;
    // With no queries nothing reaches the keys and values (the GEMMs over
    // L would write nothing).
    if (l == 0) {
      for (SpmdBuffer *g : {grad_key, grad_value})
        check(
            cudaMemsetAsync(g->data, 0, g->numel * sizeof(T), computeStream()),
            kernel);
      return;
    }
    const ScoreMask<T> mask = scoreMask<T>(a, attn_mask, is_causal != 0);
    const T *q = dataOf<T>(query), *k = dataOf<T>(key), *v = dataOf<T>(value),
            *o = dataOf<T>(out), *dout = dataOf<T>(grad_out);
    const A *lse = dataOf<A>(logsumexp);
    T *dq = dataOf<T>(grad_query), *dk = dataOf<T>(grad_key),
      *dv = dataOf<T>(grad_value);
    if constexpr (std::is_same_v<T, BFloat16>) {
      if (e <= 64 && s > 0 && flashSupported(a, {q, k, v, o, dout, dq, dk, dv}))
        return flashAttentionBackward(kernel, a, dq, dk, dv, dout, q, k, v, o,
                                      lse, scale, mask);
    }
    const int64_t chunk =
        headsPerChunk(a, l * s * int64_t(2 * sizeof(A) + 2 * sizeof(T)));
    const int64_t area = chunk * l * s;
    Scratch scores(area * int64_t(sizeof(A)), kernel);
    Scratch dp(area * int64_t(sizeof(A)), kernel);
    Scratch probs(area * int64_t(sizeof(T)), kernel);
    Scratch ds(area * int64_t(sizeof(T)), kernel);
    for (int64_t g0 = 0; g0 < heads; g0 += chunk) {
      const int64_t count = std::min(chunk, heads - g0);
      const int64_t qo = g0 * l * e, ko = g0 * s * e;
      product<T, A>(kernel, count, l, e, s, scale, q + qo, false, l * e, k + ko,
                    true, s * e, scores.as<A>(), l * s);
      product<T, A>(kernel, count, l, e, s, 1.0, dout + qo, false, l * e,
                    v + ko, true, s * e, dp.as<A>(), l * s);
      softmaxGradRows<T><<<rowGrid(count * l), kBlock, 0, computeStream()>>>(
          probs.as<T>(), ds.as<T>(), scores.as<A>(), dp.as<A>(), lse, o, dout,
          g0, count * l, l, s, e, mask);
      checkLaunch(kernel);
      product<T, T>(kernel, count, s, l, e, 1.0, probs.as<T>(), true, l * s,
                    dout + qo, false, l * e, dv + ko, s * e);
      product<T, T>(kernel, count, l, s, e, scale, ds.as<T>(), false, l * s,
                    k + ko, false, s * e, dq + qo, l * e);
      product<T, T>(kernel, count, s, l, e, scale, ds.as<T>(), true, l * s,
                    q + qo, false, l * e, dk + ko, s * e);
    }
  });
}

} // namespace spmd::rt::cuda
