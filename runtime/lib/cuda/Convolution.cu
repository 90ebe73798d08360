//===- Convolution.cu - convolution on cuDNN, pooling ---------------------===//
//
// cpu/Convolution.cpp's kernels on the device.
//
// Convolutions run on cuDNN's convolution API (cudnnConvolutionForward,
// cudnnConvolutionBackwardData and cudnnConvolutionBackwardFilter; ATen's
// convolution is cuDNN's CUDNN_CROSS_CORRELATION mode), on the compute
// stream, with 4-D descriptors for one and two spatial dims and 5-D ones for
// three, groups as cuDNN's group count. f32 runs with FMA math only (no
// TF32, as PyTorch with allow_tf32 off: the CPU's fp32 results within the
// products' tolerance), f64 in f64, bf16 on tensor cores with f32
// accumulation. The algorithm of each shape comes from cuDNN's heuristics
// (the `_v7` queries) once and is cached: the fastest whose workspace is at
// most kMaxWorkspace bytes, as PyTorch picks by default (benchmark and
// deterministic off), so the last bits of a weight gradient may vary
// between runs.
// The bias is added by a kernel of its own (one add per output element, in
// the compute type). cuDNN 9 keeps this API (its "legacy" convolution
// entry points, in libcudnn_cnn) next to the graph API.
//
// Pooling is CUDA kernels, one thread per output element (forward) or per
// input element (average pooling's backward), reading the windows
// Pooling.h computes for both backends, so forward results and the average
// pooling's gradient are the CPU's bit for bit in f32 and f64 (the same
// additions in the same order). max pooling's backward adds each gradient
// at its index with atomics (in f32 for bf16), so where windows overlap the
// last bits of a sum may vary between runs, as in ATen's CUDA kernel.
//
//===----------------------------------------------------------------------===//

#include "../Pooling.h"
#include "Cuda.h"

#include <cudnn.h>

#include <climits>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

//===----------------------------------------------------------------------===//
// cuDNN
//===----------------------------------------------------------------------===//

void checkCudnn(cudnnStatus_t rc, const char *what) {
  if (rc != CUDNN_STATUS_SUCCESS)
    spmd_rt_fatal("%s: cuDNN error %s", what, cudnnGetErrorString(rc));
}

/// The process's cuDNN handle, bound to the compute stream. Never destroyed
/// (as the cuBLAS handle: cudnnDestroy at exit may run after the CUDA
/// runtime unloaded).
cudnnHandle_t cudnn() {
  static cudnnHandle_t h = [] {
    cudnnHandle_t created = nullptr;
    checkCudnn(cudnnCreate(&created), "cudnnCreate");
    checkCudnn(cudnnSetStream(created, computeStream()), "cudnnSetStream");
    return created;
  }();
  return h;
}

/// The most workspace (bytes) an algorithm may ask for.
constexpr size_t kMaxWorkspace = size_t(1) << 30;

/// cuDNN's types for T: storage, compute type, math mode, and the type of
/// alpha and beta.
template <typename T> struct CudnnTypes;
template <> struct CudnnTypes<float> {
  static constexpr cudnnDataType_t data = CUDNN_DATA_FLOAT;
  static constexpr cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  static constexpr cudnnMathType_t math = CUDNN_FMA_MATH;
  using Scale = float;
};
template <> struct CudnnTypes<double> {
  static constexpr cudnnDataType_t data = CUDNN_DATA_DOUBLE;
  static constexpr cudnnDataType_t compute = CUDNN_DATA_DOUBLE;
  static constexpr cudnnMathType_t math = CUDNN_FMA_MATH;
  using Scale = double;
};
template <> struct CudnnTypes<BFloat16> {
  static constexpr cudnnDataType_t data = CUDNN_DATA_BFLOAT16;
  static constexpr cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  static constexpr cudnnMathType_t math = CUDNN_TENSOR_OP_MATH;
  using Scale = float;
};

/// An algorithm and the math mode and workspace (bytes) it runs with.
template <typename Algo> struct Choice {
  Algo algo;
  cudnnMathType_t math;
  size_t workspace;
};

/// The heuristics' pick among `results` (fastest first): the first that
/// succeeded within kMaxWorkspace, skipping tensor-core results under FMA
/// math (TF32 for f32). Null when none qualifies. As PyTorch's default
/// (cudnn.deterministic off), the pick may add in an order that varies
/// between runs (weight gradients split over the batch).
template <typename Perf>
const Perf *pick(const std::vector<Perf> &results, int count,
                 cudnnMathType_t math) {
  for (int i = 0; i < count; ++i) {
    const Perf &p = results[i];
    if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= kMaxWorkspace &&
        (math != CUDNN_FMA_MATH || p.mathType == CUDNN_FMA_MATH))
      return &p;
  }
  return nullptr;
}

/// The descriptors of one convolution (a dtype, geometry and group count)
/// and the algorithms chosen for it, made on first use and kept for the
/// life of the process.
struct ConvPlan {
  cudnnTensorDescriptor_t input = nullptr, output = nullptr;
  cudnnFilterDescriptor_t weight = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  std::optional<Choice<cudnnConvolutionFwdAlgo_t>> forward;
  std::optional<Choice<cudnnConvolutionBwdDataAlgo_t>> data;
  std::optional<Choice<cudnnConvolutionBwdFilterAlgo_t>> filter;
};

/// `v` as an int for a cuDNN descriptor.
int toInt(int64_t v, const char *kernel) {
  if (v > INT_MAX)
    spmd_rt_fatal("%s: size %lld is too large for cuDNN", kernel,
                  static_cast<long long>(v));
  return static_cast<int>(v);
}

/// Packed [dims...] tensor descriptor.
void setTensor(cudnnTensorDescriptor_t desc, cudnnDataType_t type,
               const std::vector<int> &dims, const char *kernel) {
  std::vector<int> strides(dims.size());
  int64_t stride = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    strides[d] = toInt(stride, kernel);
    stride *= dims[d];
  }
  checkCudnn(cudnnSetTensorNdDescriptor(desc, type, int(dims.size()),
                                        dims.data(), strides.data()),
             kernel);
}

/// The plan of geometry `g` (checkConvolution) in T, made on first use.
template <typename T>
ConvPlan &convPlan(const WindowGeometry &g, const char *kernel) {
  using Types = CudnnTypes<T>;
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, ConvPlan> plans;
  std::vector<int64_t> key = {g.n, g.channels, g.outChannels, g.groups};
  for (int d = 0; d < 3; ++d)
    key.insert(key.end(),
               {g.in[d], g.k[d], g.stride[d], g.pad[d], g.dilation[d]});
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = plans.try_emplace(key);
  ConvPlan &p = it->second;
  if (!fresh)
    return p;
  // One and two spatial dims as 2-D (cuDNN's 4-D descriptors, which every
  // algorithm takes), three as 3-D.
  const int first =
      g.in[0] == 1 && g.k[0] == 1 && g.pad[0] == 0 && g.stride[0] == 1 ? 1 : 0;
  std::vector<int> in = {toInt(g.n, kernel), toInt(g.channels, kernel)};
  std::vector<int> out = {toInt(g.n, kernel), toInt(g.outChannels, kernel)};
  std::vector<int> w = {toInt(g.outChannels, kernel),
                        toInt(g.channels / g.groups, kernel)};
  std::vector<int> pad, stride, dilation;
  for (int d = first; d < 3; ++d) {
    in.push_back(toInt(g.in[d], kernel));
    out.push_back(toInt(g.out[d], kernel));
    w.push_back(toInt(g.k[d], kernel));
    pad.push_back(toInt(g.pad[d], kernel));
    stride.push_back(toInt(g.stride[d], kernel));
    dilation.push_back(toInt(g.dilation[d], kernel));
  }
  checkCudnn(cudnnCreateTensorDescriptor(&p.input), kernel);
  checkCudnn(cudnnCreateTensorDescriptor(&p.output), kernel);
  checkCudnn(cudnnCreateFilterDescriptor(&p.weight), kernel);
  checkCudnn(cudnnCreateConvolutionDescriptor(&p.conv), kernel);
  setTensor(p.input, Types::data, in, kernel);
  setTensor(p.output, Types::data, out, kernel);
  checkCudnn(cudnnSetFilterNdDescriptor(p.weight, Types::data,
                                        CUDNN_TENSOR_NCHW, int(w.size()),
                                        w.data()),
             kernel);
  checkCudnn(cudnnSetConvolutionNdDescriptor(
                 p.conv, int(pad.size()), pad.data(), stride.data(),
                 dilation.data(), CUDNN_CROSS_CORRELATION, Types::compute),
             kernel);
  checkCudnn(cudnnSetConvolutionGroupCount(p.conv, toInt(g.groups, kernel)),
             kernel);
  p.math = Types::math;
  checkCudnn(cudnnSetConvolutionMathType(p.conv, p.math), kernel);
  // cuDNN's output shape must be ATen's (checkConvolution's).
  std::vector<int> cudnnOut(out.size());
  checkCudnn(cudnnGetConvolutionNdForwardOutputDim(
                 p.conv, p.input, p.weight, int(out.size()), cudnnOut.data()),
             kernel);
  if (cudnnOut != out)
    spmd_rt_fatal("%s: cuDNN's output shape differs from ATen's", kernel);
  return p;
}

/// Runs `run(workspace, bytes)` with algorithm `c`'s math mode set on the
/// plan's descriptor (the three directions may pick different modes).
template <typename Algo, typename Run>
void runWith(ConvPlan &p, const Choice<Algo> &c, const char *kernel,
             Run &&run) {
  checkCudnn(cudnnSetConvolutionMathType(p.conv, c.math), kernel);
  Scratch workspace(static_cast<int64_t>(c.workspace), kernel);
  checkCudnn(run(workspace.data(), c.workspace), kernel);
}

// cuDNN's queries for one direction of a convolution: the forward product
// (input, weight -> output), the input gradient and the weight gradient.
// `any` is the algorithm that takes every convolution.

struct Forward {
  using Algo = cudnnConvolutionFwdAlgo_t;
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr Algo any = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  static cudnnStatus_t count(int *n) {
    return cudnnGetConvolutionForwardAlgorithmMaxCount(cudnn(), n);
  }
  static cudnnStatus_t query(const ConvPlan &p, int max, int *n, Perf *r) {
    return cudnnGetConvolutionForwardAlgorithm_v7(cudnn(), p.input, p.weight,
                                                  p.conv, p.output, max, n, r);
  }
  static cudnnStatus_t workspace(const ConvPlan &p, Algo a, size_t *bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(cudnn(), p.input, p.weight,
                                                   p.conv, p.output, a, bytes);
  }
};

struct InputGradient {
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr Algo any = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  static cudnnStatus_t count(int *n) {
    return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnn(), n);
  }
  static cudnnStatus_t query(const ConvPlan &p, int max, int *n, Perf *r) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(
        cudnn(), p.weight, p.output, p.conv, p.input, max, n, r);
  }
  static cudnnStatus_t workspace(const ConvPlan &p, Algo a, size_t *bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(
        cudnn(), p.weight, p.output, p.conv, p.input, a, bytes);
  }
};

struct WeightGradient {
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr Algo any = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
  static cudnnStatus_t count(int *n) {
    return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnn(), n);
  }
  static cudnnStatus_t query(const ConvPlan &p, int max, int *n, Perf *r) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        cudnn(), p.input, p.output, p.conv, p.weight, max, n, r);
  }
  static cudnnStatus_t workspace(const ConvPlan &p, Algo a, size_t *bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(
        cudnn(), p.input, p.output, p.conv, p.weight, a, bytes);
  }
};

/// The algorithm of direction D for `p`, chosen on first use and kept in
/// `slot`: the heuristics' pick, else D::any.
template <typename D>
const Choice<typename D::Algo> &
choose(ConvPlan &p, std::optional<Choice<typename D::Algo>> &slot,
       const char *kernel) {
  if (slot)
    return *slot;
  int max = 0, count = 0;
  checkCudnn(D::count(&max), kernel);
  std::vector<typename D::Perf> results(max);
  checkCudnn(D::query(p, max, &count, results.data()), kernel);
  if (const auto *best = pick(results, count, p.math)) {
    slot = Choice<typename D::Algo>{best->algo, best->mathType, best->memory};
  } else {
    Choice<typename D::Algo> any{D::any, p.math, 0};
    checkCudnn(D::workspace(p, any.algo, &any.workspace), kernel);
    slot = any;
  }
  return *slot;
}

/// out[n, c, ...] += bias[c] over `planes` (n, c) planes of `plane`
/// elements, in the compute type.
template <typename T>
__global__ void addBiasKernel(T *out, const T *bias, int64_t planes,
                              int64_t channels, int64_t plane) {
  const int64_t n = planes * plane;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] =
        toStorage<T>(toOpMath(out[i]) + toOpMath(bias[(i / plane) % channels]));
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// The lowest value of T's compute type: max pooling's start.
template <typename V> __device__ V lowestOf() {
  if constexpr (std::numeric_limits<V>::has_infinity)
    return -std::numeric_limits<V>::infinity();
  else
    return std::numeric_limits<V>::lowest();
}

/// max_pool2d_with_indices: output i's maximum over its taps (the first
/// in-plane tap, then any larger element or NaN) and its index in the plane.
template <typename T>
__global__ void maxPoolKernel(T *out, int64_t *indices, const T *x, int64_t n,
                              WindowGeometry g) {
  using V = OpMathT<T>;
  const int64_t width = g.in[2], outPlane = g.out[1] * g.out[2];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / outPlane, k = i % outPlane;
    const PoolWindow w = maxPoolWindow(g, k / g.out[2], k % g.out[2]);
    const T *plane = x + p * g.in[1] * width;
    V best = lowestOf<V>();
    int64_t at = w.h0 * width + w.w0;
    for (int64_t h = w.h0; h < w.h1; h += g.dilation[1])
      for (int64_t c = w.w0; c < w.w1; c += g.dilation[2]) {
        const V v = toOpMath(plane[h * width + c]);
        if (v > best || isNan(v)) {
          best = v;
          at = h * width + c;
        }
      }
    out[i] = toStorage<T>(best);
    indices[i] = at;
  }
}

/// The type max pooling's backward adds in: float for bf16, else T.
template <typename T>
using PoolAccT = std::conditional_t<std::is_same_v<T, BFloat16>, float, T>;

/// Adds `v` to `*to` atomically (the integers as two's complement).
template <typename A> __device__ void atomicAddTo(A *to, A v) {
  if constexpr (std::is_same_v<A, int64_t>)
    atomicAdd(reinterpret_cast<unsigned long long *>(to),
              static_cast<unsigned long long>(v));
  else
    atomicAdd(to, v);
}

/// max_pool2d_with_indices_backward: dx[p, indices[i]] += dy[i], for n
/// gradient elements of planes of `outPlane`; an index outside the plane
/// of `inPlane` elements is recorded and skipped.
template <typename T, typename A>
__global__ void maxPoolBackwardKernel(A *dx, const T *dy,
                                      const int64_t *indices, int64_t n,
                                      int64_t inPlane, int64_t outPlane,
                                      DeviceError *errors, int kernel) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t at = indices[i];
    if (at < 0 || at >= inPlane) {
      raiseError(errors, DeviceErrorKind::PlaneIndex, kernel, at, inPlane);
      continue;
    }
    atomicAddTo(dx + (i / outPlane) * inPlane + at,
                static_cast<A>(toOpMath(dy[i])));
  }
}

/// out[i] = T(acc[i]) for n elements.
template <typename T, typename A>
__global__ void storeKernel(T *out, const A *acc, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = toStorage<T>(acc[i]);
}

/// Average pooling (avgPoolWindow's windows): out i = its window's sum in
/// the compute type / the divisor, 0 for an empty window.
template <typename T>
__global__ void avgPoolKernel(T *out, const T *x, int64_t n, WindowGeometry g,
                              bool adaptive, bool countPad,
                              int64_t divisorOverride) {
  using V = OpMathT<T>;
  const int64_t width = g.in[2], outPlane = g.out[1] * g.out[2];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / outPlane, k = i % outPlane;
    const PoolWindow w = avgPoolWindow(g, adaptive, countPad, divisorOverride,
                                       k / g.out[2], k % g.out[2]);
    const T *plane = x + p * g.in[1] * width;
    V sum = 0;
    for (int64_t h = w.h0; h < w.h1; ++h)
      for (int64_t c = w.w0; c < w.w1; ++c)
        sum += toOpMath(plane[h * width + c]);
    out[i] = w.empty() ? T{} : toStorage<T>(sum / V(w.divisor));
  }
}

/// Its gradient, one thread per input element: the shares dy / divisor of
/// the windows holding it, added in output order (the CPU's order).
template <typename T>
__global__ void avgPoolBackwardKernel(T *dx, const T *dy, int64_t n,
                                      WindowGeometry g, bool adaptive,
                                      bool countPad, int64_t divisorOverride) {
  using V = OpMathT<T>;
  const int64_t width = g.in[2], inPlane = g.in[1] * width;
  const int64_t outPlane = g.out[1] * g.out[2];
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = i / inPlane, h = (i % inPlane) / width, c = i % width;
    int64_t oh0, oh1, ow0, ow1;
    avgPoolSources(g, adaptive, 1, h, oh0, oh1);
    avgPoolSources(g, adaptive, 2, c, ow0, ow1);
    V sum = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const PoolWindow w =
            avgPoolWindow(g, adaptive, countPad, divisorOverride, oh, ow);
        if (w.contains(h, c))
          sum += toOpMath(dy[p * outPlane + oh * g.out[2] + ow]) / V(w.divisor);
      }
    dx[i] = toStorage<T>(sum);
  }
}

void avgPool(const char *kernel, SpmdBuffer *out, const SpmdBuffer *self,
             const WindowGeometry &g, bool adaptive, bool countPad,
             int64_t divisorOverride) {
  dispatchDevice<kFloat | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    if (out->numel == 0)
      return;
    avgPoolKernel<T><<<gridFor(out->numel), kBlock, 0, computeStream()>>>(
        dataOf<T>(out), dataOf<T>(self), out->numel, g, adaptive, countPad,
        divisorOverride);
    checkLaunch(kernel);
  });
}

void avgPoolBackward(const char *kernel, SpmdBuffer *out,
                     const SpmdBuffer *grad, const WindowGeometry &g,
                     bool adaptive, bool countPad, int64_t divisorOverride) {
  dispatchDevice<kFloat | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    if (out->numel == 0)
      return;
    avgPoolBackwardKernel<T>
        <<<gridFor(out->numel), kBlock, 0, computeStream()>>>(
            dataOf<T>(out), dataOf<T>(grad), out->numel, g, adaptive, countPad,
            divisorOverride);
    checkLaunch(kernel);
  });
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

void spmd_rt_convolution(SpmdBuffer *out, const SpmdBuffer *input,
                         const SpmdBuffer *weight, const SpmdBuffer *bias,
                         int32_t n_stride, const int64_t *stride,
                         int32_t n_padding, const int64_t *padding,
                         int32_t n_dilation, const int64_t *dilation,
                         int64_t groups) {
  const char *kernel = "spmd_rt_convolution";
  const WindowGeometry g =
      checkConvolution(kernel, out, input, weight, bias, n_stride, stride,
                       n_padding, padding, n_dilation, dilation, groups);
  dispatchDevice<kFloat | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    using Scale = typename CudnnTypes<T>::Scale;
    if (out->numel == 0)
      return;
    if (input->numel == 0 || weight->numel == 0) {
      // No channels: the bias alone.
      check(cudaMemsetAsync(out->data, 0, out->numel * sizeof(T),
                            computeStream()),
            kernel);
    } else {
      ConvPlan &p = convPlan<T>(g, kernel);
      const auto &forward = choose<Forward>(p, p.forward, kernel);
      const Scale one = 1, zero = 0;
      runWith(p, forward, kernel, [&](void *ws, size_t bytes) {
        return cudnnConvolutionForward(
            cudnn(), &one, p.input, input->data, p.weight, weight->data, p.conv,
            forward.algo, ws, bytes, &zero, p.output, out->data);
      });
    }
    if (bias)
      addBiasKernel<T><<<gridFor(out->numel), kBlock, 0, computeStream()>>>(
          dataOf<T>(out), dataOf<T>(bias), g.n * g.outChannels, g.outChannels,
          g.outPlane());
    checkLaunch(kernel);
  });
}

void spmd_rt_convolution_backward(SpmdBuffer *grad_input,
                                  SpmdBuffer *grad_weight,
                                  const SpmdBuffer *grad_output,
                                  const SpmdBuffer *input,
                                  const SpmdBuffer *weight, int32_t n_stride,
                                  const int64_t *stride, int32_t n_padding,
                                  const int64_t *padding, int32_t n_dilation,
                                  const int64_t *dilation, int64_t groups) {
  const char *kernel = "spmd_rt_convolution_backward";
  const WindowGeometry g = checkConvolution(
      kernel, grad_output, input, weight, nullptr, n_stride, stride, n_padding,
      padding, n_dilation, dilation, groups);
  if (grad_input)
    checkSameShape(kernel, "grad_input", grad_input, "input", input);
  if (grad_weight)
    checkSameShape(kernel, "grad_weight", grad_weight, "weight", weight);
  checkSameDTypes(kernel, "input", input, {"grad_input", "grad_weight"},
                  {grad_input, grad_weight});
  dispatchDevice<kFloat | kBFloat16>(input->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    using Scale = typename CudnnTypes<T>::Scale;
    if (grad_output->numel == 0 || input->numel == 0 || weight->numel == 0) {
      // Nothing to sum: both gradients are zero.
      for (SpmdBuffer *b : {grad_input, grad_weight})
        if (b)
          check(cudaMemsetAsync(b->data, 0, b->numel * sizeof(T),
                                computeStream()),
                kernel);
      return;
    }
    ConvPlan &p = convPlan<T>(g, kernel);
    const Scale one = 1, zero = 0;
    if (grad_input) {
      const auto &data = choose<InputGradient>(p, p.data, kernel);
      runWith(p, data, kernel, [&](void *ws, size_t bytes) {
        return cudnnConvolutionBackwardData(
            cudnn(), &one, p.weight, weight->data, p.output, grad_output->data,
            p.conv, data.algo, ws, bytes, &zero, p.input, grad_input->data);
      });
    }
    if (grad_weight) {
      const auto &filter = choose<WeightGradient>(p, p.filter, kernel);
      runWith(p, filter, kernel, [&](void *ws, size_t bytes) {
        return cudnnConvolutionBackwardFilter(
            cudnn(), &one, p.input, input->data, p.output, grad_output->data,
            p.conv, filter.algo, ws, bytes, &zero, p.weight, grad_weight->data);
      });
    }
  });
}

void spmd_rt_max_pool2d_with_indices(
    SpmdBuffer *output, SpmdBuffer *indices, const SpmdBuffer *self,
    int32_t n_kernel_size, const int64_t *kernel_size, int32_t n_stride,
    const int64_t *stride, int32_t n_padding, const int64_t *padding,
    int32_t n_dilation, const int64_t *dilation, int64_t ceil_mode) {
  const char *kernel = "spmd_rt_max_pool2d_with_indices";
  const WindowGeometry g = checkMaxPool2d(
      kernel, output, indices, self, n_kernel_size, kernel_size, n_stride,
      stride, n_padding, padding, n_dilation, dilation, ceil_mode);
  dispatchDevice<kNumeric | kBFloat16>(self->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    if (output->numel == 0)
      return;
    maxPoolKernel<T><<<gridFor(output->numel), kBlock, 0, computeStream()>>>(
        dataOf<T>(output), dataOf<int64_t>(indices), dataOf<T>(self),
        output->numel, g);
    checkLaunch(kernel);
  });
}

void spmd_rt_max_pool2d_with_indices_backward(SpmdBuffer *out,
                                              const SpmdBuffer *grad_output,
                                              const SpmdBuffer *indices) {
  const char *kernel = "spmd_rt_max_pool2d_with_indices_backward";
  // out is shaped like the pooled input, grad_output like the pooling.
  const WindowGeometry g = checkPooledPlanes(kernel, grad_output, out);
  checkSameShape(kernel, "indices", indices, "grad_output", grad_output);
  if (indices->dtype != SPMD_I64)
    spmd_rt_fatal("%s: indices must be i64", kernel);
  dispatchDevice<kNumeric | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    using A = PoolAccT<T>;
    std::unique_ptr<Scratch> wide;
    A *acc = reinterpret_cast<A *>(out->data);
    if constexpr (!std::is_same_v<A, T>) {
      wide = std::make_unique<Scratch>(out->numel * int64_t(sizeof(A)), kernel);
      acc = wide->as<A>();
    }
    check(cudaMemsetAsync(acc, 0, out->numel * sizeof(A), computeStream()),
          kernel);
    if (grad_output->numel > 0) {
      maxPoolBackwardKernel<T, A>
          <<<gridFor(grad_output->numel), kBlock, 0, computeStream()>>>(
              acc, dataOf<T>(grad_output), dataOf<int64_t>(indices),
              grad_output->numel, g.inPlane(), g.outPlane(), deviceErrorSlot(),
              kernelId(kernel));
      checkLaunch(kernel);
    }
    if constexpr (!std::is_same_v<A, T>) {
      if (out->numel > 0) {
        storeKernel<T, A><<<gridFor(out->numel), kBlock, 0, computeStream()>>>(
            dataOf<T>(out), acc, out->numel);
        checkLaunch(kernel);
      }
    }
  });
}

static constexpr int64_t kNoDilation[] = {1, 1};

void spmd_rt_avg_pool2d(SpmdBuffer *out, const SpmdBuffer *self,
                        int32_t n_kernel_size, const int64_t *kernel_size,
                        int32_t n_stride, const int64_t *stride,
                        int32_t n_padding, const int64_t *padding,
                        int64_t ceil_mode, int64_t count_include_pad,
                        int64_t divisor_override) {
  const char *kernel = "spmd_rt_avg_pool2d";
  const WindowGeometry g =
      checkPool2d(kernel, out, self, n_kernel_size, kernel_size, n_stride,
                  stride, n_padding, padding, 2, kNoDilation, ceil_mode);
  avgPool(kernel, out, self, g, false, count_include_pad, divisor_override);
}

void spmd_rt_avg_pool2d_backward(SpmdBuffer *out, const SpmdBuffer *grad_output,
                                 int32_t n_kernel_size,
                                 const int64_t *kernel_size, int32_t n_stride,
                                 const int64_t *stride, int32_t n_padding,
                                 const int64_t *padding, int64_t ceil_mode,
                                 int64_t count_include_pad,
                                 int64_t divisor_override) {
  const char *kernel = "spmd_rt_avg_pool2d_backward";
  // out is shaped like the pooled input, grad_output like the pooling.
  const WindowGeometry g = checkPool2d(kernel, grad_output, out, n_kernel_size,
                                       kernel_size, n_stride, stride, n_padding,
                                       padding, 2, kNoDilation, ceil_mode);
  avgPoolBackward(kernel, out, grad_output, g, false, count_include_pad,
                  divisor_override);
}

void spmd_rt_adaptive_avg_pool2d(SpmdBuffer *out, const SpmdBuffer *self) {
  const char *kernel = "spmd_rt_adaptive_avg_pool2d";
  avgPool(kernel, out, self, checkPooledPlanes(kernel, out, self), true, false,
          0);
}

void spmd_rt_adaptive_avg_pool2d_backward(SpmdBuffer *out,
                                          const SpmdBuffer *grad_output) {
  const char *kernel = "spmd_rt_adaptive_avg_pool2d_backward";
  avgPoolBackward(kernel, out, grad_output,
                  checkPooledPlanes(kernel, grad_output, out), true, false, 0);
}

} // namespace spmd::rt::cuda
