//===- Common.cpp - dtype errors, shape checks, broadcast strides ---------===//

#include "Kernels.h"

#include <climits>

namespace spmd::rt {

void fatalDType(const char *kernel, int32_t dtype, const char *what) {
  spmd_rt_fatal("%s: unsupported dtype %s%s%s (%d)", kernel,
                spmd_rt_dtype_name(dtype), *what ? " for " : "", what, dtype);
}

std::string shapeStr(const SpmdBuffer *b) {
  std::string s = "[";
  for (int32_t d = 0; d < b->rank; ++d) {
    if (d)
      s += ", ";
    s += std::to_string(b->shape[d]);
  }
  return s + "]";
}

bool sameShape(const SpmdBuffer *a, const SpmdBuffer *b) {
  if (a->rank != b->rank)
    return false;
  for (int32_t d = 0; d < a->rank; ++d)
    if (a->shape[d] != b->shape[d])
      return false;
  return true;
}

void checkRank(const char *kernel, const char *name, const SpmdBuffer *b,
               int32_t rank) {
  if (b->rank != rank)
    spmd_rt_fatal("%s: %s must have rank %d, got shape %s", kernel, name, rank,
                  shapeStr(b).c_str());
}

void checkSameShape(const char *kernel, const char *nameA, const SpmdBuffer *a,
                    const char *nameB, const SpmdBuffer *b) {
  if (!sameShape(a, b))
    spmd_rt_fatal("%s: %s has shape %s but %s has shape %s", kernel, nameA,
                  shapeStr(a).c_str(), nameB, shapeStr(b).c_str());
}

void checkSameNumel(const char *kernel, const char *nameA, const SpmdBuffer *a,
                    const char *nameB, const SpmdBuffer *b) {
  if (a->numel != b->numel)
    spmd_rt_fatal("%s: %s %s and %s %s hold different numbers of elements",
                  kernel, nameA, shapeStr(a).c_str(), nameB,
                  shapeStr(b).c_str());
}

void checkDim(const char *kernel, const SpmdBuffer *b, int64_t dim) {
  if (dim < 0 || dim >= b->rank)
    spmd_rt_fatal("%s: dim %lld is out of range for shape %s", kernel,
                  static_cast<long long>(dim), shapeStr(b).c_str());
}

int64_t product(const int64_t *shape, int64_t begin, int64_t end) {
  int64_t p = 1;
  for (int64_t d = begin; d < end; ++d)
    p *= shape[d];
  return p;
}

void contiguousStrides(int32_t rank, const int64_t *shape, int64_t *strides) {
  int64_t stride = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
}

void broadcastStrides(const char *kernel, const SpmdBuffer *in, int32_t rank,
                      const int64_t *shape, int64_t *strides) {
  int32_t lead = rank - in->rank;
  bool ok = lead >= 0;
  int64_t inStrides[SPMD_MAX_RANK];
  contiguousStrides(in->rank, in->shape, inStrides);
  for (int32_t d = 0; d < rank && ok; ++d) {
    if (d < lead) {
      strides[d] = 0;
      continue;
    }
    int64_t size = in->shape[d - lead];
    if (size == shape[d])
      strides[d] = size == 1 ? 0 : inStrides[d - lead];
    else if (size == 1)
      strides[d] = 0;
    else
      ok = false;
  }
  if (!ok) {
    std::string target = "[";
    for (int32_t d = 0; d < rank; ++d)
      target += (d ? ", " : "") + std::to_string(shape[d]);
    spmd_rt_fatal("%s: cannot broadcast shape %s to %s]", kernel,
                  shapeStr(in).c_str(), target.c_str());
  }
}

std::array<int64_t, 4> checkMatmul(const char *kernel, const SpmdBuffer *out,
                                   const SpmdBuffer *a, const SpmdBuffer *b,
                                   int32_t rank, bool transA, bool transB) {
  checkRank(kernel, "mat1", a, rank);
  checkRank(kernel, "mat2", b, rank);
  checkRank(kernel, "out", out, rank);
  int32_t r = rank - 2;
  int64_t batch = rank == 3 ? a->shape[0] : 1;
  int64_t n = a->shape[r + transA], k = a->shape[r + !transA];
  int64_t m = b->shape[r + !transB], kb = b->shape[r + transB];
  bool ok = kb == k && out->shape[r] == n && out->shape[r + 1] == m;
  if (rank == 3)
    ok = ok && b->shape[0] == batch && out->shape[0] == batch;
  if (!ok)
    spmd_rt_fatal("%s: cannot multiply %s by %s into %s", kernel,
                  shapeStr(a).c_str(), shapeStr(b).c_str(),
                  shapeStr(out).c_str());
  if (n > INT_MAX || k > INT_MAX || m > INT_MAX)
    spmd_rt_fatal("%s: matrix dims exceed the BLAS integer range", kernel);
  return {batch, n, k, m};
}

} // namespace spmd::rt
