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
// The products are cuBLAS strided-batched GEMMs (gemmBatched) over a chunk
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

#include <limits>

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

/// At most this many bytes of [L, S] scratch per chunk of heads (at least
/// one head per chunk).
constexpr int64_t kScratchBytes = int64_t(256) << 20;

__device__ inline float expOf(float x) { return expf(x); }
__device__ inline double expOf(double x) { return exp(x); }
__device__ inline float logOf(float x) { return logf(x); }
__device__ inline double logOf(double x) { return log(x); }

/// The additive mask and causal rule of score (g, i, j): flat head g =
/// b * heads + h, query i, key j.
template <typename T> struct ScoreMask {
  const T *mask;
  int64_t strides[4];
  int64_t heads;
  bool causal;

  __device__ OpMathT<T> apply(OpMathT<T> s, int64_t g, int64_t i,
                              int64_t j) const {
    if (causal && j > i)
      return -std::numeric_limits<OpMathT<T>>::infinity();
    if (mask)
      s += toOpMath(mask[(g / heads) * strides[0] + (g % heads) * strides[1] +
                         i * strides[2] + j * strides[3]]);
    return s;
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
    const A *row = scores + r * s;
    T *out = p + r * s;
    A max = kNegInf;
    for (int64_t j = threadIdx.x; j < s; j += kBlock)
      max = MaxOp()(max, mask.apply(row[j], g, i, j));
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
      sum += expOf(mask.apply(row[j], g, i, j) - max);
    sum = groupReduce<kBlock>(sum);
    const A reciprocal = A(1) / sum;
    for (int64_t j = threadIdx.x; j < s; j += kBlock)
      out[j] =
          toStorage<T>(expOf(mask.apply(row[j], g, i, j) - max) * reciprocal);
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
    A d = 0;
    for (int64_t k = threadIdx.x; k < e; k += kBlock)
      d += toOpMath(dout[q * e + k]) * toOpMath(out[q * e + k]);
    d = groupReduce<kBlock>(d);
    const A m = lse[q];
    for (int64_t j = threadIdx.x; j < s; j += kBlock) {
      const A pj = expOf(mask.apply(scores[r * s + j], g, i, j) - m);
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
    const int64_t chunk =
        headsPerChunk(a, l * s * int64_t(sizeof(A) + sizeof(T)));
    Scratch scores(chunk * l * s * int64_t(sizeof(A)), kernel);
    Scratch probs(chunk * l * s * int64_t(sizeof(T)), kernel);
    const ScoreMask<T> mask = scoreMask<T>(a, attn_mask, is_causal != 0);
    const T *q = dataOf<T>(query), *k = dataOf<T>(key), *v = dataOf<T>(value);
    T *o = dataOf<T>(output);
    A *lse = dataOf<A>(logsumexp);
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
      checkAttention(kernel, query, key, value, attn_mask, out, logsumexp);
  checkSameShape(kernel, "grad_out", grad_out, "query", query);
  checkSameShape(kernel, "grad_query", grad_query, "query", query);
  checkSameShape(kernel, "grad_key", grad_key, "key", key);
  checkSameShape(kernel, "grad_value", grad_value, "value", value);
  checkSameDTypes(kernel, "query", query,
                  {"grad_out", "grad_query", "grad_key", "grad_value"},
                  {grad_out, grad_query, grad_key, grad_value});
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
    const int64_t chunk =
        headsPerChunk(a, l * s * int64_t(2 * sizeof(A) + 2 * sizeof(T)));
    const int64_t area = chunk * l * s;
    Scratch scores(area * int64_t(sizeof(A)), kernel);
    Scratch dp(area * int64_t(sizeof(A)), kernel);
    Scratch probs(area * int64_t(sizeof(T)), kernel);
    Scratch ds(area * int64_t(sizeof(T)), kernel);
    const ScoreMask<T> mask = scoreMask<T>(a, attn_mask, is_causal != 0);
    const T *q = dataOf<T>(query), *k = dataOf<T>(key), *v = dataOf<T>(value),
            *o = dataOf<T>(out), *dout = dataOf<T>(grad_out);
    const A *lse = dataOf<A>(logsumexp);
    T *dq = dataOf<T>(grad_query), *dk = dataOf<T>(grad_key),
      *dv = dataOf<T>(grad_value);
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
