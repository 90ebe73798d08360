//===- Attention.cpp - scaled-dot-product attention and its backward ------===//
//
// ATen's CPU flash attention (_scaled_dot_product_flash_attention_for_cpu)
// and its backward, one (batch, head) at a time: the scores of a head,
// [L, S], are one GEMM on OpenBLAS, so memory stays at two [L, S] buffers
// whatever the batch and head counts. The forward keeps only the output
// and each row's logsumexp; the backward recomputes the probabilities from
// them (FlashAttention-2's formulation, as ATen's):
//
//   P  = exp(scale * Q K^T + mask - logsumexp)
//   dV = P^T dO,  dP = dO V^T,  D = rowsum(dO * O),  dS = P * (dP - D)
//   dQ = scale * dS K,  dK = scale * dS^T Q
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "Kernels.h"

#include <cmath>
#include <limits>

using namespace spmd::rt;

namespace {

/// One (batch, head) and the offsets of its query and output rows [L, E],
/// key and value rows [S, E] and logsumexp [L].
struct Head {
  int64_t b, h;
  int64_t qOffset(const AttentionShape &a) const {
    return (b * a.heads + h) * a.l * a.e;
  }
  int64_t kOffset(const AttentionShape &a) const {
    return (b * a.heads + h) * a.s * a.e;
  }
  int64_t statsOffset(const AttentionShape &a) const {
    return (b * a.heads + h) * a.l;
  }
};

/// s[i, j] = scale * (q_i . k_j) + mask[b, h, i, j] for one head of [L, S]
/// scores, -inf where is_causal hides key j from query i (j > i: ATen's
/// top-left alignment, also when L != S).
template <typename T>
void headScores(const AttentionShape &a, int64_t b, int64_t h, const T *q,
                const T *k, const T *mask, bool causal, T scale, T *s) {
  gemm<T>(a.l, a.s, a.e, scale, q, false, k, true, T(0), s);
  if (mask) {
    const auto &st = a.maskStrides;
    const T *m = mask + b * st[0] + h * st[1];
    for (int64_t i = 0; i < a.l; ++i)
      for (int64_t j = 0; j < a.s; ++j)
        s[i * a.s + j] += m[i * st[2] + j * st[3]];
  }
  if (causal)
    for (int64_t i = 0; i < a.l; ++i)
      for (int64_t j = i + 1; j < a.s; ++j)
        s[i * a.s + j] = -std::numeric_limits<T>::infinity();
}

/// Runs `body(T{}, shape, head)` for every (batch, head) with the buffers'
/// float type; every buffer has query's dtype (checkAttention).
template <typename Body>
void forEachHead(const char *kernel, const AttentionShape &a,
                 const SpmdBuffer *query, Body &&body) {
  dispatch<kFloat>(query->dtype, kernel, [&](auto tag) {
    for (int64_t b = 0; b < a.batch; ++b)
      for (int64_t h = 0; h < a.heads; ++h)
        body(tag, Head{b, h});
  });
}

template <typename T> const T *maskData(const SpmdBuffer *mask) {
  return mask ? dataOf<T>(mask) : nullptr;
}

} // namespace

namespace spmd::rt::cpu {

/// Per row of scores: softmax with its maximum subtracted, logsumexp =
/// max + log(sum(exp(s - max))); a row that sees no key (all -inf) gives
/// zeros and logsumexp 0, as ATen, so that the backward's exp(s - 0) is 0.
void spmd_rt_attention(SpmdBuffer *output, SpmdBuffer *logsumexp,
                       const SpmdBuffer *query, const SpmdBuffer *key,
                       const SpmdBuffer *value, const SpmdBuffer *attn_mask,
                       int64_t is_causal, double scale) {
  const char *kernel = "spmd_rt_attention";
  const AttentionShape a =
      checkAttention(kernel, query, key, value, attn_mask, output, logsumexp);
  std::vector<char> scratch;
  forEachHead(kernel, a, query, [&](auto tag, auto head) {
    using T = decltype(tag);
    scratch.resize(static_cast<size_t>(a.l * a.s) * sizeof(T));
    T *p = reinterpret_cast<T *>(scratch.data());
    headScores<T>(a, head.b, head.h, dataOf<T>(query) + head.qOffset(a),
                  dataOf<T>(key) + head.kOffset(a), maskData<T>(attn_mask),
                  is_causal != 0, T(scale), p);
    T *lse = dataOf<T>(logsumexp) + head.statsOffset(a);
    for (int64_t i = 0; i < a.l; ++i) {
      T *row = p + i * a.s;
      const T max = foldRow<T>(
          a.s, -std::numeric_limits<T>::infinity(),
          [row](auto lanes, int64_t j) { return lanes.load(row, j); }, MaxOp());
      if (max == -std::numeric_limits<T>::infinity()) {
        std::fill(row, row + a.s, T(0));
        lse[i] = T(0);
        continue;
      }
      T sum = T(0);
      for (int64_t j = 0; j < a.s; ++j) {
        row[j] = math::exp(row[j] - max);
        sum += row[j];
      }
      lse[i] = max + std::log(sum);
      const T reciprocal = T(1) / sum;
      for (int64_t j = 0; j < a.s; ++j)
        row[j] *= reciprocal;
    }
    gemm<T>(a.l, a.e, a.s, T(1), p, false, dataOf<T>(value) + head.kOffset(a),
            false, T(0), dataOf<T>(output) + head.qOffset(a));
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
  std::vector<char> scratch;
  forEachHead(kernel, a, query, [&](auto tag, auto head) {
    using T = decltype(tag);
    const size_t scores = static_cast<size_t>(a.l * a.s);
    scratch.resize(2 * scores * sizeof(T));
    T *p = reinterpret_cast<T *>(scratch.data());
    T *dp = p + scores;
    const int64_t qo = head.qOffset(a), ko = head.kOffset(a);
    const T *q = dataOf<T>(query) + qo, *k = dataOf<T>(key) + ko,
            *v = dataOf<T>(value) + ko, *o = dataOf<T>(out) + qo,
            *dout = dataOf<T>(grad_out) + qo,
            *lse = dataOf<T>(logsumexp) + head.statsOffset(a);
    headScores<T>(a, head.b, head.h, q, k, maskData<T>(attn_mask),
                  is_causal != 0, T(scale), p);
    for (int64_t i = 0; i < a.l; ++i)
      for (int64_t j = 0; j < a.s; ++j)
        p[i * a.s + j] = math::exp(p[i * a.s + j] - lse[i]);
    gemm<T>(a.s, a.e, a.l, T(1), p, true, dout, false, T(0),
            dataOf<T>(grad_value) + ko);
    gemm<T>(a.l, a.s, a.e, T(1), dout, false, v, true, T(0), dp);
    for (int64_t i = 0; i < a.l; ++i) {
      T d = T(0);
      for (int64_t e = 0; e < a.e; ++e)
        d += dout[i * a.e + e] * o[i * a.e + e];
      for (int64_t j = 0; j < a.s; ++j)
        dp[i * a.s + j] = p[i * a.s + j] * (dp[i * a.s + j] - d);
    }
    gemm<T>(a.l, a.e, a.s, T(scale), dp, false, k, false, T(0),
            dataOf<T>(grad_query) + qo);
    gemm<T>(a.s, a.e, a.l, T(scale), dp, true, q, false, T(0),
            dataOf<T>(grad_key) + ko);
  });
}

} // namespace spmd::rt::cpu
