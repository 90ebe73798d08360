//===- Common.cpp - dtype errors, shape checks, broadcast strides ---------===//
//
// The definitions of Checks.h, shared by the CPU and the CUDA kernels.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "spmd/Runtime/Window.h"

#include <climits>
#include <initializer_list>

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

DimLayout layoutAround(const SpmdBuffer *b, int64_t dim) {
  return {product(b->shape, 0, dim), b->shape[dim],
          product(b->shape, dim + 1, b->rank)};
}

//===----------------------------------------------------------------------===//
// Kernel checks
//===----------------------------------------------------------------------===//

int64_t checkApproximate(const char *kernel, int64_t approximate) {
  if (approximate != 0 && approximate != 1)
    spmd_rt_fatal("%s: approximate must be 0 (none) or 1 (tanh), got %lld",
                  kernel, static_cast<long long>(approximate));
  return approximate;
}

int64_t checkRoundingMode(const char *kernel, int64_t roundingMode) {
  if (roundingMode != 0 && roundingMode != 1)
    spmd_rt_fatal("%s: rounding_mode must be 0 (trunc) or 1 (floor), got "
                  "%lld",
                  kernel, static_cast<long long>(roundingMode));
  return roundingMode;
}

int64_t clampVariant(const char *kernel, int64_t hasMin, int64_t hasMax) {
  if (!hasMin && !hasMax)
    spmd_rt_fatal("%s: neither min nor max is given", kernel);
  return (hasMin ? 0 : 1) + (hasMin && hasMax ? 2 : 0);
}

void checkPermute(const char *kernel, const SpmdBuffer *out,
                  const SpmdBuffer *self, int32_t n, const int64_t *dims) {
  if (n != self->rank || n != out->rank)
    spmd_rt_fatal("%s: %d dims for self %s and out %s", kernel, n,
                  shapeStr(self).c_str(), shapeStr(out).c_str());
  bool seen[SPMD_MAX_RANK] = {};
  for (int32_t k = 0; k < n; ++k) {
    if (dims[k] < 0 || dims[k] >= n || seen[dims[k]])
      spmd_rt_fatal("%s: dims is not a permutation of [0, %d)", kernel, n);
    seen[dims[k]] = true;
    if (out->shape[k] != self->shape[dims[k]])
      spmd_rt_fatal("%s: out %s is not self %s permuted", kernel,
                    shapeStr(out).c_str(), shapeStr(self).c_str());
  }
}

/// Whether `a` and `b` have the same rank and sizes outside `dim`.
static bool sameOutsideDim(const SpmdBuffer *a, const SpmdBuffer *b,
                           int64_t dim) {
  bool ok = a->rank == b->rank;
  for (int32_t d = 0; d < b->rank && ok; ++d)
    ok = d == dim || a->shape[d] == b->shape[d];
  return ok;
}

DimLayout checkCat(const char *kernel, const SpmdBuffer *out, int32_t n,
                   const SpmdBuffer *const *inputs, int64_t dim) {
  checkDim(kernel, out, dim);
  int64_t total = 0;
  for (int32_t k = 0; k < n; ++k) {
    const SpmdBuffer *in = inputs[k];
    if (catSkips(in))
      continue;
    if (!sameOutsideDim(in, out, dim))
      spmd_rt_fatal("%s: input %d of shape %s does not fit out %s along dim "
                    "%lld",
                    kernel, k, shapeStr(in).c_str(), shapeStr(out).c_str(),
                    static_cast<long long>(dim));
    total += in->shape[dim];
  }
  if (total != out->shape[dim])
    spmd_rt_fatal("%s: inputs sum to %lld along dim %lld, out %s", kernel,
                  static_cast<long long>(total), static_cast<long long>(dim),
                  shapeStr(out).c_str());
  return layoutAround(out, dim);
}

DimLayout checkSlice(const char *kernel, const SpmdBuffer *out,
                     const SpmdBuffer *self, int64_t dim, int64_t start,
                     int64_t step) {
  if (step < 1)
    spmd_rt_fatal("%s: step must be positive, got %lld", kernel,
                  static_cast<long long>(step));
  checkDim(kernel, self, dim);
  // A select: out is self without `dim`, one element of it.
  bool select = out->rank == self->rank - 1;
  bool ok = select || out->rank == self->rank;
  for (int32_t d = 0, o = 0; d < self->rank && ok; ++d) {
    if (d == dim && select)
      continue;
    ok = d == dim || out->shape[o] == self->shape[d];
    ++o;
  }
  const int64_t length = select ? 1 : out->shape[dim];
  ok = ok && start >= 0 &&
       (length == 0 || start + (length - 1) * step < self->shape[dim]);
  if (!ok)
    spmd_rt_fatal("%s: out %s is not a slice of self %s at %lld step %lld "
                  "along dim %lld",
                  kernel, shapeStr(out).c_str(), shapeStr(self).c_str(),
                  static_cast<long long>(start), static_cast<long long>(step),
                  static_cast<long long>(dim));
  DimLayout l = layoutAround(self, dim);
  l.size = length;
  return l;
}

DimLayout checkSliceScatter(const char *kernel, const SpmdBuffer *out,
                            const SpmdBuffer *self, const SpmdBuffer *src,
                            int64_t dim, int64_t start, int64_t step) {
  checkSameShape(kernel, "out", out, "self", self);
  checkSlice(kernel, src, self, dim, start, step);
  if (src->rank != self->rank)
    spmd_rt_fatal("%s: src %s and self %s differ in rank", kernel,
                  shapeStr(src).c_str(), shapeStr(self).c_str());
  DimLayout l = layoutAround(self, dim);
  l.size = src->shape[dim];
  return l;
}

void checkConstantPad(const char *kernel, const SpmdBuffer *out,
                      const SpmdBuffer *self, int32_t n, const int64_t *pad) {
  bool ok = n % 2 == 0 && n / 2 <= self->rank && out->rank == self->rank;
  for (int32_t d = 0; d < self->rank && ok; ++d) {
    int32_t k = self->rank - 1 - d; // pad pair k pads dim d
    int64_t size = self->shape[d];
    if (2 * k < n)
      size += pad[2 * k] + pad[2 * k + 1];
    ok = size >= 0 && out->shape[d] == size;
  }
  if (!ok)
    spmd_rt_fatal("%s: out %s is not self %s padded by %d amounts", kernel,
                  shapeStr(out).c_str(), shapeStr(self).c_str(), n);
}

DimLayout checkCumsum(const char *kernel, const SpmdBuffer *out,
                      const SpmdBuffer *self, int64_t dim) {
  checkDim(kernel, self, dim);
  checkSameShape(kernel, "out", out, "self", self);
  return layoutAround(self, dim);
}

void checkGather(const char *kernel, const SpmdBuffer *out,
                 const SpmdBuffer *self, int64_t dim, const SpmdBuffer *index) {
  checkDim(kernel, self, dim);
  checkSameShape(kernel, "out", out, "index", index);
  bool ok = index->rank == self->rank;
  for (int32_t d = 0; d < self->rank && ok; ++d)
    ok = d == dim || index->shape[d] <= self->shape[d];
  if (!ok)
    spmd_rt_fatal("%s: index %s does not fit self %s outside dim %lld", kernel,
                  shapeStr(index).c_str(), shapeStr(self).c_str(),
                  static_cast<long long>(dim));
}

void checkScatter(const char *kernel, const SpmdBuffer *out,
                  const SpmdBuffer *self, int64_t dim, const SpmdBuffer *index,
                  const SpmdBuffer *src) {
  checkDim(kernel, self, dim);
  checkSameShape(kernel, "out", out, "self", self);
  checkSameDTypes(kernel, "self", self, {"out", "src"}, {out, src});
  bool ok = index->rank == self->rank && src->rank == self->rank;
  for (int32_t d = 0; d < self->rank && ok; ++d)
    ok = index->shape[d] <= src->shape[d] &&
         (d == dim || index->shape[d] <= self->shape[d]);
  if (!ok)
    spmd_rt_fatal("%s: index %s does not fit src %s, or self %s outside dim "
                  "%lld",
                  kernel, shapeStr(index).c_str(), shapeStr(src).c_str(),
                  shapeStr(self).c_str(), static_cast<long long>(dim));
}

DimLayout checkTopk(const char *kernel, const SpmdBuffer *values,
                    const SpmdBuffer *indices, const SpmdBuffer *self,
                    int64_t k, int64_t dim) {
  checkDim(kernel, self, dim);
  if (k < 0 || k > self->shape[dim])
    spmd_rt_fatal("%s: k %lld is not in [0, %lld], the size of dim %lld of "
                  "self %s",
                  kernel, static_cast<long long>(k),
                  static_cast<long long>(self->shape[dim]),
                  static_cast<long long>(dim), shapeStr(self).c_str());
  checkSameShape(kernel, "values", values, "indices", indices);
  if (!sameOutsideDim(values, self, dim) || values->shape[dim] != k)
    spmd_rt_fatal("%s: values %s is not self %s with %lld at dim %lld", kernel,
                  shapeStr(values).c_str(), shapeStr(self).c_str(),
                  static_cast<long long>(k), static_cast<long long>(dim));
  checkSameDTypes(kernel, "self", self, {"values"}, {values});
  if (indices->dtype != SPMD_I64)
    spmd_rt_fatal("%s: indices must be i64", kernel);
  return layoutAround(self, dim);
}

/// The window entries of `spatial` dims into the last `spatial` slots of
/// g's 3-D arrays (`<kernel>: <name> needs <spatial> entries ...`).
static void setWindow(const char *kernel, const char *name, int64_t *to,
                      int32_t n, const int64_t *values, int32_t spatial,
                      int64_t least) {
  if (n != spatial)
    spmd_rt_fatal("%s: %s needs %d entries (one per spatial dim), got %d",
                  kernel, name, spatial, n);
  for (int32_t d = 0; d < spatial; ++d) {
    if (values[d] < least)
      spmd_rt_fatal("%s: %s entries must be at least %lld", kernel, name,
                    static_cast<long long>(least));
    to[3 - spatial + d] = values[d];
  }
}

/// Fatal unless `b` is [lead[0], ..., lead[nLead - 1], out[3 - spatial]...]
/// (`<kernel>: <name> <shape> is not the window output shape`).
static void checkWindowOutput(const char *kernel, const char *name,
                              const SpmdBuffer *b, const int64_t *lead,
                              int32_t nLead, const WindowGeometry &g,
                              int32_t spatial) {
  bool ok = b->rank == nLead + spatial;
  for (int32_t d = 0; d < nLead && ok; ++d)
    ok = b->shape[d] == lead[d];
  for (int32_t k = 0; k < spatial && ok; ++k)
    ok = b->shape[nLead + k] == g.out[3 - spatial + k];
  if (!ok)
    spmd_rt_fatal("%s: %s %s is not the window output shape", kernel, name,
                  shapeStr(b).c_str());
}

WindowGeometry checkConvolution(const char *kernel, const SpmdBuffer *out,
                                const SpmdBuffer *input,
                                const SpmdBuffer *weight,
                                const SpmdBuffer *bias, int32_t nStride,
                                const int64_t *stride, int32_t nPadding,
                                const int64_t *padding, int32_t nDilation,
                                const int64_t *dilation, int64_t groups) {
  const int32_t spatial = input->rank - 2;
  if (spatial < 1 || spatial > 3 || weight->rank != input->rank)
    spmd_rt_fatal("%s: input %s and weight %s are not [N, C, 1 to 3 spatial "
                  "dims] and [O, C / groups, kernel dims]",
                  kernel, shapeStr(input).c_str(), shapeStr(weight).c_str());
  WindowGeometry g;
  g.n = input->shape[0];
  g.channels = input->shape[1];
  g.outChannels = weight->shape[0];
  g.groups = groups;
  if (groups < 1 || g.channels % groups != 0 || g.outChannels % groups != 0 ||
      weight->shape[1] * groups != g.channels)
    spmd_rt_fatal("%s: weight %s does not fit input %s in %lld groups", kernel,
                  shapeStr(weight).c_str(), shapeStr(input).c_str(),
                  static_cast<long long>(groups));
  setWindow(kernel, "stride", g.stride, nStride, stride, spatial, 1);
  setWindow(kernel, "padding", g.pad, nPadding, padding, spatial, 0);
  setWindow(kernel, "dilation", g.dilation, nDilation, dilation, spatial, 1);
  for (int32_t d = 0; d < spatial; ++d) {
    const int32_t at = 3 - spatial + d;
    g.in[at] = input->shape[2 + d];
    g.k[at] = weight->shape[2 + d];
    g.out[at] = windowOutputSize(g.in[at], g.k[at], g.stride[at], g.pad[at],
                                 g.dilation[at], false);
    if (g.out[at] < 1)
      spmd_rt_fatal("%s: weight %s does not fit input %s", kernel,
                    shapeStr(weight).c_str(), shapeStr(input).c_str());
  }
  if (bias && (bias->rank != 1 || bias->shape[0] != g.outChannels))
    spmd_rt_fatal("%s: bias %s is not [%lld]", kernel, shapeStr(bias).c_str(),
                  static_cast<long long>(g.outChannels));
  const int64_t lead[] = {g.n, g.outChannels};
  checkWindowOutput(kernel, "out", out, lead, 2, g, spatial);
  checkSameDTypes(kernel, "input", input, {"weight", "bias", "out"},
                  {weight, bias, out});
  return g;
}

WindowGeometry checkPool2d(const char *kernel, const SpmdBuffer *pooled,
                           const SpmdBuffer *self, int32_t nKernelSize,
                           const int64_t *kernelSize, int32_t nStride,
                           const int64_t *stride, int32_t nPadding,
                           const int64_t *padding, int32_t nDilation,
                           const int64_t *dilation, int64_t ceilMode) {
  if (self->rank != 3 && self->rank != 4)
    spmd_rt_fatal("%s: self %s is not [C, H, W] or [N, C, H, W]", kernel,
                  shapeStr(self).c_str());
  WindowGeometry g;
  // Every leading dim is a plane: n planes of one channel.
  g.n = product(self->shape, 0, self->rank - 2);
  setWindow(kernel, "kernel_size", g.k, nKernelSize, kernelSize, 2, 1);
  if (nStride == 0)
    setWindow(kernel, "stride", g.stride, nKernelSize, kernelSize, 2, 1);
  else
    setWindow(kernel, "stride", g.stride, nStride, stride, 2, 1);
  setWindow(kernel, "padding", g.pad, nPadding, padding, 2, 0);
  setWindow(kernel, "dilation", g.dilation, nDilation, dilation, 2, 1);
  for (int32_t at = 1; at < 3; ++at) {
    g.in[at] = self->shape[self->rank - 3 + at];
    g.out[at] = windowOutputSize(g.in[at], g.k[at], g.stride[at], g.pad[at],
                                 g.dilation[at], ceilMode != 0);
    if (2 * g.pad[at] > g.k[at] || g.out[at] < 1)
      spmd_rt_fatal("%s: the window does not fit self %s", kernel,
                    shapeStr(self).c_str());
  }
  checkWindowOutput(kernel, "output", pooled, self->shape, self->rank - 2, g,
                    2);
  checkSameDTypes(kernel, "self", self, {"output"}, {pooled});
  return g;
}

WindowGeometry checkMaxPool2d(const char *kernel, const SpmdBuffer *output,
                              const SpmdBuffer *indices, const SpmdBuffer *self,
                              int32_t nKernelSize, const int64_t *kernelSize,
                              int32_t nStride, const int64_t *stride,
                              int32_t nPadding, const int64_t *padding,
                              int32_t nDilation, const int64_t *dilation,
                              int64_t ceilMode) {
  WindowGeometry g =
      checkPool2d(kernel, output, self, nKernelSize, kernelSize, nStride,
                  stride, nPadding, padding, nDilation, dilation, ceilMode);
  checkSameShape(kernel, "indices", indices, "output", output);
  if (indices->dtype != SPMD_I64)
    spmd_rt_fatal("%s: indices must be i64", kernel);
  return g;
}

WindowGeometry checkPooledPlanes(const char *kernel, const SpmdBuffer *pooled,
                                 const SpmdBuffer *self) {
  if ((self->rank != 3 && self->rank != 4) || pooled->rank != self->rank)
    spmd_rt_fatal("%s: self %s and output %s are not [C, H, W] or [N, C, H, "
                  "W] alike",
                  kernel, shapeStr(self).c_str(), shapeStr(pooled).c_str());
  WindowGeometry g;
  g.n = product(self->shape, 0, self->rank - 2);
  for (int32_t at = 1; at < 3; ++at) {
    g.in[at] = self->shape[self->rank - 3 + at];
    g.out[at] = pooled->shape[self->rank - 3 + at];
    if (g.out[at] < 1)
      spmd_rt_fatal("%s: output %s is empty", kernel, shapeStr(pooled).c_str());
  }
  checkWindowOutput(kernel, "output", pooled, self->shape, self->rank - 2, g,
                    2);
  checkSameDTypes(kernel, "self", self, {"output"}, {pooled});
  return g;
}

void checkIndex(const char *kernel, const SpmdBuffer *out,
                const SpmdBuffer *self, int32_t n,
                const SpmdBuffer *const *indices) {
  // out = broadcast(indices) + self's dims after the n indexed ones.
  int32_t batch = out->rank - (self->rank - n);
  bool ok = n >= 1 && n <= self->rank && batch >= 0;
  for (int32_t d = n; d < self->rank && ok; ++d)
    ok = out->shape[batch + d - n] == self->shape[d];
  for (int32_t k = 0; k < n && ok; ++k) {
    const SpmdBuffer *ix = indices[k];
    ok = ix->rank <= batch;
    for (int32_t d = 0; d < ix->rank && ok; ++d) {
      int64_t size = ix->shape[d], target = out->shape[batch - ix->rank + d];
      ok = size == target || size == 1;
    }
  }
  if (!ok)
    spmd_rt_fatal("%s: out %s is not self %s indexed by %d broadcast "
                  "indices",
                  kernel, shapeStr(out).c_str(), shapeStr(self).c_str(), n);
}

DimLayout checkLocalTake(const char *kernel, const SpmdBuffer *out,
                         const SpmdBuffer *self, int64_t dim) {
  checkDim(kernel, self, dim);
  if (!sameOutsideDim(out, self, dim))
    spmd_rt_fatal("%s: out %s and self %s differ outside dim %lld", kernel,
                  shapeStr(out).c_str(), shapeStr(self).c_str(),
                  static_cast<long long>(dim));
  return layoutAround(self, dim);
}

MatrixStack checkTriu(const char *kernel, const SpmdBuffer *out,
                      const SpmdBuffer *self) {
  if (self->rank < 2)
    spmd_rt_fatal("%s: self must have at least 2 dims, got %s", kernel,
                  shapeStr(self).c_str());
  checkSameShape(kernel, "out", out, "self", self);
  return {product(self->shape, 0, self->rank - 2), self->shape[self->rank - 2],
          self->shape[self->rank - 1]};
}

ReducedDims checkReduction(const char *kernel, const SpmdBuffer *out,
                           const SpmdBuffer *self, int32_t n,
                           const int64_t *dims) {
  const int32_t rank = self->rank;
  ReducedDims s = {};
  int32_t count = 0;
  if (n == 0) {
    if (!(out->rank == 0 && out->numel == 1)) {
      s.copy = true;
      return s;
    }
    for (int32_t d = 0; d < rank; ++d)
      s.reduce[d] = true;
    count = rank;
  }
  for (int32_t k = 0; k < n; ++k) {
    checkDim(kernel, self, dims[k]);
    if (s.reduce[dims[k]])
      spmd_rt_fatal("%s: dim %lld is listed twice", kernel,
                    static_cast<long long>(dims[k]));
    s.reduce[dims[k]] = true;
    ++count;
  }
  // out is self's shape with the reduced dims removed, or kept as 1.
  bool keepdim = out->rank == rank && count > 0;
  bool ok = keepdim || out->rank == rank - count;
  for (int32_t d = 0, o = 0; d < rank && ok; ++d) {
    if (s.reduce[d] && !keepdim)
      continue;
    ok = out->shape[o++] == (s.reduce[d] ? 1 : self->shape[d]);
  }
  if (!ok)
    spmd_rt_fatal("%s: out %s is not self %s reduced over %d dims", kernel,
                  shapeStr(out).c_str(), shapeStr(self).c_str(), count);
  s.count = 1;
  for (int32_t d = 0; d < rank; ++d)
    if (s.reduce[d])
      s.count *= self->shape[d];
  return s;
}

int32_t checkMatmulRank(const char *kernel, const SpmdBuffer *out) {
  if (out->rank != 2 && out->rank != 3)
    spmd_rt_fatal("%s: rank-%d out; expected 2 (mm) or 3 (bmm)", kernel,
                  out->rank);
  return out->rank;
}

DimLayout checkSoftmax(const char *kernel, const SpmdBuffer *out,
                       const SpmdBuffer *const *ins, size_t n, int64_t dim) {
  for (size_t k = 0; k < n; ++k)
    checkSameShape(kernel, "out", out, "input", ins[k]);
  // ATen treats a 0-D tensor as one element along dim 0.
  if (out->rank > 0 || dim != 0)
    checkDim(kernel, out, dim);
  if (out->rank == 0)
    return {1, 1, 1};
  return layoutAround(out, dim);
}

/// Checks `input` against normalized_rank and returns its [M, N] view.
static NormRows normRows(const char *kernel, const SpmdBuffer *input,
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
/// their gradients); nothing for a NULL `b`.
static void checkNormalizedShape(const char *kernel, const char *name,
                                 const SpmdBuffer *b, const SpmdBuffer *input,
                                 int64_t normalizedRank) {
  if (!b)
    return;
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
static void checkStatShape(const char *kernel, const char *name,
                           const SpmdBuffer *b, const SpmdBuffer *input,
                           int64_t normalizedRank) {
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

AttentionShape checkAttention(const char *kernel, const SpmdBuffer *query,
                              const SpmdBuffer *key, const SpmdBuffer *value,
                              const SpmdBuffer *mask, const SpmdBuffer *out,
                              const SpmdBuffer *logsumexp) {
  checkRank(kernel, "query", query, 4);
  checkRank(kernel, "key", key, 4);
  checkRank(kernel, "value", value, 4);
  const int64_t *q = query->shape, *k = key->shape, *v = value->shape;
  bool ok = true;
  for (int d : {0, 1, 3})
    ok = ok && k[d] == q[d] && v[d] == q[d];
  if (!ok || v[2] != k[2])
    spmd_rt_fatal("%s: query %s, key %s and value %s do not match", kernel,
                  shapeStr(query).c_str(), shapeStr(key).c_str(),
                  shapeStr(value).c_str());
  AttentionShape shape = {q[0], q[1], q[2], k[2], q[3], {0, 0, 0, 0}};
  if (mask) {
    const int64_t scores[4] = {q[0], q[1], q[2], k[2]};
    ok = mask->rank == 2 || mask->rank == 4;
    // Right-aligned; contiguous strides, 0 along a dim broadcast from 1.
    int64_t stride = 1;
    for (int32_t d = mask->rank - 1, t = 3; ok && d >= 0; --d, --t) {
      ok = mask->shape[d] == scores[t] || mask->shape[d] == 1;
      shape.maskStrides[t] = mask->shape[d] == 1 ? 0 : stride;
      stride *= mask->shape[d];
    }
    if (!ok)
      spmd_rt_fatal("%s: attn_mask %s does not broadcast to the scores "
                    "[B, H, L, S] of query %s and key %s",
                    kernel, shapeStr(mask).c_str(), shapeStr(query).c_str(),
                    shapeStr(key).c_str());
  }
  checkSameShape(kernel, "out", out, "query", query);
  if (logsumexp->rank != 3 || logsumexp->shape[0] != q[0] ||
      logsumexp->shape[1] != q[1] || logsumexp->shape[2] != q[2])
    spmd_rt_fatal("%s: logsumexp %s must be query's shape %s without its "
                  "last dim",
                  kernel, shapeStr(logsumexp).c_str(), shapeStr(query).c_str());
  checkSameDTypes(kernel, "query", query, {"key", "value", "attn_mask", "out"},
                  {key, value, mask, out});
  // ATen keeps a bf16 attention's logsumexp in f32.
  const int32_t lseType = query->dtype == SPMD_BF16 ? SPMD_F32 : query->dtype;
  if (logsumexp->dtype != lseType)
    spmd_rt_fatal("%s: logsumexp must be %s for a %s query", kernel,
                  spmd_rt_dtype_name(lseType),
                  spmd_rt_dtype_name(query->dtype));
  return shape;
}

AttentionShape
checkAttentionBackward(const char *kernel, const SpmdBuffer *grad_query,
                       const SpmdBuffer *grad_key, const SpmdBuffer *grad_value,
                       const SpmdBuffer *grad_out, const SpmdBuffer *query,
                       const SpmdBuffer *key, const SpmdBuffer *value,
                       const SpmdBuffer *out, const SpmdBuffer *logsumexp,
                       const SpmdBuffer *mask) {
  const AttentionShape a =
      checkAttention(kernel, query, key, value, mask, out, logsumexp);
  checkSameShape(kernel, "grad_out", grad_out, "query", query);
  checkSameShape(kernel, "grad_query", grad_query, "query", query);
  checkSameShape(kernel, "grad_key", grad_key, "key", key);
  checkSameShape(kernel, "grad_value", grad_value, "value", value);
  checkSameDTypes(kernel, "query", query,
                  {"grad_out", "grad_query", "grad_key", "grad_value"},
                  {grad_out, grad_query, grad_key, grad_value});
  return a;
}

void checkSameDTypes(const char *kernel, const char *refName,
                     const SpmdBuffer *ref,
                     std::initializer_list<const char *> names,
                     std::initializer_list<const SpmdBuffer *> buffers) {
  const char *const *name = names.begin();
  for (const SpmdBuffer *b : buffers) {
    if (b && b->dtype != ref->dtype)
      spmd_rt_fatal("%s: %s must be %s like %s", kernel, *name,
                    spmd_rt_dtype_name(ref->dtype), refName);
    ++name;
  }
}

NormRows checkLayerNorm(const char *kernel, const SpmdBuffer *output,
                        const SpmdBuffer *mean, const SpmdBuffer *rstd,
                        const SpmdBuffer *input, const SpmdBuffer *weight,
                        const SpmdBuffer *bias, int64_t normalizedRank) {
  NormRows rows = normRows(kernel, input, normalizedRank);
  checkSameShape(kernel, "output", output, "input", input);
  checkStatShape(kernel, "mean", mean, input, normalizedRank);
  checkStatShape(kernel, "rstd", rstd, input, normalizedRank);
  checkNormalizedShape(kernel, "weight", weight, input, normalizedRank);
  checkNormalizedShape(kernel, "bias", bias, input, normalizedRank);
  return rows;
}

NormRows
checkLayerNormBackward(const char *kernel, const SpmdBuffer *gradInput,
                       const SpmdBuffer *gradWeight, const SpmdBuffer *gradBias,
                       const SpmdBuffer *gradOut, const SpmdBuffer *input,
                       const SpmdBuffer *mean, const SpmdBuffer *rstd,
                       const SpmdBuffer *weight, int64_t normalizedRank) {
  NormRows rows = normRows(kernel, input, normalizedRank);
  checkSameShape(kernel, "grad_out", gradOut, "input", input);
  checkStatShape(kernel, "mean", mean, input, normalizedRank);
  checkStatShape(kernel, "rstd", rstd, input, normalizedRank);
  if (gradInput)
    checkSameShape(kernel, "grad_input", gradInput, "input", input);
  checkNormalizedShape(kernel, "weight", weight, input, normalizedRank);
  checkNormalizedShape(kernel, "grad_weight", gradWeight, input,
                       normalizedRank);
  checkNormalizedShape(kernel, "grad_bias", gradBias, input, normalizedRank);
  return rows;
}

void checkLayerNormStatDTypes(const char *kernel, const SpmdBuffer *output,
                              const SpmdBuffer *mean, const SpmdBuffer *rstd) {
  if (mean->dtype != output->dtype || rstd->dtype != output->dtype)
    spmd_rt_fatal("%s: mean and rstd must be %s like output", kernel,
                  spmd_rt_dtype_name(output->dtype));
}

const SpmdBuffer *layerNormGradTyped(const SpmdBuffer *gradInput,
                                     const SpmdBuffer *gradWeight,
                                     const SpmdBuffer *gradBias) {
  return gradInput ? gradInput : gradWeight ? gradWeight : gradBias;
}

void checkLayerNormGradDTypes(const char *kernel, const SpmdBuffer *gradInput,
                              const SpmdBuffer *gradWeight,
                              const SpmdBuffer *gradBias) {
  const SpmdBuffer *typed = layerNormGradTyped(gradInput, gradWeight, gradBias);
  for (const SpmdBuffer *result : {gradInput, gradWeight, gradBias})
    if (result && result->dtype != typed->dtype)
      spmd_rt_fatal("%s: the gradients must share one dtype", kernel);
}

/// Checks nll_loss's self, target, weight and reduction; returns the layout.
static NllShape checkNll(const char *kernel, const SpmdBuffer *self,
                         const SpmdBuffer *target, const SpmdBuffer *weight,
                         int64_t reduction) {
  if (reduction != kReductionNone && reduction != kReductionMean &&
      reduction != kReductionSum)
    spmd_rt_fatal("%s: reduction must be 0 (none), 1 (mean) or 2 (sum), got "
                  "%lld",
                  kernel, static_cast<long long>(reduction));
  if (self->rank != 1 && self->rank != 2)
    spmd_rt_fatal("%s: self must be [N, C] or [C], got %s", kernel,
                  shapeStr(self).c_str());
  const bool batched = self->rank == 2;
  const int64_t batch = batched ? self->shape[0] : 1;
  const int64_t classes = self->shape[self->rank - 1];
  if (target->rank != self->rank - 1 || (batched && target->shape[0] != batch))
    spmd_rt_fatal("%s: target %s does not match self %s", kernel,
                  shapeStr(target).c_str(), shapeStr(self).c_str());
  if (weight && weight->numel != classes)
    spmd_rt_fatal("%s: weight %s does not have %lld elements (the classes)",
                  kernel, shapeStr(weight).c_str(),
                  static_cast<long long>(classes));
  return {batch, classes, reduction == kReductionNone && batched};
}

static void checkScalar(const char *kernel, const char *name,
                        const SpmdBuffer *b) {
  if (b->numel != 1 || b->rank > 1)
    spmd_rt_fatal("%s: %s must hold a single element, got %s", kernel, name,
                  shapeStr(b).c_str());
}

/// Fatal unless `b` is [batch] (`<kernel>: <name> <shape> must be [<batch>]
/// for reduction none`).
static void checkPerSample(const char *kernel, const char *name,
                           const SpmdBuffer *b, int64_t batch) {
  if (b->rank != 1 || b->shape[0] != batch)
    spmd_rt_fatal("%s: %s %s must be [%lld] for reduction none", kernel, name,
                  shapeStr(b).c_str(), static_cast<long long>(batch));
}

NllClasses nllClasses(const char *kernel, const NllShape &s,
                      const int64_t *rows) {
  if (!rows)
    return {0, s.classes, s.classes};
  if (rows[0] < 0 || rows[1] < 0 || rows[1] > s.classes ||
      rows[0] + rows[1] > rows[2])
    spmd_rt_fatal("%s: classes [%lld, %lld) of %lld held in a self of %lld "
                  "classes",
                  kernel, static_cast<long long>(rows[0]),
                  static_cast<long long>(rows[0] + rows[1]),
                  static_cast<long long>(rows[2]),
                  static_cast<long long>(s.classes));
  return {rows[0], rows[1], rows[2]};
}

NllShape checkNllLoss(const char *kernel, const SpmdBuffer *output,
                      const SpmdBuffer *totalWeight, const SpmdBuffer *self,
                      const SpmdBuffer *target, const SpmdBuffer *weight,
                      int64_t reduction) {
  NllShape s = checkNll(kernel, self, target, weight, reduction);
  checkScalar(kernel, "total_weight", totalWeight);
  if (s.perSample)
    checkPerSample(kernel, "output", output, s.batch);
  else if (output->rank != 0)
    spmd_rt_fatal("%s: output %s must be 0-D", kernel,
                  shapeStr(output).c_str());
  return s;
}

void checkTotalWeightDType(const char *kernel, const SpmdBuffer *output,
                           const SpmdBuffer *totalWeight) {
  if (totalWeight->dtype != output->dtype)
    spmd_rt_fatal("%s: total_weight must be %s like output", kernel,
                  spmd_rt_dtype_name(output->dtype));
}

NllShape checkNllLossBackward(const char *kernel, const SpmdBuffer *out,
                              const SpmdBuffer *gradOutput,
                              const SpmdBuffer *self, const SpmdBuffer *target,
                              const SpmdBuffer *weight,
                              const SpmdBuffer *totalWeight,
                              int64_t reduction) {
  NllShape s = checkNll(kernel, self, target, weight, reduction);
  checkSameShape(kernel, "out", out, "self", self);
  checkScalar(kernel, "total_weight", totalWeight);
  if (s.perSample)
    checkPerSample(kernel, "grad_output", gradOutput, s.batch);
  else
    checkScalar(kernel, "grad_output", gradOutput);
  return s;
}

EmbeddingRows embeddingRows(const SpmdBuffer *table, const int64_t *held) {
  if (held)
    return {held[0], held[1], held[2]};
  const int64_t rows = table->rank == 2 ? table->shape[0] : 0;
  return {0, rows, rows};
}

/// Checks that `rows` [indices..., D] matches `indices` and returns D.
static int64_t checkRows(const char *kernel, const char *name,
                         const SpmdBuffer *rows, const SpmdBuffer *indices,
                         int64_t d) {
  bool ok = rows->rank == indices->rank + 1 && rows->shape[indices->rank] == d;
  for (int32_t k = 0; k < indices->rank && ok; ++k)
    ok = rows->shape[k] == indices->shape[k];
  if (!ok)
    spmd_rt_fatal("%s: %s %s is not indices %s + [%lld]", kernel, name,
                  shapeStr(rows).c_str(), shapeStr(indices).c_str(),
                  static_cast<long long>(d));
  return d;
}

/// Checks an embedding table `table` (named `name`, with its article) that
/// holds rows.count rows, and `rowsBuffer` (named `rowsName`): indices'
/// shape + [D], D the table's columns. Returns D.
static int64_t checkTable(const char *kernel, const char *article,
                          const char *name, const SpmdBuffer *table,
                          const char *rowsName, const SpmdBuffer *rowsBuffer,
                          const SpmdBuffer *indices, EmbeddingRows rows) {
  checkRank(kernel, name, table, 2);
  if (rows.count > table->shape[0])
    spmd_rt_fatal("%s: %lld rows held in %s %s of %lld rows", kernel,
                  static_cast<long long>(rows.count), article, name,
                  static_cast<long long>(table->shape[0]));
  return checkRows(kernel, rowsName, rowsBuffer, indices, table->shape[1]);
}

int64_t checkEmbedding(const char *kernel, const SpmdBuffer *out,
                       const SpmdBuffer *weight, const SpmdBuffer *indices,
                       EmbeddingRows rows) {
  return checkTable(kernel, "a", "weight", weight, "out", out, indices, rows);
}

int64_t checkEmbeddingBackward(const char *kernel, const SpmdBuffer *out,
                               const SpmdBuffer *gradOutput,
                               const SpmdBuffer *indices, EmbeddingRows rows) {
  return checkTable(kernel, "an", "out", out, "grad_output", gradOutput,
                    indices, rows);
}

void checkNativeDropout(const char *kernel, const SpmdBuffer *output,
                        const SpmdBuffer *mask, const SpmdBuffer *input) {
  checkSameShape(kernel, "output", output, "input", input);
  checkSameShape(kernel, "mask", mask, "input", input);
  if (mask->dtype != SPMD_I1)
    fatalDType(kernel, mask->dtype, "mask (expected i1)");
}

int64_t checkGlobalOffset(const char *kernel, const SpmdBuffer *local,
                          const int64_t *globalShape,
                          const int64_t *globalOffset, int64_t *globalStrides) {
  contiguousStrides(local->rank, globalShape, globalStrides);
  int64_t base = 0;
  for (int32_t d = 0; d < local->rank; ++d) {
    // The local piece may run past the end: an uneven shard padded to the
    // largest piece (an empty one starts at the end).
    if (globalOffset[d] < 0 || globalOffset[d] > globalShape[d])
      spmd_rt_fatal("%s: local %s at offset %lld of dim %d is outside the "
                    "global size %lld",
                    kernel, shapeStr(local).c_str(),
                    static_cast<long long>(globalOffset[d]), d,
                    static_cast<long long>(globalShape[d]));
    base += globalOffset[d] * globalStrides[d];
  }
  return base;
}

} // namespace spmd::rt
