//===- RuntimeCudaKernelsTest.cpp - CUDA kernels against the CPU kernels --===//
//
// Runs every kernel of spmd/Runtime/KernelList.def twice on the same inputs,
// in one process: the CPU implementation (spmd::rt::cpu::spmd_rt_<name>,
// Backends.h) on host descriptors over std::vector storage, and the C entry
// point spmd_rt_<name> with the "cuda" backend on device buffers (filled and
// read back with spmd_rt_write / spmd_rt_read). Results must agree: floats
// within |cuda - cpu| <= atol + rtol * |cpu| (rtol 1e-5 for elementwise
// kernels, 1e-4 for reductions, scans, softmax, attention, layer norm,
// matrix products and losses; f64 tolerances are the f32 ones scaled by
// 1e-6), integers and masks exactly, and the random kernels (bernoulli_p,
// native_dropout) exactly, as both draw the same Philox numbers.
//
// bf16 is checked against the CPU kernels run in f32 on the same,
// bf16-exact, values (what the CPU backend does for bf16): a kBF16 tensor is
// bf16 on the device and f32 on the host. The CUDA kernels compute in f32 and
// round each stored value once to bf16 (ATen's opmath_type), so conversions,
// data movement, factories and dropout must give the CPU's f32 result
// rounded to bf16 (nearest, ties to even) exactly, elementwise math must be
// within half a bf16 ulp (2^-8 relative) of it, and sums (reductions,
// scans, softmax, attention, layer norm, matrix products, losses) within
// rtol 1e-2.
//
// Also checked: the buffer ABI of the backend (host copies, views,
// constants), device-side index errors reported when a result is read back
// (death tests), the NCCL collectives of a 1-rank job (out == in) and their
// ordering against the compute stream, and the device allocator's
// accounting and reuse.
//
// Without a visible CUDA GPU the test prints one line and skips every test.
//
//===----------------------------------------------------------------------===//

#include "Backends.h"
#include "spmd/Runtime/Runtime.h"
#include "spmd/Runtime/Window.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iomanip>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

extern char **environ;

namespace {

using Shape = std::vector<int64_t>;

/// Whether a CUDA GPU is visible (main); every test skips without one.
bool gHaveGpu = false;

/// The inputs' random source, reseeded by each test: a test sees the same
/// values whatever ran before it.
std::mt19937_64 gRng;

const int32_t kFloatTypes[] = {SPMD_F32, SPMD_F64};

//===----------------------------------------------------------------------===//
// The process environment at startup
//===----------------------------------------------------------------------===//

// MPI_Init (spmd_rt_init) adds variables to the environment that make a
// process started from this one join this job as its rank 0 (Open MPI's
// PMIX_* and OMPI_*). A death-test child re-executes this binary and starts
// its own runtime, so it must see the environment from before MPI_Init.

std::vector<std::string> gStartupEnvStrings;
std::vector<char *> gStartupEnv;

void snapshotEnvironment() {
  for (char **entry = environ; entry && *entry; ++entry)
    gStartupEnvStrings.emplace_back(*entry);
  for (std::string &entry : gStartupEnvStrings)
    gStartupEnv.push_back(entry.data());
  gStartupEnv.push_back(nullptr);
}

/// While alive, `environ` is the startup environment (what a child process
/// started with execv inherits).
class StartupEnvironment {
public:
  StartupEnvironment() : saved(environ) {
    if (!gStartupEnv.empty())
      environ = gStartupEnv.data();
  }
  ~StartupEnvironment() { environ = saved; }
  StartupEnvironment(const StartupEnvironment &) = delete;
  StartupEnvironment &operator=(const StartupEnvironment &) = delete;

private:
  char **saved;
};

//===----------------------------------------------------------------------===//
// Element access
//===----------------------------------------------------------------------===//

template <typename T> constexpr int32_t dtypeOf();
template <> constexpr int32_t dtypeOf<float>() { return SPMD_F32; }
template <> constexpr int32_t dtypeOf<int64_t>() { return SPMD_I64; }
template <> constexpr int32_t dtypeOf<int32_t>() { return SPMD_I32; }

bool isFloat(int32_t dtype) { return dtype == SPMD_F32 || dtype == SPMD_F64; }

template <typename T> T load(const void *data, int64_t i) {
  T value;
  std::memcpy(&value, static_cast<const char *>(data) + i * sizeof(T),
              sizeof(T));
  return value;
}

template <typename T> void store(void *data, int64_t i, T value) {
  std::memcpy(static_cast<char *>(data) + i * sizeof(T), &value, sizeof(T));
}

/// Element i of `data` (of `dtype`) as a double.
double loadDouble(const void *data, int32_t dtype, int64_t i) {
  switch (dtype) {
  case SPMD_F32:
    return load<float>(data, i);
  case SPMD_F64:
    return load<double>(data, i);
  case SPMD_I64:
    return static_cast<double>(load<int64_t>(data, i));
  case SPMD_I32:
    return load<int32_t>(data, i);
  case SPMD_I1:
    return load<uint8_t>(data, i);
  default:
    return std::numeric_limits<double>::quiet_NaN();
  }
}

/// Element i of `data` (of an integer dtype or i1) as an int64.
int64_t loadInt(const void *data, int32_t dtype, int64_t i) {
  switch (dtype) {
  case SPMD_I64:
    return load<int64_t>(data, i);
  case SPMD_I32:
    return load<int32_t>(data, i);
  case SPMD_I1:
    return load<uint8_t>(data, i);
  default:
    return 0;
  }
}

/// Stores `value` converted to `dtype` (i1: nonzero is 1).
void storeDouble(void *data, int32_t dtype, int64_t i, double value) {
  switch (dtype) {
  case SPMD_F32:
    return store<float>(data, i, static_cast<float>(value));
  case SPMD_F64:
    return store<double>(data, i, value);
  case SPMD_I64:
    return store<int64_t>(data, i, static_cast<int64_t>(value));
  case SPMD_I32:
    return store<int32_t>(data, i, static_cast<int32_t>(value));
  case SPMD_I1:
    return store<uint8_t>(data, i, value != 0 ? 1 : 0);
  default:
    ADD_FAILURE() << "cannot store into dtype " << spmd_rt_dtype_name(dtype);
  }
}

//===----------------------------------------------------------------------===//
// bf16 on the host
//===----------------------------------------------------------------------===//

/// The bf16 nearest to `v`, ties to even (c10::BFloat16's rounding and
/// __float2bfloat16's), as its bits: the top 16 bits of an f32. NaN stays a
/// (quiet) NaN; values past the largest bf16 round to infinity.
uint16_t bf16Bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  if (std::isnan(v))
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

/// The value of bf16 `bits` as an f32 (exact).
float bf16Value(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float v;
  std::memcpy(&v, &wide, sizeof v);
  return v;
}

/// `v` rounded to bf16 (nearest, ties to even).
float roundBf16(float v) { return bf16Value(bf16Bits(v)); }

//===----------------------------------------------------------------------===//
// Tensors on both backends
//===----------------------------------------------------------------------===//

/// A Tensor's dtype on the host (what the CPU kernel gets) and on the device
/// (what the CUDA kernel gets): the same, but for kBF16.
struct DType {
  int32_t host, device;
  /// A runtime dtype, on both sides (implicit: a dtype argument is one).
  constexpr DType(int32_t dtype) : host(dtype), device(dtype) {}
  constexpr DType(int32_t onHost, int32_t onDevice)
      : host(onHost), device(onDevice) {}
};

/// bf16 on the device, f32 on the host: the CPU kernels compute the
/// reference in f32 on the same values. Such a tensor holds
/// bf16 values on both sides: `set` rounds to bf16, and so does sameValues
/// (a CPU result fed to the next kernel, as the CUDA kernel stored it).
constexpr DType kBF16{SPMD_F32, SPMD_BF16};

struct DeviceDeleter {
  void operator()(SpmdBuffer *buffer) const { spmd_rt_free(buffer); }
};
using DeviceBuffer = std::unique_ptr<SpmdBuffer, DeviceDeleter>;

/// Every byte of a fresh device buffer: f32 3.4e38, i1 127, so an element a
/// CUDA kernel leaves unwritten never matches the CPU's.
constexpr uint8_t kPoison = 0x7F;

/// One tensor twice: a host descriptor over a std::vector (what the CPU
/// kernel gets) and a device buffer from spmd_rt_alloc (what the CUDA kernel
/// gets). A fresh tensor has zeroed host data and poisoned device data. A
/// kBF16 tensor has f32 host data and bf16 device data: it converts on
/// upload and download, so that its host and downloaded values compare as
/// f32.
class Tensor {
public:
  Tensor(DType dtype, const Shape &shape) : devDtype(dtype.device) {
    desc.dtype = dtype.host;
    desc.rank = static_cast<int32_t>(shape.size());
    desc.numel = 1;
    for (size_t d = 0; d < shape.size() && d < SPMD_MAX_RANK; ++d) {
      desc.shape[d] = shape[d];
      desc.numel *= shape[d];
    }
    // uint64_t storage: aligned for every dtype; never empty.
    hostStorage.assign(bytes() / 8 + 1, 0);
    desc.data = hostStorage.data();
    desc.storage = nullptr;
    dev.reset(spmd_rt_alloc(devDtype, desc.rank, shape.data()));
    if (deviceBytes() > 0) {
      std::vector<uint8_t> poison(deviceBytes(), kPoison);
      spmd_rt_write(dev.get(), poison.data());
    }
  }
  Tensor(Tensor &&) = default;
  Tensor &operator=(Tensor &&) = default;

  SpmdBuffer *host() { return &desc; }
  SpmdBuffer *device() { return dev.get(); }
  /// The host dtype (of hostData, the CPU's values and download's).
  int32_t dtype() const { return desc.dtype; }
  int32_t deviceDtype() const { return devDtype; }
  DType type() const { return {desc.dtype, devDtype}; }
  /// Whether this is a kBF16 tensor (a plain SPMD_BF16 one holds bf16 on
  /// both sides).
  bool isBF16() const {
    return devDtype == SPMD_BF16 && desc.dtype == SPMD_F32;
  }
  int64_t numel() const { return desc.numel; }
  Shape shape() const { return Shape(desc.shape, desc.shape + desc.rank); }
  /// The host data's bytes.
  size_t bytes() const {
    return static_cast<size_t>(desc.numel) * spmd_rt_dtype_size(desc.dtype);
  }
  size_t deviceBytes() const {
    return static_cast<size_t>(desc.numel) * spmd_rt_dtype_size(devDtype);
  }
  void *hostData() { return hostStorage.data(); }
  const void *hostData() const { return hostStorage.data(); }
  double get(int64_t i) const { return loadDouble(hostData(), dtype(), i); }
  /// Sets host element i (kBF16: to `value` rounded to bf16).
  void set(int64_t i, double value) {
    if (isBF16())
      value = roundBf16(static_cast<float>(value));
    storeDouble(hostData(), dtype(), i, value);
  }
  /// Rounds the host values of a kBF16 tensor to bf16.
  void roundHostToBf16() {
    if (isBF16())
      for (int64_t i = 0; i < numel(); ++i)
        store<float>(hostData(), i, roundBf16(load<float>(hostData(), i)));
  }

  /// Copies the host values to the device buffer (kBF16: rounded to bf16).
  void upload() {
    if (deviceBytes() == 0)
      return;
    if (!isBF16())
      return spmd_rt_write(dev.get(), hostStorage.data());
    std::vector<uint16_t> bits(static_cast<size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i)
      bits[i] = bf16Bits(load<float>(hostData(), i));
    spmd_rt_write(dev.get(), bits.data());
  }
  /// The device values, laid out as the host data (kBF16: widened to f32).
  /// spmd_rt_read waits for the producing kernels and reports device-side
  /// errors.
  std::vector<uint64_t> download() const {
    std::vector<uint64_t> values(bytes() / 8 + 1, 0);
    if (deviceBytes() == 0)
      return values;
    if (!isBF16()) {
      spmd_rt_read(dev.get(), values.data());
      return values;
    }
    std::vector<uint16_t> bits(static_cast<size_t>(numel()));
    spmd_rt_read(dev.get(), bits.data());
    for (int64_t i = 0; i < numel(); ++i)
      store<float>(values.data(), i, bf16Value(bits[i]));
    return values;
  }

private:
  int32_t devDtype;
  std::vector<uint64_t> hostStorage;
  SpmdBuffer desc{};
  DeviceBuffer dev;
};

/// A tensor of the given values, uploaded.
template <typename T>
Tensor tensor(const Shape &shape, const std::vector<T> &values) {
  Tensor t(dtypeOf<T>(), shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  size_t count = std::min(values.size(), static_cast<size_t>(t.numel()));
  if (count > 0)
    std::memcpy(t.hostData(), values.data(), count * sizeof(T));
  t.upload();
  return t;
}

/// A tensor with element i = fn(i), uploaded.
template <typename Fn>
Tensor generate(DType dtype, const Shape &shape, Fn &&fn) {
  Tensor t(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set(i, fn(i));
  t.upload();
  return t;
}

/// Uniform values in [lo, hi) for float dtypes, integers in [lo, hi]
/// otherwise (i1: 0 or 1), uploaded (kBF16: rounded to bf16).
Tensor random(DType dtype, const Shape &shape, double lo, double hi) {
  if (isFloat(dtype.host)) {
    std::uniform_real_distribution<double> uniform(lo, hi);
    return generate(dtype, shape, [&](int64_t) { return uniform(gRng); });
  }
  if (dtype.host == SPMD_I1)
    lo = 0, hi = 1;
  std::uniform_int_distribution<int64_t> uniform(std::llround(lo),
                                                 std::llround(hi));
  return generate(dtype, shape,
                  [&](int64_t) { return static_cast<double>(uniform(gRng)); });
}

/// Magnitudes uniform in [lo, hi) with random signs (divisors).
Tensor randomSigned(DType dtype, const Shape &shape, double lo, double hi) {
  std::uniform_real_distribution<double> uniform(lo, hi);
  std::bernoulli_distribution negative(0.5);
  return generate(dtype, shape, [&](int64_t) {
    double v = uniform(gRng);
    return negative(gRng) ? -v : v;
  });
}

/// A new input holding `source`'s host values (a CPU result fed to the next
/// kernel on both backends; kBF16: rounded to bf16, as the CUDA kernel
/// stores it).
Tensor sameValues(const Tensor &source) {
  Tensor t(source.type(), source.shape());
  std::memcpy(t.hostData(), source.hostData(), source.bytes());
  t.roundHostToBf16();
  t.upload();
  return t;
}

/// The `cat` inputs of both backends.
class TensorList {
public:
  TensorList(std::initializer_list<Tensor *> tensors) {
    for (Tensor *t : tensors) {
      hosts.push_back(t->host());
      devices.push_back(t->device());
      bf16 = bf16 || t->deviceDtype() == SPMD_BF16;
    }
  }
  const SpmdBuffer *const *host() const { return hosts.data(); }
  const SpmdBuffer *const *device() const { return devices.data(); }
  /// Whether an input has bf16 device data.
  bool hasBf16() const { return bf16; }

private:
  std::vector<const SpmdBuffer *> hosts, devices;
  bool bf16 = false;
};

//===----------------------------------------------------------------------===//
// Running a kernel on both backends
//===----------------------------------------------------------------------===//

// Each argument of a kernel call maps to its CPU and its CUDA form: a
// Tensor to its host descriptor or device buffer, a Tensor * (optional
// operand) likewise or NULL, scalars and host tables to themselves.
SpmdBuffer *hostArg(Tensor &t) { return t.host(); }
SpmdBuffer *hostArg(Tensor *t) { return t ? t->host() : nullptr; }
const SpmdBuffer *const *hostArg(TensorList &list) { return list.host(); }
std::nullptr_t hostArg(std::nullptr_t) { return nullptr; }
template <
    typename T,
    std::enable_if_t<std::is_arithmetic_v<T> || std::is_pointer_v<T>, int> = 0>
T hostArg(T value) {
  return value;
}

SpmdBuffer *deviceArg(Tensor &t) { return t.device(); }
SpmdBuffer *deviceArg(Tensor *t) { return t ? t->device() : nullptr; }
const SpmdBuffer *const *deviceArg(TensorList &list) { return list.device(); }
std::nullptr_t deviceArg(std::nullptr_t) { return nullptr; }
template <
    typename T,
    std::enable_if_t<std::is_arithmetic_v<T> || std::is_pointer_v<T>, int> = 0>
T deviceArg(T value) {
  return value;
}

// Whether an argument has bf16 device data.
bool bf16Arg(Tensor &t) { return t.deviceDtype() == SPMD_BF16; }
bool bf16Arg(Tensor *t) { return t && bf16Arg(*t); }
bool bf16Arg(TensorList &list) { return list.hasBf16(); }
bool bf16Arg(std::nullptr_t) { return false; }
template <
    typename T,
    std::enable_if_t<std::is_arithmetic_v<T> || std::is_pointer_v<T>, int> = 0>
bool bf16Arg(T) {
  return false;
}

/// The kernels run so far (KernelList.def names), for the coverage tests:
/// all, and those run with a bf16 operand.
std::set<std::string> &exercisedKernels() {
  static std::set<std::string> names;
  return names;
}
std::set<std::string> &exercisedBf16Kernels() {
  static std::set<std::string> names;
  return names;
}

template <typename CpuKernel, typename CudaKernel, typename... Args>
void runBoth(const char *name, CpuKernel cpuKernel, CudaKernel cudaKernel,
             Args &&...args) {
  exercisedKernels().insert(name);
  if ((bf16Arg(args) || ...))
    exercisedBf16Kernels().insert(name);
  cpuKernel(hostArg(args)...);
  cudaKernel(deviceArg(args)...);
}

/// Runs kernel `name` with the CPU implementation on the host descriptors
/// and with the C entry point (the CUDA backend) on the device buffers.
#define RUN_BOTH(name, ...)                                                    \
  runBoth(#name, &spmd::rt::cpu::spmd_rt_##name, &::spmd_rt_##name, __VA_ARGS__)

//===----------------------------------------------------------------------===//
// Comparison
//===----------------------------------------------------------------------===//

struct Tol {
  double rtol, atol;
  /// kBF16 results: compare with the CPU's f32 result rounded to bf16.
  bool roundedToBf16 = false;
};

/// f64 results are held to the f32 tolerances scaled by this.
constexpr double kF64Scale = 1e-6;

constexpr Tol kExact{0, 0};
constexpr Tol kElementwise{1e-5, 1e-6};
/// gelu: the CPU's vectorised erf is accurate to 1.5e-7 absolute.
constexpr Tol kGelu{1e-5, 2e-6};
/// Softmax family, losses.
constexpr Tol kReduction{1e-4, 1e-6};
/// Layer norm: the row statistics' rounding reaches every element.
constexpr Tol kNorm{1e-4, 1e-5};

/// A sum of about `n` terms of magnitude up to `scale` may cancel to near
/// zero; its rounding grows like sqrt(n).
Tol sumTol(double n, double scale = 1) {
  return {1e-4, 1e-5 * std::sqrt(n) * scale};
}

/// A product with inner dim k of values in [-1, 1] scaled by alpha.
Tol matmulTol(int64_t k, double alpha = 1) {
  return sumTol(static_cast<double>(k), std::max(1.0, std::fabs(alpha)));
}

// bf16 results (kBF16 tensors) against the CPU's f32 results on the same,
// bf16-exact, inputs: the CUDA kernel's f32 math, rounded once to bf16.

/// Exactly the CPU's f32 result rounded to bf16: conversions, data
/// movement, factories, dropout (no arithmetic, or the same f32 arithmetic).
constexpr Tol kBf16Rounded{0, 0, true};
/// Elementwise math: rounding to bf16 moves a value by at most half a bf16
/// ulp, 2^-8 of it; kElementwise's tolerance covers the f32 math's own
/// differences.
constexpr Tol kBf16Elementwise{1.0 / 256 + 1e-5, 1e-6};
/// gelu: as kGelu (the CPU's vectorised erf) for the f32 part.
constexpr Tol kBf16Gelu{1.0 / 256 + 1e-5, 2e-6};
/// Softmax family, losses: f32 math and sums, one rounding (2^-9).
constexpr Tol kBf16Reduction{1e-2, 1e-5};
/// Layer norm outputs and bf16 statistics.
constexpr Tol kBf16Norm{1e-2, 1e-4};

/// A bf16 sum of about `n` terms of magnitude up to `scale`, accumulated in
/// f32 (the CPU's f32 kernels accumulate in double): the final rounding is
/// relative; the f32 accumulation's error grows like sqrt(n).
Tol bf16SumTol(double n, double scale = 1) {
  return {1e-2, 1e-4 * std::sqrt(n) * scale};
}

/// A bf16 product with inner dim k of values in [-1, 1] scaled by alpha.
Tol bf16MatmulTol(int64_t k, double alpha = 1) {
  return bf16SumTol(static_cast<double>(k), std::max(1.0, std::fabs(alpha)));
}

// The checks shared by the f32 and the bf16 tests take the tolerances of
// their sums and products as functions: sumTol or bf16SumTol, matmulTol or
// bf16MatmulTol.
using SumTolFn = Tol (*)(double n, double scale);
using MatmulTolFn = Tol (*)(int64_t k, double alpha);

std::string shapeString(const Shape &shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

/// The multi-index of flat index `i` in `shape`.
std::string indexString(const Shape &shape, int64_t i) {
  Shape index(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return shapeString(index);
}

bool withinTol(double got, double want, Tol tol) {
  if (std::isnan(want))
    return std::isnan(got);
  if (std::isinf(want))
    return got == want;
  if (!std::isfinite(got))
    return false;
  return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
}

/// Compares the device values of `t` (CUDA) with its host values (CPU):
/// floats within `tol` (NaN matches NaN), integers and i1 exactly. Reports
/// the number of mismatches and the first one.
void expectMatch(const Tensor &t, Tol tol) {
  const int32_t dtype = t.dtype();
  if (dtype == SPMD_F64)
    tol = {tol.rtol * kF64Scale, tol.atol * kF64Scale};
  if (tol.roundedToBf16 && !t.isBF16()) {
    ADD_FAILURE() << "kBf16Rounded compares kBF16 tensors only";
    return;
  }
  std::vector<uint64_t> device = t.download();
  const void *got = device.data();
  const void *want = t.hostData();
  auto wantAt = [&](int64_t i) {
    const double value = loadDouble(want, dtype, i);
    return tol.roundedToBf16 ? roundBf16(static_cast<float>(value)) : value;
  };
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    bool ok = isFloat(dtype)
                  ? withinTol(loadDouble(got, dtype, i), wantAt(i), tol)
                  : loadInt(got, dtype, i) == loadInt(want, dtype, i);
    if (!ok && mismatches++ == 0)
      first = i;
  }
  if (mismatches == 0)
    return;
  std::ostringstream message;
  message << std::setprecision(dtype == SPMD_F64 ? 17 : 9)
          << spmd_rt_dtype_name(t.deviceDtype())
          << (t.isBF16() ? " (f32 on the cpu)" : "") << shapeString(t.shape())
          << ": " << mismatches << " of " << t.numel()
          << " elements differ; first at " << indexString(t.shape(), first)
          << " (flat " << first << "): cuda ";
  if (isFloat(dtype)) {
    message << loadDouble(got, dtype, first) << ", cpu "
            << loadDouble(want, dtype, first);
    if (tol.roundedToBf16)
      message << " (" << wantAt(first) << " in bf16)";
    else
      message << " (rtol " << tol.rtol << ", atol " << tol.atol << ")";
  } else {
    message << loadInt(got, dtype, first) << ", cpu "
            << loadInt(want, dtype, first);
  }
  ADD_FAILURE() << message.str();
}

/// expectMatch, traced to the line that calls it.
#define EXPECT_MATCH(tensor, tol)                                              \
  do {                                                                         \
    SCOPED_TRACE("cuda vs cpu: " #tensor);                                     \
    expectMatch(tensor, tol);                                                  \
  } while (false)

/// Runs single-output kernel `name` on both backends into `out` (a fresh
/// Tensor expression) and compares the results within `tol`.
#define CHECK_KERNEL(tol, name, out, ...)                                      \
  do {                                                                         \
    SCOPED_TRACE("spmd_rt_" #name "(" #out ", " #__VA_ARGS__ ")");             \
    Tensor result_ = out;                                                      \
    RUN_BOTH(name, result_, __VA_ARGS__);                                      \
    expectMatch(result_, tol);                                                 \
  } while (false)

/// The device values of `t` equal `want`'s host values, byte for byte.
void expectDeviceBytes(const Tensor &t, const Tensor &want) {
  ASSERT_EQ(t.bytes(), want.bytes());
  std::vector<uint64_t> got = t.download();
  const auto *g = reinterpret_cast<const uint8_t *>(got.data());
  const auto *w = static_cast<const uint8_t *>(want.hostData());
  for (size_t i = 0; i < t.bytes(); ++i)
    if (g[i] != w[i]) {
      ADD_FAILURE() << "byte " << i << " of " << t.bytes()
                    << " differs: " << int(g[i]) << " on the device, "
                    << int(w[i]) << " expected";
      return;
    }
}

/// The device values of `t` as doubles (kBF16: widened).
std::vector<double> deviceValues(const Tensor &t) {
  std::vector<uint64_t> raw = t.download();
  std::vector<double> values(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    values[i] = loadDouble(raw.data(), t.dtype(), i);
  return values;
}

//===----------------------------------------------------------------------===//
// Fixtures
//===----------------------------------------------------------------------===//

class CudaTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!gHaveGpu)
      GTEST_SKIP() << "no CUDA GPU visible";
    gRng.seed(0x5EED5EEDu);
  }
};

/// The kernels of KernelList.def, CUDA against CPU.
class CudaKernels : public CudaTest {};

/// The kernels of KernelList.def on bf16 (CUDA only), against the CPU
/// kernels in f32.
class CudaKernelsBf16 : public CudaTest {};

/// Device-side errors; each death test re-executes this binary
/// (death_test_style "threadsafe": CUDA does not survive fork).
class CudaKernelsDeathTest : public CudaTest {};

/// The buffer ABI and the allocator of the cuda backend.
class CudaRuntime : public CudaTest {};

/// NCCL collectives on the default 1-D mesh of a 1-rank job.
class CudaCollectives : public CudaTest {
protected:
  void SetUp() override {
    CudaTest::SetUp();
    if (IsSkipped())
      return;
    if (spmd_rt_world_size() != 1)
      GTEST_SKIP() << "written for a 1-rank job";
  }
};

/// The default mesh's only dim: collectives over the 1-rank group.
constexpr int64_t kMeshDim0[] = {0};

//===----------------------------------------------------------------------===//
// Buffers
//===----------------------------------------------------------------------===//

TEST_F(CudaRuntime, BackendBufferCopiesViewsAndConstants) {
  EXPECT_STREQ(spmd_rt_backend(), "cuda");
  // Choosing the running backend again is a no-op.
  EXPECT_EQ(spmd_rt_set_backend("cuda"), 0);

  // spmd_rt_write then spmd_rt_read gives the bytes back, for every dtype.
  for (int32_t dtype :
       {SPMD_F32, SPMD_F64, SPMD_F16, SPMD_BF16, SPMD_I64, SPMD_I32, SPMD_I1}) {
    SCOPED_TRACE(spmd_rt_dtype_name(dtype));
    Tensor t(dtype, {3, 5, 7});
    auto *bytes = static_cast<uint8_t *>(t.hostData());
    for (size_t i = 0; i < t.bytes(); ++i)
      bytes[i] = static_cast<uint8_t>(gRng());
    t.upload();
    expectDeviceBytes(t, t);
  }

  // A view shares the device data, and kernels read it under its shape.
  Tensor x = random(SPMD_F32, {3, 5, 7}, -1, 1);
  const int64_t viewShape[] = {15, 7};
  SpmdBuffer *view = spmd_rt_view(x.device(), 2, viewShape);
  ASSERT_NE(view, nullptr);
  EXPECT_EQ(view->data, x.device()->data);
  EXPECT_EQ(view->rank, 2);
  EXPECT_EQ(view->numel, 105);
  std::vector<float> viewed(105);
  spmd_rt_read(view, viewed.data());
  EXPECT_EQ(0, std::memcmp(viewed.data(), x.hostData(), x.bytes()));
  SpmdBuffer hostView = *x.host();
  hostView.rank = 2;
  hostView.shape[0] = 15;
  hostView.shape[1] = 7;
  Tensor negated(SPMD_F32, {15, 7});
  spmd::rt::cpu::spmd_rt_neg(negated.host(), &hostView);
  spmd_rt_neg(negated.device(), view);
  EXPECT_MATCH(negated, kElementwise);
  const int64_t live = spmd_rt_live_bytes();
  spmd_rt_free(view); // x still holds the data
  EXPECT_EQ(spmd_rt_live_bytes(), live);
  expectDeviceBytes(x, x);

  // spmd_rt_constant fills a device buffer.
  const int64_t constant[] = {1, -2, 3, int64_t(1) << 40};
  Tensor c = tensor<int64_t>({4}, {1, -2, 3, int64_t(1) << 40});
  Tensor d(SPMD_I64, {4});
  spmd_rt_constant(d.device(), constant, sizeof constant);
  expectDeviceBytes(d, c);
  spmd_rt_synchronize();
}

TEST_F(CudaRuntime, AllocatorAccountsAndReusesMemory) {
  spmd_rt_synchronize();
  const int64_t base = spmd_rt_live_bytes();
  const Shape shape = {16, 1024, 1024}; // 64 MiB of f32
  const int64_t bytes = int64_t(64) << 20;

  SpmdBuffer *first = spmd_rt_alloc(SPMD_F32, 3, shape.data());
  ASSERT_NE(first, nullptr);
  const int64_t one = spmd_rt_live_bytes() - base;
  EXPECT_GE(one, bytes);
  spmd_rt_free(first);
  EXPECT_EQ(spmd_rt_live_bytes(), base);

  // Shared data is counted once and goes with its last buffer.
  SpmdBuffer *owner = spmd_rt_alloc(SPMD_F32, 3, shape.data());
  const int64_t flat[] = {16 * 1024 * 1024};
  SpmdBuffer *view = spmd_rt_view(owner, 1, flat);
  EXPECT_EQ(spmd_rt_live_bytes() - base, one);
  spmd_rt_free(owner);
  EXPECT_EQ(spmd_rt_live_bytes() - base, one);
  spmd_rt_free(view);
  EXPECT_EQ(spmd_rt_live_bytes(), base);

  // 100 rounds of alloc, use, free: the peak stays at one buffer, and the
  // device memory is reused (without reuse they would take 6.4 GiB).
  spmd_rt_synchronize();
  size_t freeBefore = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&freeBefore, &total), cudaSuccess);
  spmd_rt_reset_peak();
  for (int i = 0; i < 100; ++i) {
    SpmdBuffer *b = spmd_rt_alloc(SPMD_F32, 3, shape.data());
    spmd_rt_fill(b, i);
    spmd_rt_free(b);
  }
  spmd_rt_synchronize();
  EXPECT_EQ(spmd_rt_live_bytes(), base);
  EXPECT_LE(spmd_rt_peak_bytes() - base, one);
  size_t freeAfter = 0;
  ASSERT_EQ(cudaMemGetInfo(&freeAfter, &total), cudaSuccess);
  const int64_t grown =
      static_cast<int64_t>(freeBefore) - static_cast<int64_t>(freeAfter);
  EXPECT_LT(grown, 2 * bytes + (int64_t(64) << 20))
      << "device memory shrank by " << grown << " bytes over 100 rounds";
}

//===----------------------------------------------------------------------===//
// Broadcasting elementwise ops
//===----------------------------------------------------------------------===//

/// Operands broadcast to out's shape [3, 5, 7]: values in [-1, 1), divisors
/// of magnitude in [0.5, 2).
struct BroadcastOperands {
  explicit BroadcastOperands(DType dt)
      : a(random(dt, {3, 5, 7}, -1, 1)), b(random(dt, {3, 5, 7}, -1, 1)),
        row(random(dt, {7}, -1, 1)), col(random(dt, {3, 1, 7}, -1, 1)),
        mid(random(dt, {5, 1}, -1, 1)), scalar(random(dt, {}, -1, 1)),
        den(randomSigned(dt, {3, 5, 7}, 0.5, 2)),
        denMid(randomSigned(dt, {5, 1}, 0.5, 2)) {}
  Tensor a, b;
  Tensor row;    // rank below out's
  Tensor col;    // a size-1 dim
  Tensor mid;    // both
  Tensor scalar; // 0-D
  Tensor den, denMid;
};

/// add_tensor, sub_tensor, mul_tensor and div_tensor into `dt` on `x` and
/// on rank-4 operands, within `tol`; `alpha` is that of col + alpha * mid.
void checkBinaryArithmetic(DType dt, BroadcastOperands &x, Tol tol,
                           double alpha) {
  const Shape out = {3, 5, 7};
  CHECK_KERNEL(tol, add_tensor, Tensor(dt, out), x.a, x.b, 2.0);
  CHECK_KERNEL(tol, add_tensor, Tensor(dt, out), x.a, x.row, -0.5);
  CHECK_KERNEL(tol, add_tensor, Tensor(dt, out), x.col, x.mid, alpha);
  CHECK_KERNEL(tol, sub_tensor, Tensor(dt, out), x.a, x.scalar, 3.0);
  CHECK_KERNEL(tol, sub_tensor, Tensor(dt, out), x.row, x.col, 1.0);
  CHECK_KERNEL(tol, mul_tensor, Tensor(dt, out), x.a, x.b);
  CHECK_KERNEL(tol, mul_tensor, Tensor(dt, out), x.col, x.mid);
  CHECK_KERNEL(tol, mul_tensor, Tensor(dt, out), x.scalar, x.a);
  CHECK_KERNEL(tol, div_tensor, Tensor(dt, out), x.a, x.den);
  CHECK_KERNEL(tol, div_tensor, Tensor(dt, out), x.row, x.denMid);
  // Rank 4, size-1 dims on both sides.
  Tensor p = random(dt, {2, 1, 4, 1}, -1, 1);
  Tensor q = random(dt, {3, 1, 5}, -1, 1);
  CHECK_KERNEL(tol, add_tensor, Tensor(dt, {2, 3, 4, 5}), p, q, 1.0);
}

/// Binary ops into `dt` on a million elements and on a [1000, 1001] matrix
/// (grid-stride loops and their tails), within `tol`.
void checkLargeBinaryArithmetic(DType dt, Tol tol) {
  Tensor x = random(dt, {1000003}, -1, 1);
  Tensor s = random(dt, {1}, -1, 1);
  CHECK_KERNEL(tol, add_tensor, Tensor(dt, {1000003}), x, s, 1.0);
  Tensor wide = random(dt, {1000, 1001}, -1, 1);
  Tensor wideRow = random(dt, {1001}, -1, 1);
  Tensor wideCol = randomSigned(dt, {1000, 1}, 0.5, 2);
  CHECK_KERNEL(tol, mul_tensor, Tensor(dt, {1000, 1001}), wide, wideRow);
  CHECK_KERNEL(tol, div_tensor, Tensor(dt, {1000, 1001}), wide, wideCol);
}

TEST_F(CudaKernels, BinaryArithmetic) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    BroadcastOperands operands(dt);
    checkBinaryArithmetic(dt, operands, kElementwise, 1.0);
  }

  // Integers compute exactly in their own type.
  Tensor ia = random(SPMD_I64, {3, 5, 7}, -1000, 1000);
  Tensor ib = random(SPMD_I64, {5, 7}, -1000, 1000);
  CHECK_KERNEL(kExact, add_tensor, Tensor(SPMD_I64, {3, 5, 7}), ia, ib, 3.0);
  CHECK_KERNEL(kExact, sub_tensor, Tensor(SPMD_I64, {3, 5, 7}), ib, ia, 2.0);
  CHECK_KERNEL(kExact, mul_tensor, Tensor(SPMD_I64, {3, 5, 7}), ia, ib);
  // 2^53 + 1 is not a double: an int64 path is needed.
  Tensor big = tensor<int64_t>({2}, {9007199254740993LL, -9007199254740993LL});
  Tensor one = tensor<int64_t>({1}, {1});
  CHECK_KERNEL(kExact, add_tensor, Tensor(SPMD_I64, {2}), big, one, 1.0);
  Tensor ja = random(SPMD_I32, {3, 1, 7}, -100, 100);
  Tensor jb = random(SPMD_I32, {5, 1}, -100, 100);
  CHECK_KERNEL(kExact, mul_tensor, Tensor(SPMD_I32, {3, 5, 7}), ja, jb);

  // Mixed dtypes: inputs are converted to out's dtype first.
  Tensor f = random(SPMD_F32, {3, 5, 7}, -1, 1);
  Tensor ic = random(SPMD_I64, {5, 7}, -50, 50);
  CHECK_KERNEL(kElementwise, add_tensor, Tensor(SPMD_F32, {3, 5, 7}), f, ic,
               0.5);
  Tensor mask = random(SPMD_I1, {3, 5, 7}, 0, 1);
  CHECK_KERNEL(kElementwise, mul_tensor, Tensor(SPMD_F32, {3, 5, 7}), mask, f);
  Tensor num = random(SPMD_I64, {3, 5, 7}, -100, 100);
  Tensor divisor = random(SPMD_I32, {7}, 1, 9);
  CHECK_KERNEL(kElementwise, div_tensor, Tensor(SPMD_F32, {3, 5, 7}), num,
               divisor);
  Tensor d = random(SPMD_F64, {5, 7}, -1, 1);
  CHECK_KERNEL(kElementwise, sub_tensor, Tensor(SPMD_F64, {3, 5, 7}), f, d,
               1.0);

  checkLargeBinaryArithmetic(SPMD_F32, kElementwise);
}

TEST_F(CudaKernels, TernaryArithmetic) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    Tensor self = random(dt, {3, 5, 7}, -1, 1);
    Tensor t1 = random(dt, {5, 1}, -1, 1);
    Tensor t2 = random(dt, {3, 1, 7}, -1, 1);
    Tensor den = randomSigned(dt, {3, 1, 7}, 0.5, 2);
    const Shape out = {3, 5, 7};
    CHECK_KERNEL(kElementwise, addcmul, Tensor(dt, out), self, t1, t2, 0.5);
    CHECK_KERNEL(kElementwise, addcmul, Tensor(dt, out), t1, self, t2, -2.0);
    CHECK_KERNEL(kElementwise, addcdiv, Tensor(dt, out), self, t1, den, -1.5);
    CHECK_KERNEL(kElementwise, addcdiv, Tensor(dt, out), t2, self, den, 1.0);
    // Values on the threshold: self <= threshold gives 0.
    Tensor grad = random(dt, {3, 5, 7}, -1, 1);
    Tensor steps = generate(dt, {5, 7}, [](int64_t i) { return i % 5 - 2; });
    CHECK_KERNEL(kElementwise, threshold_backward, Tensor(dt, out), grad, steps,
                 0.0);
    CHECK_KERNEL(kElementwise, threshold_backward, Tensor(dt, out), grad, steps,
                 1.0);
    CHECK_KERNEL(kElementwise, threshold_backward, Tensor(dt, out), grad, self,
                 -0.25);
  }
  Tensor is = random(SPMD_I64, {3, 5, 7}, -100, 100);
  Tensor i1 = random(SPMD_I64, {7}, -100, 100);
  Tensor i2 = random(SPMD_I64, {5, 1}, -100, 100);
  CHECK_KERNEL(kExact, addcmul, Tensor(SPMD_I64, {3, 5, 7}), is, i1, i2, 3.0);
  CHECK_KERNEL(kExact, threshold_backward, Tensor(SPMD_I64, {3, 5, 7}), is, i2,
               0.0);
  // Mixed: an i64 factor in a f32 addcmul.
  Tensor f = random(SPMD_F32, {3, 5, 7}, -1, 1);
  CHECK_KERNEL(kElementwise, addcmul, Tensor(SPMD_F32, {3, 5, 7}), f, i1, f,
               0.25);
}

//===----------------------------------------------------------------------===//
// Tensor-scalar and unary ops
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, ScalarArithmetic) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    Tensor x = random(dt, {3, 5, 7}, -1, 1);
    const Shape out = {3, 5, 7};
    CHECK_KERNEL(kElementwise, add_scalar, Tensor(dt, out), x, 0.25, -2.0);
    CHECK_KERNEL(kElementwise, mul_scalar, Tensor(dt, out), x, 1.5);
    CHECK_KERNEL(kElementwise, div_scalar, Tensor(dt, out), x, 3.0);
    CHECK_KERNEL(kElementwise, div_scalar, Tensor(dt, out), x, -0.1);
    CHECK_KERNEL(kElementwise, rsub_scalar, Tensor(dt, out), x, 10.0, 2.0);
    Tensor e = random(dt, {3, 5, 7}, -3, 3);
    CHECK_KERNEL(kElementwise, pow_scalar, Tensor(dt, out), 2.0, e);
    CHECK_KERNEL(kElementwise, pow_scalar, Tensor(dt, out), 0.5, e);
    // A negative base: integer exponents are real, the others NaN.
    Tensor ints = generate(dt, {3, 5, 7}, [](int64_t i) {
      return i % 3 == 2 ? 0.5 + (i % 4) : double(i % 9 - 4);
    });
    CHECK_KERNEL(kElementwise, pow_scalar, Tensor(dt, out), -2.0, ints);
  }
  Tensor xi = random(SPMD_I64, {3, 5, 7}, -1000, 1000);
  const Shape out = {3, 5, 7};
  CHECK_KERNEL(kExact, add_scalar, Tensor(SPMD_I64, out), xi, 3.0, 2.0);
  CHECK_KERNEL(kExact, rsub_scalar, Tensor(SPMD_I64, out), xi, 7.0, 3.0);
  Tensor xj = random(SPMD_I32, {3, 5, 7}, -1000, 1000);
  CHECK_KERNEL(kExact, mul_scalar, Tensor(SPMD_I32, out), xj, 3.0);
  // Integer selves into float results.
  CHECK_KERNEL(kElementwise, add_scalar, Tensor(SPMD_F32, out), xi, 0.5, 1.0);
  CHECK_KERNEL(kElementwise, div_scalar, Tensor(SPMD_F32, out), xi, 7.0);
  // Exact integer powers, with ATen's rules for negative exponents.
  Tensor exps = random(SPMD_I64, {3, 5, 7}, -2, 30);
  CHECK_KERNEL(kExact, pow_scalar, Tensor(SPMD_I64, out), 3.0, exps);
  CHECK_KERNEL(kExact, pow_scalar, Tensor(SPMD_I64, out), -1.0, exps);
  CHECK_KERNEL(kExact, pow_scalar, Tensor(SPMD_I64, out), 1.0, exps);
  Tensor small = random(SPMD_I32, {3, 5, 7}, -1, 12);
  CHECK_KERNEL(kExact, pow_scalar, Tensor(SPMD_I32, out), -3.0, small);
  // Large.
  Tensor x = random(SPMD_F32, {1000003}, -1, 1);
  CHECK_KERNEL(kElementwise, rsub_scalar, Tensor(SPMD_F32, {1000003}), x, 1.0,
               0.5);
}

/// abs, maximum, pow.Tensor_Scalar and clamp on dtype `dt`: broadcasting,
/// NaN, infinities and signed zeros, each exponent ATen computes apart and
/// others, each set of clamp's bounds. The scalars are exact in bf16 (the
/// CUDA kernels take pow's exponent and clamp's bounds in bf16, as ATen's).
void checkAbsMaximumPowClamp(DType dt, Tol tol) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double specials[] = {nan, inf, -inf, -0.0, 0.0, -1e-30, 2.5};
  auto special = [&](const Shape &shape) {
    return generate(dt, shape, [&](int64_t i) { return specials[i % 7]; });
  };
  const Shape out = {3, 5, 7};
  Tensor x = random(dt, out, -3, 3);
  CHECK_KERNEL(tol, abs, Tensor(dt, out), x);
  CHECK_KERNEL(tol, abs, Tensor(dt, {7}), special({7}));

  // maximum broadcasts both ways; NaN on either side gives NaN.
  Tensor row = random(dt, {7}, -3, 3);
  Tensor col = random(dt, {3, 1, 1}, -3, 3);
  CHECK_KERNEL(tol, maximum, Tensor(dt, out), x, row);
  CHECK_KERNEL(tol, maximum, Tensor(dt, out), col, x);
  CHECK_KERNEL(tol, maximum, Tensor(dt, {7, 7}), special({7, 1}), special({7}));

  // pow: negative bases give NaN for fractional exponents on both.
  Tensor positive = random(dt, out, 0.125, 4);
  for (double e : {0.0, 1.0, 2.0, 3.0, 0.5, -0.5, -1.0, -2.0, 1.5, -0.75}) {
    SCOPED_TRACE("exponent " + std::to_string(e));
    CHECK_KERNEL(tol, pow_tensor_scalar, Tensor(dt, out), x, e);
    CHECK_KERNEL(tol, pow_tensor_scalar, Tensor(dt, out), positive, e);
    CHECK_KERNEL(tol, pow_tensor_scalar, Tensor(dt, {7}), special({7}), e);
  }

  // clamp: both bounds, one (the other ignored), min > max, NaN bounds.
  CHECK_KERNEL(tol, clamp, Tensor(dt, out), x, -1.0, 1.5, 1, 1);
  CHECK_KERNEL(tol, clamp, Tensor(dt, out), x, 0.5, 0.0, 1, 0);
  CHECK_KERNEL(tol, clamp, Tensor(dt, out), x, 0.0, 1.0, 0, 1);
  CHECK_KERNEL(tol, clamp, Tensor(dt, out), x, 2.0, 1.0, 1, 1);
  CHECK_KERNEL(tol, clamp, Tensor(dt, {7}), special({7}), -1.0, 1.0, 1, 1);
  CHECK_KERNEL(tol, clamp, Tensor(dt, {7}), special({7}), nan, 1.0, 1, 1);
  CHECK_KERNEL(tol, clamp, Tensor(dt, {7}), special({7}), 0.0, nan, 0, 1);
  CHECK_KERNEL(tol, clamp, Tensor(dt, {7}), special({7}), nan, 0.0, 1, 0);
  // hardtanh (ReLU6) is clamp with both bounds.
  CHECK_KERNEL(tol, hardtanh, Tensor(dt, out), x, 0.0, 6.0);

  Tensor large = random(dt, {1000003}, -2, 2);
  CHECK_KERNEL(tol, pow_tensor_scalar, Tensor(dt, {1000003}), large, 2.0);
  CHECK_KERNEL(tol, clamp, Tensor(dt, {1000003}), large, 0.0, 1.0, 0, 1);
}

TEST_F(CudaKernels, AbsMaximumPowClamp) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkAbsMaximumPowClamp(dt, kElementwise);
  }
  const Shape out = {3, 5, 7};
  Tensor xi = random(SPMD_I64, out, -1000, 1000);
  Tensor xj = random(SPMD_I32, {5, 1}, -1000, 1000);
  CHECK_KERNEL(kExact, abs, Tensor(SPMD_I64, out), xi);
  CHECK_KERNEL(kExact, abs, Tensor(SPMD_I32, {5, 1}), xj);
  CHECK_KERNEL(kExact, maximum, Tensor(SPMD_I64, out), xi, xj);
  Tensor p = random(SPMD_I1, out, 0, 1), q = random(SPMD_I1, {7}, 0, 1);
  CHECK_KERNEL(kExact, maximum, Tensor(SPMD_I1, out), p, q);
  // Exact integer powers (the exponents ATen computes apart included).
  Tensor bases = random(SPMD_I64, out, -40, 40);
  for (double e : {0.0, 1.0, 2.0, 3.0, 5.0})
    CHECK_KERNEL(kExact, pow_tensor_scalar, Tensor(SPMD_I64, out), bases, e);
  CHECK_KERNEL(kExact, pow_tensor_scalar, Tensor(SPMD_I32, {5, 1}), xj, 2.0);
  CHECK_KERNEL(kExact, clamp, Tensor(SPMD_I64, out), xi, -10.0, 300.0, 1, 1);
  CHECK_KERNEL(kExact, clamp, Tensor(SPMD_I64, out), xi, 0.0, 0.0, 1, 0);
  CHECK_KERNEL(kExact, clamp, Tensor(SPMD_I32, {5, 1}), xj, 0.0, 7.0, 0, 1);
  // Integer selves of float results (a float bound or exponent).
  Tensor nonnegative = random(SPMD_I64, out, 0, 1000);
  CHECK_KERNEL(kElementwise, pow_tensor_scalar, Tensor(SPMD_F32, out),
               nonnegative, 0.5);
  CHECK_KERNEL(kElementwise, clamp, Tensor(SPMD_F32, out), xi, 0.0, 2.5, 0, 1);
  Tensor f = random(SPMD_F32, {7}, -1000, 1000);
  CHECK_KERNEL(kElementwise, maximum, Tensor(SPMD_F32, out), xi, f);
}

/// div with rounding_mode trunc (0) and floor (1): quotients of both signs,
/// exact integer quotients, and an integer zero divisor (0, as the CPU).
/// div_tensor_mode of dtype `dt` (trunc and floor) within `tol`, on
/// broadcast divisors of both signs and on whole dividends (exact
/// quotients).
void checkDivRoundingModes(DType dt, Tol tol) {
  const Shape out = {3, 5, 7};
  auto divisors = [&](const Shape &shape) {
    return generate(dt, shape, [](int64_t i) {
      return (i % 2 ? -1.0 : 1.0) * (0.5 + 0.25 * double(i % 7));
    });
  };
  Tensor x = random(dt, out, -5, 5);
  Tensor whole =
      generate(dt, out, [](int64_t i) { return double(i % 13 - 6); });
  for (int64_t mode : {0, 1}) {
    CHECK_KERNEL(tol, div_tensor_mode, Tensor(dt, out), x, divisors({7}), mode);
    CHECK_KERNEL(tol, div_tensor_mode, Tensor(dt, out), whole, divisors({5, 1}),
                 mode);
  }
}

TEST_F(CudaKernels, DivRoundingModes) {
  const Shape out = {3, 5, 7};
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkDivRoundingModes(dt, kElementwise);
  }
  Tensor xi = random(SPMD_I64, out, -1000, 1000);
  Tensor yi = generate(SPMD_I64, {7}, [](int64_t i) { return double(i - 3); });
  for (int64_t mode : {0, 1})
    CHECK_KERNEL(kExact, div_tensor_mode, Tensor(SPMD_I64, out), xi, yi, mode);
}

TEST_F(CudaKernels, UnaryOps) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    const Shape out = {3, 5, 7};
    Tensor x = random(dt, out, -1, 1);
    Tensor away = randomSigned(dt, out, 0.25, 4);
    Tensor positive = random(dt, out, 0, 4);
    CHECK_KERNEL(kElementwise, neg, Tensor(dt, out), x);
    CHECK_KERNEL(kElementwise, reciprocal, Tensor(dt, out), away);
    CHECK_KERNEL(kElementwise, sqrt, Tensor(dt, out), positive);
    // sqrt of a negative value is NaN on both.
    CHECK_KERNEL(kElementwise, sqrt, Tensor(dt, out), x);
    CHECK_KERNEL(kElementwise, relu, Tensor(dt, out), x);
    CHECK_KERNEL(kElementwise, tanh, Tensor(dt, out), away);
    CHECK_KERNEL(kElementwise, tanh_backward, Tensor(dt, out), away, x);
    // relu propagates NaN and keeps infinities' rules.
    Tensor special = generate(dt, {6}, [&](int64_t i) {
      const double v[] = {nan, inf, -inf, -0.0, 0.0, -1e-30};
      return v[i];
    });
    CHECK_KERNEL(kElementwise, relu, Tensor(dt, {6}), special);
    CHECK_KERNEL(kElementwise, neg, Tensor(dt, {6}), special);
  }
  Tensor xi = random(SPMD_I64, {3, 5, 7}, -1000, 1000);
  CHECK_KERNEL(kExact, neg, Tensor(SPMD_I64, {3, 5, 7}), xi);
  CHECK_KERNEL(kExact, relu, Tensor(SPMD_I64, {3, 5, 7}), xi);
  Tensor xj = random(SPMD_I32, {3, 5, 7}, -1000, 1000);
  CHECK_KERNEL(kExact, neg, Tensor(SPMD_I32, {3, 5, 7}), xj);
  CHECK_KERNEL(kExact, relu, Tensor(SPMD_I32, {3, 5, 7}), xj);
  // Integer inputs of float results.
  Tensor nonzero = generate(SPMD_I64, {3, 5, 7}, [](int64_t i) {
    return (i % 2 ? 1 : -1) * (1 + i % 13);
  });
  CHECK_KERNEL(kElementwise, reciprocal, Tensor(SPMD_F32, {3, 5, 7}), nonzero);
  CHECK_KERNEL(kElementwise, sqrt, Tensor(SPMD_F32, {3, 5, 7}), nonzero);
  Tensor big = random(SPMD_F32, {1000003}, -1, 1);
  CHECK_KERNEL(kElementwise, relu, Tensor(SPMD_F32, {1000003}), big);
}

/// gelu and gelu_backward of dtype `dt`, both approximations, within `tol`:
/// on -5, -4.995, ..., 5 (kBF16: rounded to bf16) and on random values of
/// an odd shape; with `broadcastGrad`, also gelu_backward with grad_output
/// broadcast against the latter.
void checkGelu(DType dt, Tol tol, bool broadcastGrad) {
  Tensor range = generate(dt, {2001}, [](int64_t i) {
    return static_cast<double>(i - 1000) / 200;
  });
  Tensor x = random(dt, {3, 5, 67}, -5, 5);
  Tensor dyRange = random(dt, {2001}, -1, 1);
  Tensor dy = random(dt, {3, 5, 67}, -1, 1);
  for (int64_t approximate : {0, 1}) {
    SCOPED_TRACE("approximate " + std::to_string(approximate));
    CHECK_KERNEL(tol, gelu, Tensor(dt, {2001}), range, approximate);
    CHECK_KERNEL(tol, gelu, Tensor(dt, {3, 5, 67}), x, approximate);
    CHECK_KERNEL(tol, gelu_backward, Tensor(dt, {2001}), dyRange, range,
                 approximate);
    CHECK_KERNEL(tol, gelu_backward, Tensor(dt, {3, 5, 67}), dy, x,
                 approximate);
  }
  if (broadcastGrad) {
    Tensor dyRow = random(dt, {67}, -1, 1);
    CHECK_KERNEL(tol, gelu_backward, Tensor(dt, {3, 5, 67}), dyRow, x, 1);
  }
}

TEST_F(CudaKernels, Gelu) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkGelu(dt, kGelu, /*broadcastGrad=*/false);
  }
  // grad_output broadcast against self.
  Tensor x = random(SPMD_F32, {3, 5, 7}, -4, 4);
  Tensor dy = random(SPMD_F32, {7}, -1, 1);
  CHECK_KERNEL(kGelu, gelu_backward, Tensor(SPMD_F32, {3, 5, 7}), dy, x, 0);
}

/// silu and silu_backward of dtype `dt` within `tol`: on -10, -9.99, ...,
/// 10 (kBF16: rounded to bf16), on values large enough for exp(-x) to
/// overflow, and on random values of an odd shape, grad_output also
/// broadcast against them.
void checkSilu(DType dt, Tol tol) {
  Tensor range = generate(dt, {2001}, [](int64_t i) {
    return static_cast<double>(i - 1000) / 100;
  });
  Tensor large = generate(dt, {6}, [](int64_t i) {
    const double v[] = {-100, -88.75, -30, 30, 88.75, 100};
    return v[i];
  });
  Tensor x = random(dt, {3, 5, 67}, -6, 6);
  Tensor dyRange = random(dt, {2001}, -1, 1);
  Tensor dyLarge = random(dt, {6}, -1, 1);
  Tensor dy = random(dt, {3, 5, 67}, -1, 1);
  Tensor dyRow = random(dt, {67}, -1, 1);
  CHECK_KERNEL(tol, silu, Tensor(dt, {2001}), range);
  CHECK_KERNEL(tol, silu, Tensor(dt, {6}), large);
  CHECK_KERNEL(tol, silu, Tensor(dt, {3, 5, 67}), x);
  CHECK_KERNEL(tol, silu_backward, Tensor(dt, {2001}), dyRange, range);
  CHECK_KERNEL(tol, silu_backward, Tensor(dt, {6}), dyLarge, large);
  CHECK_KERNEL(tol, silu_backward, Tensor(dt, {3, 5, 67}), dy, x);
  CHECK_KERNEL(tol, silu_backward, Tensor(dt, {3, 5, 67}), dyRow, x);
}

/// The language models' pointwise kernels of dtype `dt` within `tol`:
/// transcendental unary ops (log and rsqrt on positive values), sigmoid and
/// its backward, sub.Scalar, minimum, pow.Tensor_Tensor, and the comparisons
/// with a Scalar and of two tensors (of `dt` against i64, promoted),
/// broadcasting.
void checkLanguageModelPointwise(DType dt, Tol tol) {
  Tensor x = random(dt, {3, 5, 67}, -6, 6);
  Tensor positive = random(dt, {3, 5, 67}, 0.01, 8);
  Tensor row = random(dt, {67}, -6, 6);
  const Shape shape = {3, 5, 67};
  CHECK_KERNEL(tol, exp, Tensor(dt, shape), x);
  CHECK_KERNEL(tol, log, Tensor(dt, shape), positive);
  CHECK_KERNEL(tol, rsqrt, Tensor(dt, shape), positive);
  CHECK_KERNEL(tol, cos, Tensor(dt, shape), x);
  CHECK_KERNEL(tol, sin, Tensor(dt, shape), x);
  CHECK_KERNEL(tol, log1p, Tensor(dt, shape), positive);
  CHECK_KERNEL(tol, expm1, Tensor(dt, shape), x);
  CHECK_KERNEL(tol, floor, Tensor(dt, shape), x);
  CHECK_KERNEL(tol, ceil, Tensor(dt, shape), x);
  CHECK_KERNEL(tol, trunc, Tensor(dt, shape), x);
  CHECK_KERNEL(tol, round, Tensor(dt, shape), x);
  CHECK_KERNEL(tol, sign, Tensor(dt, shape), x);
  CHECK_KERNEL(tol, fmod_tensor, Tensor(dt, shape), x, positive);
  CHECK_KERNEL(tol, remainder_tensor, Tensor(dt, shape), x, row);
  CHECK_KERNEL(tol, sigmoid, Tensor(dt, shape), x);
  CHECK_KERNEL(tol, sigmoid_backward, Tensor(dt, shape), row, positive);
  CHECK_KERNEL(tol, sub_scalar, Tensor(dt, shape), x, 0.5, 2.0);
  CHECK_KERNEL(tol, minimum, Tensor(dt, shape), x, row);
  CHECK_KERNEL(tol, pow_tensor_tensor, Tensor(dt, shape), positive, row);
  CHECK_KERNEL(kExact, ne_scalar, Tensor(SPMD_I1, shape), x, 0.0);
  CHECK_KERNEL(kExact, lt_scalar, Tensor(SPMD_I1, shape), x, 0.5);
  CHECK_KERNEL(kExact, le_scalar, Tensor(SPMD_I1, shape), x, -0.5);
  CHECK_KERNEL(kExact, gt_scalar, Tensor(SPMD_I1, shape), x, 1.0);
  CHECK_KERNEL(kExact, ge_scalar, Tensor(SPMD_I1, shape), x, -1.0);
  Tensor ints = random(SPMD_I64, {67}, -6, 6);
  CHECK_KERNEL(kExact, eq_tensor, Tensor(SPMD_I1, shape), x, x);
  CHECK_KERNEL(kExact, ne_tensor, Tensor(SPMD_I1, shape), x, row);
  CHECK_KERNEL(kExact, lt_tensor, Tensor(SPMD_I1, shape), x, ints);
  CHECK_KERNEL(kExact, le_tensor, Tensor(SPMD_I1, shape), ints, x);
  CHECK_KERNEL(kExact, gt_tensor, Tensor(SPMD_I1, shape), x, row);
  CHECK_KERNEL(kExact, ge_tensor, Tensor(SPMD_I1, shape), row, x);
}

TEST_F(CudaKernels, LanguageModelPointwise) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkLanguageModelPointwise(dt, kElementwise);
  }
  // Integers and bools: bitwise ops, comparisons, minimum, sub.Scalar.
  Tensor a = random(SPMD_I64, {3, 5, 67}, -50, 50);
  Tensor b = random(SPMD_I64, {5, 1}, -50, 50);
  Tensor p = random(SPMD_I1, {3, 5, 67}, 0, 1), q = random(SPMD_I1, {67}, 0, 1);
  const Shape shape = {3, 5, 67};
  CHECK_KERNEL(kExact, bitwise_and, Tensor(SPMD_I64, shape), a, b);
  CHECK_KERNEL(kExact, bitwise_or, Tensor(SPMD_I64, shape), a, b);
  CHECK_KERNEL(kExact, bitwise_and, Tensor(SPMD_I1, shape), p, q);
  CHECK_KERNEL(kExact, bitwise_or, Tensor(SPMD_I1, shape), p, q);
  CHECK_KERNEL(kExact, minimum, Tensor(SPMD_I64, shape), a, b);
  CHECK_KERNEL(kExact, fmod_tensor, Tensor(SPMD_I64, shape), a, b);
  CHECK_KERNEL(kExact, remainder_tensor, Tensor(SPMD_I64, shape), a, b);
  CHECK_KERNEL(kExact, floor, Tensor(SPMD_I64, shape), a);
  CHECK_KERNEL(kExact, sign, Tensor(SPMD_I64, shape), a);
  Tensor small = random(SPMD_I64, {5, 1}, 0, 4);
  CHECK_KERNEL(kExact, pow_tensor_tensor, Tensor(SPMD_I64, shape), a, small);
  CHECK_KERNEL(kExact, sub_scalar, Tensor(SPMD_I64, shape), a, 1.0, 1.0);
  CHECK_KERNEL(kExact, eq_tensor, Tensor(SPMD_I1, shape), a, b);
  CHECK_KERNEL(kExact, le_tensor, Tensor(SPMD_I1, shape), p, q);
  CHECK_KERNEL(kExact, ne_scalar, Tensor(SPMD_I1, shape), a, 1.0);
}

TEST_F(CudaKernels, Silu) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkSilu(dt, kElementwise);
  }
}

//===----------------------------------------------------------------------===//
// Copies, expand, permute, cat, slice, local_take, triu, factories
//===----------------------------------------------------------------------===//

TEST_F(CudaKernels, CopyConvertsAndReshapes) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor f = random(SPMD_F32, {3, 5, 7}, -100, 100);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_F32, {7, 15}), f);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_F32, {105}), f);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I64, {3, 5, 7}), f); // truncates
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I32, {3, 35}), f);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_F64, {3, 5, 7}), f);
  // To i1: nonzero is true (NaN included, -0 not).
  Tensor special = generate(SPMD_F32, {8}, [&](int64_t i) {
    const double v[] = {0.0, -0.0, 0.5, -2.0, nan, 1e-30, 1.0, 0.0};
    return v[i];
  });
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I1, {8}), special);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I1, {2, 4}), special);
  Tensor sparse = generate(SPMD_F32, {3, 5, 7},
                           [](int64_t i) { return i % 3 ? 0.0 : 0.25 * i; });
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I1, {3, 5, 7}), sparse);
  Tensor i = random(SPMD_I64, {3, 5, 7}, -100000, 100000);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_F32, {3, 5, 7}), i);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I32, {35, 3}), i);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I64, {5, 21}), i);
  Tensor j = random(SPMD_I32, {3, 5, 7}, -100000, 100000);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I64, {3, 5, 7}), j);
  Tensor mask = random(SPMD_I1, {3, 5, 7}, 0, 1);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_F32, {3, 5, 7}), mask);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I64, {3, 5, 7}), mask);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I1, {105}), mask);
  Tensor d = random(SPMD_F64, {3, 5, 7}, -1, 1);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_F32, {3, 5, 7}), d); // rounds
  Tensor large = random(SPMD_F32, {1000003}, -1, 1);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_F32, {1000003}), large);
}

/// Contiguous ops into `dt` on sizes below one vector, a whole number of
/// vectors and whole vectors plus a tail (16 bytes: 4 f32, 8 bf16), and a
/// cast of f64 into `dt` within `castTol` (a vector of 8-byte elements).
void checkVectorizedContiguous(DType dt, Tol tol, Tol castTol) {
  for (int64_t n : {5, 64, 1000003}) {
    SCOPED_TRACE(n);
    Tensor a = random(dt, {n}, -1, 1), b = random(dt, {n}, -1, 1);
    Tensor c = random(dt, {n}, -1, 1);
    CHECK_KERNEL(tol, neg, Tensor(dt, {n}), a);
    CHECK_KERNEL(tol, add_tensor, Tensor(dt, {n}), a, b, 0.5);
    CHECK_KERNEL(tol, addcmul, Tensor(dt, {n}), a, b, c, -2.0);
    CHECK_KERNEL(kExact, copy, Tensor(SPMD_F64, {n}), a);
    Tensor wide = random(SPMD_F64, {n}, -1, 1);
    CHECK_KERNEL(castTol, copy, Tensor(dt, {n}), wide);
  }
}

/// `b`'s elements [offset, offset + count) as a flat buffer over its data
/// (not owning it): an odd offset breaks the device data's 16-byte
/// alignment.
SpmdBuffer flatSlice(SpmdBuffer *b, int64_t offset, int64_t count) {
  SpmdBuffer s = *b;
  s.rank = 1;
  s.shape[0] = s.numel = count;
  s.data = static_cast<char *>(b->data) + offset * spmd_rt_dtype_size(b->dtype);
  return s;
}

/// Contiguous ops into `dt` whose out or inputs are not 16-byte aligned
/// (the one-element kernel), within `tol`; casts into `dt` within
/// `castTol`.
void checkMisalignedContiguous(DType dt, Tol tol, Tol castTol) {
  const int64_t n = 1003, count = n - 3;
  Tensor a = random(dt, {n}, -1, 1), b = random(dt, {n}, -1, 1);
  Tensor wide = random(SPMD_F64, {n}, -1, 1);
  // Offsets in elements of out, a (or wide) and b.
  const int64_t shifts[][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 3}, {2, 2, 2}};
  for (const auto &shift : shifts) {
    SCOPED_TRACE("offsets " + std::to_string(shift[0]) + ", " +
                 std::to_string(shift[1]) + ", " + std::to_string(shift[2]));
    auto slices = [&](Tensor &t, int64_t offset) {
      return std::make_pair(flatSlice(t.host(), offset, count),
                            flatSlice(t.device(), offset, count));
    };
    // Zeros on both sides, where the kernels leave them.
    Tensor out = generate(dt, {n}, [](int64_t) { return 0.0; });
    auto [hostOut, devOut] = slices(out, shift[0]);
    auto [hostA, devA] = slices(a, shift[1]);
    auto [hostB, devB] = slices(b, shift[2]);
    spmd::rt::cpu::spmd_rt_add_tensor(&hostOut, &hostA, &hostB, 0.5);
    spmd_rt_add_tensor(&devOut, &devA, &devB, 0.5);
    EXPECT_MATCH(out, tol);
    Tensor cast = generate(dt, {n}, [](int64_t) { return 0.0; });
    auto [hostCast, devCast] = slices(cast, shift[0]);
    auto [hostWide, devWide] = slices(wide, shift[1]);
    spmd::rt::cpu::spmd_rt_copy(&hostCast, &hostWide);
    spmd_rt_copy(&devCast, &devWide);
    EXPECT_MATCH(cast, castTol);
  }
}

TEST_F(CudaKernels, ContiguousVectorsTailsAndMisalignment) {
  checkVectorizedContiguous(SPMD_F32, kElementwise, kExact);
  checkMisalignedContiguous(SPMD_F32, kElementwise, kExact);
}

TEST_F(CudaKernels, Expand) {
  Tensor row = random(SPMD_F32, {7}, -1, 1);
  CHECK_KERNEL(kExact, expand, Tensor(SPMD_F32, {3, 5, 7}), row);
  Tensor col = random(SPMD_F32, {3, 1, 7}, -1, 1);
  CHECK_KERNEL(kExact, expand, Tensor(SPMD_F32, {3, 5, 7}), col);
  Tensor scalar = random(SPMD_F64, {}, -1, 1);
  CHECK_KERNEL(kExact, expand, Tensor(SPMD_F64, {3, 5, 7}), scalar);
  Tensor one = random(SPMD_I64, {1}, -9, 9);
  CHECK_KERNEL(kExact, expand, Tensor(SPMD_I64, {4, 4}), one);
  Tensor inner = random(SPMD_I64, {5, 1}, -9, 9);
  CHECK_KERNEL(kExact, expand, Tensor(SPMD_I64, {2, 3, 5, 4}), inner);
  Tensor mask = random(SPMD_I1, {1, 7}, 0, 1);
  CHECK_KERNEL(kExact, expand, Tensor(SPMD_I1, {3, 7}), mask);
  Tensor sparse = random(SPMD_F32, {2, 1, 4, 1}, -1, 1);
  CHECK_KERNEL(kExact, expand, Tensor(SPMD_F32, {2, 3, 4, 5}), sparse);
  // An i64 input expanded into f32.
  CHECK_KERNEL(kExact, expand, Tensor(SPMD_F32, {3, 5, 4}), inner);
  Tensor bigRow = random(SPMD_F32, {1030}, -1, 1);
  CHECK_KERNEL(kExact, expand, Tensor(SPMD_F32, {2048, 1030}), bigRow);
}

/// permutes of dtype `dt` that take the tiled transpose (out's innermost dim
/// is not self's): edge tiles, batch dims outside and between the two
/// transposed dims, and a size-1 dim.
void checkTiledTransposes(DType dt) {
  static constexpr int64_t kSwapInner[] = {0, 1, 3, 2};
  static constexpr int64_t kReverse4[] = {3, 1, 2, 0};
  static constexpr int64_t kReverse3[] = {2, 1, 0};
  static constexpr int64_t kCycle3[] = {1, 2, 0};
  Tensor heads = random(dt, {2, 3, 50, 37}, -100, 100);
  CHECK_KERNEL(kExact, permute, Tensor(dt, {2, 3, 37, 50}), heads, 4,
               kSwapInner);
  Tensor unit = random(dt, {33, 4, 1, 65}, -100, 100);
  CHECK_KERNEL(kExact, permute, Tensor(dt, {65, 4, 1, 33}), unit, 4, kReverse4);
  Tensor between = random(dt, {40, 3, 100}, -100, 100);
  CHECK_KERNEL(kExact, permute, Tensor(dt, {100, 3, 40}), between, 3,
               kReverse3);
  Tensor merged = random(dt, {64, 9, 32}, -100, 100);
  CHECK_KERNEL(kExact, permute, Tensor(dt, {9, 32, 64}), merged, 3, kCycle3);
}

TEST_F(CudaKernels, Permute) {
  static constexpr int64_t kHeads[] = {0, 2, 1, 3};
  static constexpr int64_t kMix4[] = {3, 1, 0, 2};
  static constexpr int64_t kRotate3[] = {2, 0, 1};
  static constexpr int64_t kCycle3[] = {1, 2, 0};
  static constexpr int64_t kSwap3[] = {0, 2, 1};
  static constexpr int64_t kTranspose[] = {1, 0};
  static constexpr int64_t kIdentity[] = {0, 1, 2};
  Tensor x4 = random(SPMD_F32, {2, 3, 4, 5}, -1, 1);
  CHECK_KERNEL(kExact, permute, Tensor(SPMD_F32, {2, 4, 3, 5}), x4, 4, kHeads);
  CHECK_KERNEL(kExact, permute, Tensor(SPMD_F32, {5, 3, 2, 4}), x4, 4, kMix4);
  Tensor i3 = random(SPMD_I64, {3, 5, 7}, -1000, 1000);
  CHECK_KERNEL(kExact, permute, Tensor(SPMD_I64, {7, 3, 5}), i3, 3, kRotate3);
  CHECK_KERNEL(kExact, permute, Tensor(SPMD_I64, {3, 5, 7}), i3, 3, kIdentity);
  Tensor d3 = random(SPMD_F64, {4, 1, 3}, -1, 1);
  CHECK_KERNEL(kExact, permute, Tensor(SPMD_F64, {1, 3, 4}), d3, 3, kCycle3);
  Tensor mask = random(SPMD_I1, {5, 7}, 0, 1);
  CHECK_KERNEL(kExact, permute, Tensor(SPMD_I1, {7, 5}), mask, 2, kTranspose);
  // Transposes larger than a tile in both dims, odd sizes.
  Tensor t = random(SPMD_F32, {70, 45}, -1, 1);
  CHECK_KERNEL(kExact, permute, Tensor(SPMD_F32, {45, 70}), t, 2, kTranspose);
  Tensor wide = random(SPMD_F32, {1030, 257}, -1, 1);
  CHECK_KERNEL(kExact, permute, Tensor(SPMD_F32, {257, 1030}), wide, 2,
               kTranspose);
  Tensor batched = random(SPMD_F32, {3, 40, 33}, -1, 1);
  CHECK_KERNEL(kExact, permute, Tensor(SPMD_F32, {3, 33, 40}), batched, 3,
               kSwap3);
  // An i32 input permuted into i64.
  Tensor j3 = random(SPMD_I32, {3, 5, 7}, -1000, 1000);
  CHECK_KERNEL(kExact, permute, Tensor(SPMD_I64, {5, 7, 3}), j3, 3, kCycle3);
  for (int32_t dt : {SPMD_F32, SPMD_F64, SPMD_I64, SPMD_I1}) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkTiledTransposes(dt);
  }
}

/// cat of dtype `dt` on a middle dim, of large pieces ([64, 1000, 3] on both
/// sides of a [64, 7, 3]).
void checkLargeCat(DType dt) {
  Tensor h = random(dt, {64, 1000, 3}, -1, 1);
  Tensor k = random(dt, {64, 7, 3}, -1, 1);
  TensorList large = {&h, &k, &h};
  CHECK_KERNEL(kExact, cat, Tensor(dt, {64, 2007, 3}), 3, large, 1);
}

/// slice of dtype `dt` on every dim of a 3-D tensor, with a size-1 piece.
void checkSliceEveryDim(DType dt) {
  Tensor self = random(dt, {3, 10, 7}, -1, 1);
  CHECK_KERNEL(kExact, slice, Tensor(dt, {3, 5, 7}), self, 1, 2, 1);
  CHECK_KERNEL(kExact, slice, Tensor(dt, {2, 10, 7}), self, 0, 1, 1);
  CHECK_KERNEL(kExact, slice, Tensor(dt, {3, 10, 1}), self, 2, 6, 1);
  CHECK_KERNEL(kExact, slice, Tensor(dt, {3, 10, 3}), self, 2, 0, 1);
  // With a step (slice.Tensor's self[..., 1::3]).
  CHECK_KERNEL(kExact, slice, Tensor(dt, {3, 3, 7}), self, 1, 1, 3);
}

TEST_F(CudaKernels, CatAndSlice) {
  // Three inputs on a middle dim.
  for (int32_t dt : {SPMD_F32, SPMD_F64, SPMD_I64, SPMD_I1}) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    Tensor a = random(dt, {2, 3, 4}, -100, 100);
    Tensor b = random(dt, {2, 1, 4}, -100, 100);
    Tensor c = random(dt, {2, 5, 4}, -100, 100);
    TensorList inputs = {&a, &b, &c};
    CHECK_KERNEL(kExact, cat, Tensor(dt, {2, 9, 4}), 3, inputs, 1);
  }
  // The first and the last dim; an i32 input converted into i64.
  Tensor a = random(SPMD_F32, {1, 5}, -1, 1);
  Tensor b = random(SPMD_F32, {3, 5}, -1, 1);
  Tensor c = random(SPMD_F32, {2, 5}, -1, 1);
  TensorList rows = {&a, &b, &c};
  CHECK_KERNEL(kExact, cat, Tensor(SPMD_F32, {6, 5}), 3, rows, 0);
  Tensor e = random(SPMD_I64, {3, 2}, -100, 100);
  Tensor f = random(SPMD_I32, {3, 1}, -100, 100);
  Tensor g = random(SPMD_I64, {3, 4}, -100, 100);
  TensorList cols = {&e, &f, &g};
  CHECK_KERNEL(kExact, cat, Tensor(SPMD_I64, {3, 7}), 3, cols, 1);
  checkLargeCat(SPMD_F32);

  checkSliceEveryDim(SPMD_F32);
  Tensor ints = random(SPMD_I64, {4, 6}, -100, 100);
  CHECK_KERNEL(kExact, slice, Tensor(SPMD_I64, {4, 3}), ints, 1, 3, 1);
  Tensor mask = random(SPMD_I1, {4, 6}, 0, 1);
  CHECK_KERNEL(kExact, slice, Tensor(SPMD_I1, {1, 6}), mask, 0, 3, 1);
  // An i32 input sliced into i64.
  Tensor j = random(SPMD_I32, {4, 6}, -100, 100);
  CHECK_KERNEL(kExact, slice, Tensor(SPMD_I64, {4, 2}), j, 1, 4, 1);
  Tensor big = random(SPMD_F32, {2048, 1030}, -1, 1);
  CHECK_KERNEL(kExact, slice, Tensor(SPMD_F32, {2048, 515}), big, 1, 515, 1);
}

// Tables of spmd.local_take (one row per rank; this job has 1 rank). The
// CUDA backend caches host tables by address, as the lowering passes
// constants: they must be constants here too.
constexpr int64_t kTakeMiddle[] = {4, -1, 0, 5, 2};
constexpr int64_t kTakeFirst[] = {5, 5, -1, 1};
constexpr int64_t kTakeLast[] = {-1, 2, 0};
constexpr int64_t kTakeGrow[] = {1, 0, -1, -1, 1};
constexpr int64_t kRunStart1[] = {1};
constexpr int64_t kRunCount3[] = {3};
constexpr int64_t kRunStart2[] = {2};
constexpr int64_t kRunCount4[] = {4};
constexpr int64_t kRunStart0[] = {0};
constexpr int64_t kRunCount0[] = {0};
// Three runs: positions 4, 5, then one fill, then 0, 1.
constexpr int64_t kRunsStart[] = {4, -1, 0};
constexpr int64_t kRunsCount[] = {2, 1, 2};

TEST_F(CudaKernels, LocalTake) {
  if (spmd_rt_world_size() != 1)
    GTEST_SKIP() << "the tables are written for a 1-rank job";
  Tensor self = random(SPMD_F32, {3, 6, 4}, -1, 1);
  CHECK_KERNEL(kExact, local_take, Tensor(SPMD_F32, {3, 5, 4}), self, 1,
               kTakeMiddle, 0.5);
  Tensor ints = random(SPMD_I64, {6, 3}, -100, 100);
  CHECK_KERNEL(kExact, local_take, Tensor(SPMD_I64, {4, 3}), ints, 0,
               kTakeFirst, -7.0);
  Tensor last = random(SPMD_F64, {2, 3, 6}, -1, 1);
  CHECK_KERNEL(kExact, local_take, Tensor(SPMD_F64, {2, 3, 3}), last, 2,
               kTakeLast, 0.0);
  Tensor narrow = random(SPMD_F32, {3, 2, 4}, -1, 1);
  CHECK_KERNEL(kExact, local_take, Tensor(SPMD_F32, {3, 5, 4}), narrow, 1,
               kTakeGrow, -1.25);
  Tensor mask = random(SPMD_I1, {4, 6}, 0, 1);
  CHECK_KERNEL(kExact, local_take, Tensor(SPMD_I1, {4, 3}), mask, 1, kTakeLast,
               1.0);

  CHECK_KERNEL(kExact, local_take_runs, Tensor(SPMD_F32, {3, 5, 4}), self, 1, 1,
               1, kRunStart1, kRunCount3, -1.5);
  CHECK_KERNEL(kExact, local_take_runs, Tensor(SPMD_F32, {3, 5, 4}), self, 1, 3,
               3, kRunsStart, kRunsCount, 2.5);
  // The same runs for every rank (`uniform`: no per-rank offset). On this
  // one rank it checks the call; other ranks' rows are checked by the
  // multi-rank zoo runs against PyTorch.
  CHECK_KERNEL(kExact, local_take_runs, Tensor(SPMD_F32, {3, 5, 4}), self, 1, 3,
               0, kRunsStart, kRunsCount, 2.5);
  Tensor rows = random(SPMD_I64, {7, 5}, -100, 100);
  CHECK_KERNEL(kExact, local_take_runs, Tensor(SPMD_I64, {4, 5}), rows, 0, 1, 1,
               kRunStart2, kRunCount4, 0.0);
  CHECK_KERNEL(kExact, local_take_runs, Tensor(SPMD_F64, {2, 3, 2}), last, 2, 1,
               1, kRunStart0, kRunCount0, 3.0);
  Tensor big = random(SPMD_F32, {64, 1000, 3}, -1, 1);
  CHECK_KERNEL(kExact, local_take_runs, Tensor(SPMD_F32, {64, 5, 3}), big, 1, 1,
               1, kRunStart1, kRunCount3, 0.0);
}

/// triu of dtype `dt` with diagonals inside and past the matrices.
void checkTriuDiagonals(DType dt) {
  Tensor x = random(dt, {3, 5, 7}, -100, 100);
  for (int64_t diagonal : {0, 2, -1, -3, 10, -10}) {
    SCOPED_TRACE("diagonal " + std::to_string(diagonal));
    CHECK_KERNEL(kExact, triu, Tensor(dt, {3, 5, 7}), x, diagonal);
  }
}

/// triu of dtype `dt` on a batch of 65 x 65 matrices, above and below the
/// diagonal.
void checkLargeTriu(DType dt) {
  Tensor square = random(dt, {2, 2, 65, 65}, -1, 1);
  CHECK_KERNEL(kExact, triu, Tensor(dt, {2, 2, 65, 65}), square, 1);
  CHECK_KERNEL(kExact, triu, Tensor(dt, {2, 2, 65, 65}), square, -7);
}

/// arange into 105 elements of dtype `dt` (exact) and into 1000003, within
/// `largeTol`.
void checkArange(DType dt, Tol largeTol) {
  Tensor small(dt, {3, 5, 7});
  RUN_BOTH(arange, small, 0.0, 1.0);
  EXPECT_MATCH(small, kExact);
  Tensor large(dt, {1000003});
  RUN_BOTH(arange, large, 0.0, 1.0);
  EXPECT_MATCH(large, largeTol);
  // arange.start_step.
  Tensor stepped(dt, {33});
  RUN_BOTH(arange, stepped, -4.0, 0.25);
  EXPECT_MATCH(stepped, kExact);
}

TEST_F(CudaKernels, TriuFillArange) {
  for (int32_t dt : {SPMD_F32, SPMD_F64, SPMD_I64, SPMD_I1}) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkTriuDiagonals(dt);
  }
  checkLargeTriu(SPMD_F32);
  // An i64 input into f32.
  Tensor ints = random(SPMD_I64, {6, 4}, -100, 100);
  CHECK_KERNEL(kExact, triu, Tensor(SPMD_F32, {6, 4}), ints, -2);

  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_KERNEL(kExact, fill, Tensor(SPMD_F32, {3, 5, 7}), 2.5);
  CHECK_KERNEL(kExact, fill, Tensor(SPMD_F32, {3, 5, 7}), 0.1);
  CHECK_KERNEL(kExact, fill, Tensor(SPMD_F32, {4}), nan);
  CHECK_KERNEL(kExact, fill, Tensor(SPMD_F64, {3, 5, 7}), 0.1);
  CHECK_KERNEL(kExact, fill, Tensor(SPMD_I64, {3, 5, 7}), -7.0);
  CHECK_KERNEL(kExact, fill, Tensor(SPMD_I32, {3, 5, 7}), 123.0);
  CHECK_KERNEL(kExact, fill, Tensor(SPMD_I1, {3, 5, 7}), 1.0);
  CHECK_KERNEL(kExact, fill, Tensor(SPMD_I1, {3, 5, 7}), 0.0);
  CHECK_KERNEL(kExact, fill, Tensor(SPMD_I1, {3, 5, 7}), 2.5);
  CHECK_KERNEL(kExact, fill, Tensor(SPMD_F32, {}), -3.25);
  CHECK_KERNEL(kExact, fill, Tensor(SPMD_F32, {1000003}), -3.25);

  // 1000003 is below 2^24: exact in f32.
  for (int32_t dt : {SPMD_F32, SPMD_F64, SPMD_I64, SPMD_I32}) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkArange(dt, kExact);
  }
}

//===----------------------------------------------------------------------===//
// slice_scatter, constant_pad_nd, cumsum, gather, index
//===----------------------------------------------------------------------===//

/// slice_scatter of dtype `dt` into a [3, 10, 7] self along every dim, with
/// steps 1 and 2, a src as large as self and an empty one, then into a
/// [2048, 1030] self.
void checkSliceScatter(DType dt) {
  struct Case {
    Shape src;
    int64_t dim, start, step;
  };
  const Shape shape = {3, 10, 7};
  Tensor self = random(dt, shape, -100, 100);
  const Case cases[] = {
      {{3, 4, 7}, 1, 2, 1},  {{3, 5, 7}, 1, 0, 2},  {{3, 4, 7}, 1, 3, 2},
      {{1, 10, 7}, 0, 2, 1}, {{2, 10, 7}, 0, 0, 2}, {{3, 10, 3}, 2, 4, 1},
      {{3, 10, 4}, 2, 0, 2}, {{3, 10, 7}, 1, 0, 1}, {{3, 0, 7}, 1, 5, 1},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE("src " + shapeString(c.src) + " dim " + std::to_string(c.dim) +
                 " start " + std::to_string(c.start) + " step " +
                 std::to_string(c.step));
    Tensor src = random(dt, c.src, -100, 100);
    CHECK_KERNEL(kExact, slice_scatter, Tensor(dt, shape), self, src, c.dim,
                 c.start, c.step);
  }
  Tensor big = random(dt, {2048, 1030}, -1, 1);
  Tensor half = random(dt, {2048, 515}, -1, 1);
  CHECK_KERNEL(kExact, slice_scatter, Tensor(dt, {2048, 1030}), big, half, 1, 1,
               1);
  CHECK_KERNEL(kExact, slice_scatter, Tensor(dt, {2048, 1030}), big, half, 1, 0,
               2);
}

// constant_pad_nd's pads, (before, after) for the last dim, then the one
// before it, ...; negative ones crop. Host tables: constants, as the
// lowering passes them.
constexpr int64_t kPadLast[] = {1, 2};
constexpr int64_t kPadLastTwo[] = {2, 0, 1, 3};
constexpr int64_t kCropLast[] = {-2, -1};
constexpr int64_t kPadAndCrop[] = {-1, 2, 3, -2};
constexpr int64_t kPadEveryDim[] = {1, 1, 0, 0, 2, 0};

/// constant_pad_nd of dtype `dt` within `tol` (the fill value converted to
/// dt; integers: truncated, i1: nonzero): the last dim, the last two,
/// crops, crops and pads together, every dim, and a large self.
void checkConstantPad(DType dt, Tol tol) {
  const double inf = std::numeric_limits<double>::infinity();
  // -inf (an attention mask's padding) does not convert to an integer.
  const double far = isFloat(dt.host) ? -inf : -7.0;
  Tensor self = random(dt, {3, 5, 7}, -100, 100);
  CHECK_KERNEL(tol, constant_pad_nd, Tensor(dt, {3, 5, 10}), self, 2, kPadLast,
               0.0);
  CHECK_KERNEL(tol, constant_pad_nd, Tensor(dt, {3, 9, 9}), self, 4,
               kPadLastTwo, -1.5);
  CHECK_KERNEL(tol, constant_pad_nd, Tensor(dt, {3, 5, 4}), self, 2, kCropLast,
               0.0);
  CHECK_KERNEL(tol, constant_pad_nd, Tensor(dt, {3, 6, 8}), self, 4,
               kPadAndCrop, 0.1);
  CHECK_KERNEL(tol, constant_pad_nd, Tensor(dt, {5, 5, 9}), self, 6,
               kPadEveryDim, far);
  Tensor big = random(dt, {2048, 1030}, -1, 1);
  CHECK_KERNEL(tol, constant_pad_nd, Tensor(dt, {2048, 1033}), big, 2, kPadLast,
               2.0);
  CHECK_KERNEL(tol, constant_pad_nd, Tensor(dt, {2052, 1032}), big, 4,
               kPadLastTwo, -1.0);
  CHECK_KERNEL(tol, constant_pad_nd, Tensor(dt, {2048, 1027}), big, 2,
               kCropLast, 0.0);
}

/// cumsum of dtype `dt` along each dim of a [3, 5, 7] tensor and along
/// 3000 elements (the last, the first and a middle dim), and 100003
/// positive ones, within `sumTolOf` of the number of terms (the CPU sums
/// floats in double).
void checkCumsum(DType dt, SumTolFn sumTolOf) {
  Tensor x = random(dt, {3, 5, 7}, -1, 1);
  for (int64_t dim : {0, 1, 2}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    CHECK_KERNEL(sumTolOf(7, 1), cumsum, Tensor(dt, {3, 5, 7}), x, dim);
  }
  const int64_t n = 3000;
  Tensor rows = random(dt, {4, n}, -1, 1);
  CHECK_KERNEL(sumTolOf(n, 1), cumsum, Tensor(dt, {4, n}), rows, 1);
  Tensor cols = random(dt, {n, 5}, -1, 1);
  CHECK_KERNEL(sumTolOf(n, 1), cumsum, Tensor(dt, {n, 5}), cols, 0);
  Tensor middle = random(dt, {4, n, 9}, -1, 1);
  CHECK_KERNEL(sumTolOf(n, 1), cumsum, Tensor(dt, {4, n, 9}), middle, 1);
  Tensor positive = random(dt, {3, n}, 0, 1);
  CHECK_KERNEL(sumTolOf(n, 1), cumsum, Tensor(dt, {3, n}), positive, 1);
  Tensor longRow = random(dt, {100003}, 0, 1);
  CHECK_KERNEL(sumTolOf(100003, 1), cumsum, Tensor(dt, {100003}), longRow, 0);
}

/// gather of dtype `dt` from a [3, 5, 7] self along the first, the middle
/// and the last dim, with i64 and i32 indices (negative ones count from the
/// end), indices smaller than self outside `dim`, and from a large self.
void checkGather(DType dt) {
  Tensor self = random(dt, {3, 5, 7}, -100, 100);
  Tensor first = random(SPMD_I64, {4, 5, 7}, -3, 2);
  CHECK_KERNEL(kExact, gather, Tensor(dt, {4, 5, 7}), self, 0, first);
  Tensor last = random(SPMD_I64, {3, 5, 11}, -7, 6);
  CHECK_KERNEL(kExact, gather, Tensor(dt, {3, 5, 11}), self, 2, last);
  Tensor smaller = random(SPMD_I64, {2, 3, 4}, -5, 4);
  CHECK_KERNEL(kExact, gather, Tensor(dt, {2, 3, 4}), self, 1, smaller);
  Tensor narrow = random(SPMD_I32, {3, 2, 5}, -7, 6);
  CHECK_KERNEL(kExact, gather, Tensor(dt, {3, 2, 5}), self, 2, narrow);
  // A label per row (log_probs.gather(-1, labels.unsqueeze(-1))).
  Tensor labels = random(SPMD_I64, {3, 5, 1}, -7, 6);
  CHECK_KERNEL(kExact, gather, Tensor(dt, {3, 5, 1}), self, 2, labels);
  Tensor big = random(dt, {2048, 1030}, -1, 1);
  Tensor picks = random(SPMD_I64, {2048, 10}, -1030, 1029);
  CHECK_KERNEL(kExact, gather, Tensor(dt, {2048, 10}), big, 1, picks);
  Tensor rowPicks = random(SPMD_I64, {700, 1030}, -2048, 2047);
  CHECK_KERNEL(kExact, gather, Tensor(dt, {700, 1030}), big, 0, rowPicks);
}

/// index of dtype `dt` on a [5, 6, 7] self: one index (1-D, 2-D, 0-D), two
/// and three broadcasting ones (of lower rank, of size-1 dims, 0-D; i64 and
/// i32), negative indices, and large selves.
void checkIndex(DType dt) {
  Tensor self = random(dt, {5, 6, 7}, -100, 100);
  Tensor rows = random(SPMD_I64, {4}, -5, 4);
  Tensor grid = random(SPMD_I64, {2, 3}, -5, 4);
  Tensor scalar = tensor<int64_t>({}, {-2});
  Tensor cols = random(SPMD_I64, {4}, -6, 5);
  Tensor column = random(SPMD_I64, {3, 1}, -5, 4);
  Tensor row32 = random(SPMD_I32, {1, 4}, -6, 5);
  Tensor cols32 = random(SPMD_I32, {4}, -6, 5);
  Tensor depth = random(SPMD_I64, {4}, -7, 6);
  TensorList one = {&rows};
  CHECK_KERNEL(kExact, index, Tensor(dt, {4, 6, 7}), self, 1, one);
  TensorList oneGrid = {&grid};
  CHECK_KERNEL(kExact, index, Tensor(dt, {2, 3, 6, 7}), self, 1, oneGrid);
  TensorList oneScalar = {&scalar};
  CHECK_KERNEL(kExact, index, Tensor(dt, {6, 7}), self, 1, oneScalar);
  TensorList pair = {&rows, &cols};
  CHECK_KERNEL(kExact, index, Tensor(dt, {4, 7}), self, 2, pair);
  TensorList outer = {&column, &row32};
  CHECK_KERNEL(kExact, index, Tensor(dt, {3, 4, 7}), self, 2, outer);
  TensorList lowerRank = {&column, &cols32};
  CHECK_KERNEL(kExact, index, Tensor(dt, {3, 4, 7}), self, 2, lowerRank);
  TensorList triple = {&column, &scalar, &depth};
  CHECK_KERNEL(kExact, index, Tensor(dt, {3, 4}), self, 3, triple);

  Tensor table = random(dt, {1000, 64}, -1, 1);
  Tensor tokens = random(SPMD_I64, {4096}, -1000, 999);
  TensorList tokenList = {&tokens};
  CHECK_KERNEL(kExact, index, Tensor(dt, {4096, 64}), table, 1, tokenList);
  Tensor cube = random(dt, {50, 40, 300}, -1, 1);
  Tensor first = random(SPMD_I64, {64, 1}, -50, 49);
  Tensor second = random(SPMD_I32, {50}, -40, 39);
  TensorList both = {&first, &second};
  CHECK_KERNEL(kExact, index, Tensor(dt, {64, 50, 300}), cube, 2, both);
}

TEST_F(CudaKernels, SliceScatterPadCumsumGatherIndex) {
  for (int32_t dt : {SPMD_F32, SPMD_F64, SPMD_I64, SPMD_I1}) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkSliceScatter(dt);
    checkConstantPad(dt, kExact);
    checkGather(dt);
    checkIndex(dt);
  }
  // Inputs of other dtypes are converted to out's.
  Tensor self = random(SPMD_F32, {4, 6}, -100, 100);
  Tensor ints = random(SPMD_I64, {4, 3}, -100, 100);
  CHECK_KERNEL(kExact, slice_scatter, Tensor(SPMD_F32, {4, 6}), self, ints, 1,
               0, 2);
  Tensor wide = random(SPMD_F64, {4, 6}, -100, 100);
  Tensor mask = random(SPMD_I1, {1, 6}, 0, 1);
  CHECK_KERNEL(kExact, slice_scatter, Tensor(SPMD_F32, {4, 6}), wide, mask, 0,
               2, 1);
  Tensor selfInts = random(SPMD_I32, {4, 6}, -100, 100);
  Tensor srcInts = random(SPMD_I32, {2, 6}, -100, 100);
  CHECK_KERNEL(kExact, slice_scatter, Tensor(SPMD_I64, {4, 6}), selfInts,
               srcInts, 0, 1, 2);
  Tensor i3 = random(SPMD_I64, {3, 5, 7}, -1000, 1000);
  CHECK_KERNEL(kExact, constant_pad_nd, Tensor(SPMD_F32, {3, 5, 10}), i3, 2,
               kPadLast, 0.5);
  Tensor picks = random(SPMD_I64, {3, 5, 2}, -7, 6);
  CHECK_KERNEL(kExact, gather, Tensor(SPMD_F32, {3, 5, 2}), i3, 2, picks);
  Tensor rows = random(SPMD_I64, {5}, -4, 3);
  TensorList one = {&rows};
  CHECK_KERNEL(kExact, index, Tensor(SPMD_I64, {5, 6}), selfInts, 1, one);

  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkCumsum(dt, sumTol);
  }
  // Integers sum exactly in out's dtype; ATen's cumsum gives i32 and i1
  // selves an i64 result.
  Tensor x = random(SPMD_I64, {3, 5, 7}, -1000, 1000);
  for (int64_t dim : {0, 1, 2})
    CHECK_KERNEL(kExact, cumsum, Tensor(SPMD_I64, {3, 5, 7}), x, dim);
  Tensor longInts = random(SPMD_I64, {4, 3000}, -1000000, 1000000);
  CHECK_KERNEL(kExact, cumsum, Tensor(SPMD_I64, {4, 3000}), longInts, 1);
  Tensor j = random(SPMD_I32, {3000, 5}, -1000, 1000);
  CHECK_KERNEL(kExact, cumsum, Tensor(SPMD_I64, {3000, 5}), j, 0);
  CHECK_KERNEL(kExact, cumsum, Tensor(SPMD_I32, {3000, 5}), j, 0);
  Tensor flags = random(SPMD_I1, {4, 3000}, 0, 1);
  CHECK_KERNEL(kExact, cumsum, Tensor(SPMD_I64, {4, 3000}), flags, 1);
  // Small integers into f32 (cumsum(dtype=float)): every partial sum is
  // exact. f32 into f64: summed in f64.
  Tensor small = random(SPMD_I64, {4, 3000}, -100, 100);
  CHECK_KERNEL(kExact, cumsum, Tensor(SPMD_F32, {4, 3000}), small, 1);
  Tensor f = random(SPMD_F32, {4, 3000}, -1, 1);
  CHECK_KERNEL(sumTol(3000), cumsum, Tensor(SPMD_F64, {4, 3000}), f, 1);
}

//===----------------------------------------------------------------------===//
// Random kernels: the same draws on both backends
//===----------------------------------------------------------------------===//

// Global shapes and offsets of the local pieces (constants, as the lowering
// passes them).
constexpr int64_t kGlobal2[] = {100, 300};
constexpr int64_t kOffset2[] = {13, 50};
constexpr int64_t kGlobal3[] = {4, 10, 33};
constexpr int64_t kOffset3[] = {1, 2, 3};
constexpr int64_t kZero3[] = {0, 0, 0};
constexpr int64_t kGlobal1[] = {2000000};
constexpr int64_t kOffset1[] = {999997};

TEST_F(CudaKernels, BernoulliAndUniformDrawsMatchExactly) {
  spmd_rt_set_seed(20240611);
  for (uint64_t step : {3, 4}) {
    spmd_rt_set_step(step);
    SCOPED_TRACE("step " + std::to_string(step));
    for (int32_t dt : {SPMD_F32, SPMD_F64, SPMD_I64, SPMD_I1}) {
      SCOPED_TRACE(spmd_rt_dtype_name(dt));
      CHECK_KERNEL(kExact, bernoulli_p, Tensor(dt, {37, 129}), 0.3, 11,
                   kGlobal2, kOffset2);
      CHECK_KERNEL(kExact, bernoulli_p, Tensor(dt, {2, 5, 17}), 0.5, 12,
                   kGlobal3, kOffset3);
    }
    CHECK_KERNEL(kExact, bernoulli_p, Tensor(SPMD_F32, {4, 10, 33}), 0.9, 12,
                 kGlobal3, kZero3);
    CHECK_KERNEL(kExact, bernoulli_p, Tensor(SPMD_F32, {37, 129}), 0.0, 11,
                 kGlobal2, kOffset2);
    CHECK_KERNEL(kExact, bernoulli_p, Tensor(SPMD_F32, {37, 129}), 1.0, 11,
                 kGlobal2, kOffset2);
  }
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    CHECK_KERNEL(kExact, uniform_range, Tensor(dt, {37, 129}), -2.0, 3.0, 13,
                 kGlobal2, kOffset2);
    CHECK_KERNEL(kElementwise, exponential, Tensor(dt, {37, 129}), 0.5, 14,
                 kGlobal2, kOffset2);
  }
  // A large piece: the draws are not degenerate, and match bit for bit.
  Tensor large(SPMD_F32, {1000003});
  RUN_BOTH(bernoulli_p, large, 0.3, 7, kGlobal1, kOffset1);
  EXPECT_MATCH(large, kExact);
  int64_t ones = 0;
  for (int64_t i = 0; i < large.numel(); ++i)
    ones += large.get(i) == 1.0;
  EXPECT_NEAR(static_cast<double>(ones) / large.numel(), 0.3, 0.01);
}

/// native_dropout of dtype `dt` (p 0.3, 0 and 1, in training and not; a
/// 3-D piece) with the outputs within `outputTol` and the masks exact, then
/// native_dropout_backward within `gradTol` on the CPU's mask, with each
/// scale of `maskScales`, and on a fractional mask.
void checkNativeDropout(DType dt, Tol outputTol, Tol gradTol,
                        std::initializer_list<double> maskScales) {
  Tensor input = random(dt, {37, 129}, -1, 1);
  for (double p : {0.3, 0.0, 1.0}) {
    for (int64_t train : {1, 0}) {
      SCOPED_TRACE("p " + std::to_string(p) + " train " +
                   std::to_string(train));
      Tensor output(dt, {37, 129});
      Tensor mask(SPMD_I1, {37, 129});
      RUN_BOTH(native_dropout, output, mask, input, p, train, 5, kGlobal2,
               kOffset2);
      EXPECT_MATCH(output, outputTol);
      EXPECT_MATCH(mask, kExact);
    }
  }
  Tensor input3 = random(dt, {2, 5, 17}, -1, 1);
  Tensor output(dt, {2, 5, 17});
  Tensor mask(SPMD_I1, {2, 5, 17});
  RUN_BOTH(native_dropout, output, mask, input3, 0.5, 1, 6, kGlobal3, kOffset3);
  EXPECT_MATCH(output, outputTol);
  EXPECT_MATCH(mask, kExact);

  // The backward, on the CPU's mask.
  Tensor keep = sameValues(mask);
  Tensor grad = random(dt, {2, 5, 17}, -1, 1);
  for (double scale : maskScales)
    CHECK_KERNEL(gradTol, native_dropout_backward, Tensor(dt, {2, 5, 17}), grad,
                 keep, scale);
  Tensor fractional = random(dt, {2, 5, 17}, 0, 1);
  CHECK_KERNEL(gradTol, native_dropout_backward, Tensor(dt, {2, 5, 17}), grad,
               fractional, 1.0 / 0.7);
}

/// native_dropout of 1000003 elements of dtype `dt`: the output within
/// `outputTol`, the mask exact.
void checkLargeNativeDropout(DType dt, Tol outputTol) {
  Tensor large = random(dt, {1000003}, -1, 1);
  Tensor output(dt, {1000003});
  Tensor mask(SPMD_I1, {1000003});
  RUN_BOTH(native_dropout, output, mask, large, 0.1, 1, 8, kGlobal1, kOffset1);
  EXPECT_MATCH(output, outputTol);
  EXPECT_MATCH(mask, kExact);
}

TEST_F(CudaKernels, NativeDropoutMatchesExactly) {
  spmd_rt_set_seed(77);
  spmd_rt_set_step(5);
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    // Both compute input * keep * scale in dt: equal values.
    checkNativeDropout(dt, kExact, kElementwise, {2.0});
  }
  checkLargeNativeDropout(SPMD_F32, kExact);
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// mm, addmm (self broadcast from a row, a column, full, and NaN with beta
/// 0), bmm and baddbmm (self broadcast over the batch, per batch, a row) of
/// dtype `dt`, within `productTol`; `fullAlpha` is that of addmm with a
/// full self.
void checkMmAddmmBmmBaddbmm(DType dt, MatmulTolFn productTol,
                            double fullAlpha) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = random(dt, {37, 53}, -1, 1);
  Tensor b = random(dt, {53, 29}, -1, 1);
  CHECK_KERNEL(productTol(53, 1), mm, Tensor(dt, {37, 29}), a, b);
  Tensor bias = random(dt, {29}, -1, 1);
  Tensor col = random(dt, {37, 1}, -1, 1);
  Tensor full = random(dt, {37, 29}, -1, 1);
  Tensor nanSelf = generate(dt, {1}, [&](int64_t) { return nan; });
  CHECK_KERNEL(productTol(53, 2), addmm, Tensor(dt, {37, 29}), bias, a, b, 0.5,
               2.0);
  CHECK_KERNEL(productTol(53, 1), addmm, Tensor(dt, {37, 29}), col, a, b, 1.0,
               1.0);
  CHECK_KERNEL(productTol(53, 1), addmm, Tensor(dt, {37, 29}), full, a, b, -1.0,
               fullAlpha);
  // beta == 0 ignores self, NaN included (ATen).
  CHECK_KERNEL(productTol(53, 1), addmm, Tensor(dt, {37, 29}), nanSelf, a, b,
               0.0, 1.0);

  Tensor ba = random(dt, {3, 17, 23}, -1, 1);
  Tensor bb = random(dt, {3, 23, 11}, -1, 1);
  CHECK_KERNEL(productTol(23, 1), bmm, Tensor(dt, {3, 17, 11}), ba, bb);
  Tensor shared = random(dt, {17, 11}, -1, 1); // broadcast over the batch
  Tensor perBatch = random(dt, {3, 17, 11}, -1, 1);
  Tensor rowBias = random(dt, {3, 1, 11}, -1, 1);
  CHECK_KERNEL(productTol(23, 0.5), baddbmm, Tensor(dt, {3, 17, 11}), shared,
               ba, bb, 2.0, 0.5);
  CHECK_KERNEL(productTol(23, 1), baddbmm, Tensor(dt, {3, 17, 11}), perBatch,
               ba, bb, 1.0, 1.0);
  CHECK_KERNEL(productTol(23, 3), baddbmm, Tensor(dt, {3, 17, 11}), rowBias, ba,
               bb, -0.5, 3.0);
  CHECK_KERNEL(productTol(23, 1), baddbmm, Tensor(dt, {3, 17, 11}), nanSelf, ba,
               bb, 0.0, 1.0);
}

/// mm and bmm of dtype `dt` on larger, odd sizes (several cuBLAS tiles,
/// ragged edges), within `productTol`.
void checkLargeMmBmm(DType dt, MatmulTolFn productTol) {
  Tensor a = random(dt, {130, 300}, -1, 1);
  Tensor b = random(dt, {300, 257}, -1, 1);
  CHECK_KERNEL(productTol(300, 1), mm, Tensor(dt, {130, 257}), a, b);
  Tensor ba = random(dt, {5, 64, 300}, -1, 1);
  Tensor bb = random(dt, {5, 300, 65}, -1, 1);
  CHECK_KERNEL(productTol(300, 1), bmm, Tensor(dt, {5, 64, 65}), ba, bb);
}

TEST_F(CudaKernels, MmAddmmBmmBaddbmm) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkMmAddmmBmmBaddbmm(dt, matmulTol, 0.5);
  }
  checkLargeMmBmm(SPMD_F32, matmulTol);
}

/// A [batch?, n, k] (stored [batch?, k, n] with transA) times
/// B [batch?, k, m] (stored [batch?, m, k] with transB).
Shape matmulOperand(int64_t batch, int64_t rows, int64_t cols, bool trans) {
  Shape shape = trans ? Shape{cols, rows} : Shape{rows, cols};
  if (batch > 0)
    shape.insert(shape.begin(), batch);
  return shape;
}

/// matmul of dtype `dt` with each operand transposed or not, unbatched and
/// batched, with no self, a row and a full self, within `productTol`; with
/// `nullSelfBeta`, also a nonzero beta without self (ignored).
void checkMatmulTransposedOperands(DType dt, MatmulTolFn productTol,
                                   bool nullSelfBeta) {
  struct Dims {
    int64_t batch, n, k, m;
  };
  for (Dims dims : {Dims{0, 37, 53, 29}, Dims{3, 17, 23, 11}}) {
    SCOPED_TRACE("batch " + std::to_string(dims.batch));
    Shape out = matmulOperand(dims.batch, dims.n, dims.m, false);
    Tensor bias = random(dt, {dims.m}, -1, 1);
    Tensor full = random(dt, out, -1, 1);
    for (int64_t transA : {0, 1}) {
      for (int64_t transB : {0, 1}) {
        SCOPED_TRACE("trans_a " + std::to_string(transA) + " trans_b " +
                     std::to_string(transB));
        Tensor a = random(dt, matmulOperand(dims.batch, dims.n, dims.k, transA),
                          -1, 1);
        Tensor b = random(dt, matmulOperand(dims.batch, dims.k, dims.m, transB),
                          -1, 1);
        Tol tol = productTol(dims.k, 2);
        CHECK_KERNEL(tol, matmul, Tensor(dt, out), nullptr, a, b, 0.0, 1.0,
                     transA, transB);
        // self NULL: beta is ignored.
        if (nullSelfBeta)
          CHECK_KERNEL(tol, matmul, Tensor(dt, out), nullptr, a, b, 3.0, -2.0,
                       transA, transB);
        CHECK_KERNEL(tol, matmul, Tensor(dt, out), bias, a, b, 0.5, 2.0, transA,
                     transB);
        CHECK_KERNEL(tol, matmul, Tensor(dt, out), full, a, b, -1.0, 1.0,
                     transA, transB);
      }
    }
  }
}

/// Attention-like scores of dtype `dt`, within `productTol`: q @ k^T,
/// batched, scaled.
void checkAttentionScores(DType dt, MatmulTolFn productTol) {
  Tensor q = random(dt, {8, 128, 64}, -1, 1);
  Tensor k = random(dt, {8, 130, 64}, -1, 1);
  CHECK_KERNEL(productTol(64, 0.125), matmul, Tensor(dt, {8, 128, 130}),
               nullptr, q, k, 0.0, 0.125, 0, 1);
}

TEST_F(CudaKernels, MatmulTransposedOperands) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkMatmulTransposedOperands(dt, matmulTol, /*nullSelfBeta=*/true);
  }
  checkAttentionScores(SPMD_F32, matmulTol);
}

//===----------------------------------------------------------------------===//
// Sum
//===----------------------------------------------------------------------===//

constexpr int64_t kDim0[] = {0};
constexpr int64_t kDim1[] = {1};
constexpr int64_t kDim2[] = {2};
constexpr int64_t kDims02[] = {0, 2};
constexpr int64_t kDims201[] = {2, 0, 1};
/// BatchNorm's statistics: [N, C, H, W] over N, H and W.
constexpr int64_t kDims023[] = {0, 2, 3};

TEST_F(CudaKernels, SumOverDims) {
  for (int32_t dt : {SPMD_F32, SPMD_F64, SPMD_I64, SPMD_I32}) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    Tensor x = random(dt, {3, 5, 7}, -100, 100);
    Tol tol = isFloat(dt) ? sumTol(105, 100) : kExact;
    CHECK_KERNEL(tol, sum, Tensor(dt, {5, 7}), x, 1, kDim0);
    CHECK_KERNEL(tol, sum, Tensor(dt, {1, 5, 7}), x, 1, kDim0);
    CHECK_KERNEL(tol, sum, Tensor(dt, {3, 7}), x, 1, kDim1);
    CHECK_KERNEL(tol, sum, Tensor(dt, {3, 1, 7}), x, 1, kDim1);
    CHECK_KERNEL(tol, sum, Tensor(dt, {3, 5}), x, 1, kDim2);
    CHECK_KERNEL(tol, sum, Tensor(dt, {3, 5, 1}), x, 1, kDim2);
    CHECK_KERNEL(tol, sum, Tensor(dt, {5}), x, 2, kDims02);
    CHECK_KERNEL(tol, sum, Tensor(dt, {1, 5, 1}), x, 2, kDims02);
    CHECK_KERNEL(tol, sum, Tensor(dt, {}), x, 3, kDims201);
    CHECK_KERNEL(tol, sum, Tensor(dt, {1, 1, 1}), x, 3, kDims201);
    // No dims and a 0-D out: everything; no dims otherwise: a copy.
    CHECK_KERNEL(tol, sum, Tensor(dt, {}), x, 0, nullptr);
    CHECK_KERNEL(tol, sum, Tensor(dt, {3, 5, 7}), x, 0, nullptr);
  }
  // ATen's integer promotion: i32 and i1 sum into i64; f32 into f64.
  Tensor j = random(SPMD_I32, {3, 5, 7}, -1000, 1000);
  CHECK_KERNEL(kExact, sum, Tensor(SPMD_I64, {}), j, 0, nullptr);
  CHECK_KERNEL(kExact, sum, Tensor(SPMD_I64, {3, 7}), j, 1, kDim1);
  Tensor mask = random(SPMD_I1, {3, 5, 7}, 0, 1);
  CHECK_KERNEL(kExact, sum, Tensor(SPMD_I64, {}), mask, 0, nullptr);
  CHECK_KERNEL(kExact, sum, Tensor(SPMD_I64, {5, 7}), mask, 1, kDim0);
  Tensor f = random(SPMD_F32, {3, 5, 7}, -1, 1);
  CHECK_KERNEL(sumTol(105), sum, Tensor(SPMD_F64, {3, 5}), f, 1, kDim2);
  // A 1-element tensor into 0-D.
  Tensor one = random(SPMD_F32, {1}, -1, 1);
  CHECK_KERNEL(kExact, sum, Tensor(SPMD_F32, {}), one, 0, nullptr);
}

/// sum of 1000003 elements of dtype `dt`: positive ones within
/// `positiveTol`, signed ones (which may cancel) within `sumTolOf`.
void checkLongSums(DType dt, Tol positiveTol, SumTolFn sumTolOf) {
  const int64_t n = 1000003;
  Tensor positive = random(dt, {n}, 0, 1);
  CHECK_KERNEL(positiveTol, sum, Tensor(dt, {}), positive, 0, nullptr);
  Tensor signedX = random(dt, {n}, -1, 1);
  CHECK_KERNEL(sumTolOf(n, 1), sum, Tensor(dt, {}), signedX, 0, nullptr);
}

/// sum of dtype `dt` over the rows, the columns and all of a [2048, 1030]
/// matrix, and over the middle and the outer dims of a 3-D tensor, within
/// `sumTolOf`.
void checkSumsOverLargeDims(DType dt, SumTolFn sumTolOf) {
  Tensor m = random(dt, {2048, 1030}, -1, 1);
  CHECK_KERNEL(sumTolOf(2048, 1), sum, Tensor(dt, {1030}), m, 1, kDim0);
  CHECK_KERNEL(sumTolOf(1030, 1), sum, Tensor(dt, {2048}), m, 1, kDim1);
  CHECK_KERNEL(sumTolOf(2048 * 1030, 1), sum, Tensor(dt, {}), m, 0, nullptr);
  Tensor t = random(dt, {64, 1000, 17}, -1, 1);
  CHECK_KERNEL(sumTolOf(1000, 1), sum, Tensor(dt, {64, 17}), t, 1, kDim1);
  CHECK_KERNEL(sumTolOf(64 * 17, 1), sum, Tensor(dt, {1000}), t, 2, kDims02);
  // Several reduced runs, long (a block per output, in chunks) and short.
  Tensor images = random(dt, {32, 24, 28, 28}, -1, 1);
  CHECK_KERNEL(sumTolOf(32 * 28 * 28, 1), sum, Tensor(dt, {24}), images, 3,
               kDims023);
  CHECK_KERNEL(sumTolOf(32 * 28 * 28, 1), sum, Tensor(dt, {1, 24, 1, 1}),
               images, 3, kDims023);
  CHECK_KERNEL(sumTolOf(32 * 28 * 28, 1), mean, Tensor(dt, {1, 24, 1, 1}),
               images, 3, kDims023);
  Tensor small = random(dt, {2, 300, 3, 2}, -1, 1);
  CHECK_KERNEL(sumTolOf(12, 1), sum, Tensor(dt, {300}), small, 3, kDims023);
}

TEST_F(CudaKernels, SumLarge) {
  const int64_t n = 1000003;
  // Small integers in f32: every partial sum is exact (below 2^24), so any
  // summation order gives the CPU's result.
  Tensor counts = random(SPMD_I64, {n}, 0, 3);
  Tensor integral(SPMD_F32, {n});
  for (int64_t i = 0; i < n; ++i)
    integral.set(i, counts.get(i));
  integral.upload();
  CHECK_KERNEL(kExact, sum, Tensor(SPMD_F32, {}), integral, 0, nullptr);
  CHECK_KERNEL(kExact, sum, Tensor(SPMD_F32, {}), integral, 1, kDim0);
  CHECK_KERNEL(kExact, sum, Tensor(SPMD_I64, {}), counts, 0, nullptr);
  Tensor ints = random(SPMD_I64, {n}, -1000000, 1000000);
  CHECK_KERNEL(kExact, sum, Tensor(SPMD_I64, {}), ints, 0, nullptr);
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkLongSums(dt, kReduction, sumTol);
  }
  checkSumsOverLargeDims(SPMD_F32, sumTol);
}

/// The truth-valued kernels (computed in the input's dtype, stored as i1),
/// where and lerp on inputs of dtype `dt`, broadcasting.
void checkTruthWhereLerp(DType dt, Tol lerpTol) {
  Tensor x = random(dt, {6, 1, 33}, -3, 3);
  CHECK_KERNEL(kExact, eq_scalar, Tensor(SPMD_I1, {6, 1, 33}), x, 0.0);
  Tensor ints = random(SPMD_I64, {6, 1, 33}, -2, 2);
  CHECK_KERNEL(kExact, eq_scalar, Tensor(SPMD_I1, {6, 1, 33}), ints, 1.0);
  CHECK_KERNEL(kExact, eq_scalar, Tensor(SPMD_I1, {6, 1, 33}), ints, 0.5);
  CHECK_KERNEL(kExact, logical_not, Tensor(SPMD_I1, {6, 1, 33}), ints);
  CHECK_KERNEL(kExact, logical_not, Tensor(SPMD_I1, {6, 1, 33}), x);
  Tensor mask = random(SPMD_I1, {5, 33}, 0, 1);
  Tensor y = random(dt, {5, 1}, -1, 1);
  CHECK_KERNEL(kExact, where_self, Tensor(dt, {6, 5, 33}), mask, x, y);
  Tensor a = random(dt, {6, 5, 33}, -1, 1), b = random(dt, {5, 33}, -1, 1);
  CHECK_KERNEL(lerpTol, lerp_scalar, Tensor(dt, {6, 5, 33}), a, b, 0.1);
  CHECK_KERNEL(lerpTol, lerp_scalar, Tensor(dt, {6, 5, 33}), a, b, 0.9);
  Tensor anyOf = random(SPMD_I1, {64, 1000, 17}, 0, 1);
  CHECK_KERNEL(kExact, any, Tensor(SPMD_I1, {64, 17}), anyOf, 1, kDim1);
  CHECK_KERNEL(kExact, any, Tensor(SPMD_I1, {}), x, 0, nullptr);
}

TEST_F(CudaKernels, TruthValuesWhereLerp) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkTruthWhereLerp(dt, kElementwise);
  }
}

/// mean and amax of dtype `dt` on every path of the CUDA reductions: short
/// rows (a warp each), several reduced runs (a thread per output), columns
/// and middle dims (tiles), long reductions (chunks) and no elements (NaN
/// means, maxima the identity: what an empty shard holds). amax picks an
/// element, so it is exact (`maxTol`); mean within `meanTol`.
void checkMeanAndAmax(DType dt, Tol meanTol, Tol maxTol) {
  Tensor x = random(dt, {3, 5, 7}, -100, 100);
  CHECK_KERNEL(meanTol, mean, Tensor(dt, {3, 5}), x, 1, kDim2);
  CHECK_KERNEL(maxTol, amax, Tensor(dt, {3, 5, 1}), x, 1, kDim2);
  CHECK_KERNEL(meanTol, mean, Tensor(dt, {1, 5, 1}), x, 2, kDims02);
  CHECK_KERNEL(maxTol, amax, Tensor(dt, {5}), x, 2, kDims02);
  CHECK_KERNEL(meanTol, mean, Tensor(dt, {}), x, 0, nullptr);
  CHECK_KERNEL(maxTol, amax, Tensor(dt, {}), x, 3, kDims201);
  Tensor m = random(dt, {2048, 1030}, -1, 1);
  CHECK_KERNEL(meanTol, mean, Tensor(dt, {1030}), m, 1, kDim0);
  CHECK_KERNEL(maxTol, amax, Tensor(dt, {1030}), m, 1, kDim0);
  CHECK_KERNEL(meanTol, mean, Tensor(dt, {2048}), m, 1, kDim1);
  CHECK_KERNEL(maxTol, amax, Tensor(dt, {2048}), m, 1, kDim1);
  CHECK_KERNEL(meanTol, mean, Tensor(dt, {}), m, 0, nullptr);
  CHECK_KERNEL(maxTol, amax, Tensor(dt, {}), m, 0, nullptr);
  Tensor t = random(dt, {64, 1000, 17}, -1, 1);
  CHECK_KERNEL(meanTol, mean, Tensor(dt, {64, 1, 17}), t, 1, kDim1);
  CHECK_KERNEL(maxTol, amax, Tensor(dt, {64, 17}), t, 1, kDim1);
  Tensor none = random(dt, {0, 7}, -1, 1);
  CHECK_KERNEL(maxTol, mean, Tensor(dt, {7}), none, 1, kDim0);
  CHECK_KERNEL(maxTol, amax, Tensor(dt, {7}), none, 1, kDim0);
}

TEST_F(CudaKernels, MeanAndAmax) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkMeanAndAmax(dt, Tol{1e-6, 1e-7}, kExact);
  }
  // amax keeps integer types; an empty i32 shard holds INT32_MIN.
  for (int32_t dt : {SPMD_I64, SPMD_I32}) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    Tensor x = random(dt, {64, 1000, 17}, -1000000, 1000000);
    CHECK_KERNEL(kExact, amax, Tensor(dt, {64, 17}), x, 1, kDim1);
    CHECK_KERNEL(kExact, amax, Tensor(dt, {}), x, 0, nullptr);
    Tensor none = random(dt, {0, 7}, -1, 1);
    CHECK_KERNEL(kExact, amax, Tensor(dt, {7}), none, 1, kDim0);
  }
  // NaN propagates through every path.
  Tensor withNan = random(SPMD_F32, {2048, 1030}, -1, 1);
  withNan.set(1234 * 1030 + 56, NAN);
  withNan.upload();
  CHECK_KERNEL(kExact, amax, Tensor(SPMD_F32, {1030}), withNan, 1, kDim0);
  CHECK_KERNEL(kExact, amax, Tensor(SPMD_F32, {}), withNan, 0, nullptr);
}

//===----------------------------------------------------------------------===//
// Softmax family
//===----------------------------------------------------------------------===//

/// softmax and log_softmax of `x` over `dim`, then their backwards on the
/// CPU's outputs (kBF16: rounded to bf16, as the CUDA kernel stores them).
void checkSoftmaxFamily(Tensor &x, int64_t dim) {
  const DType dt = x.type();
  const Tol tol = x.isBF16() ? kBf16Reduction : kReduction;
  const Shape shape = x.shape();
  SCOPED_TRACE(std::string(spmd_rt_dtype_name(x.deviceDtype())) +
               shapeString(shape) + " dim " + std::to_string(dim));
  Tensor grad = random(dt, shape, -1, 1);

  Tensor y(dt, shape);
  RUN_BOTH(softmax, y, x, dim);
  EXPECT_MATCH(y, tol);
  Tensor yIn = sameValues(y);
  CHECK_KERNEL(tol, softmax_backward_data, Tensor(dt, shape), grad, yIn, dim);

  Tensor logY(dt, shape);
  RUN_BOTH(log_softmax, logY, x, dim);
  EXPECT_MATCH(logY, tol);
  Tensor logYIn = sameValues(logY);
  CHECK_KERNEL(tol, log_softmax_backward_data, Tensor(dt, shape), grad, logYIn,
               dim);
}

/// checkSoftmaxFamily on dtype `dt`: over the last dim of [2048, 1030]
/// rows, every 97th shifted by 1000 (stability: the max must be
/// subtracted), then over non-last dims and a vector.
void checkSoftmaxFamilyShapes(DType dt) {
  Tensor rows = generate(dt, {2048, 1030}, [](int64_t i) {
    double v = std::uniform_real_distribution<double>(-8, 8)(gRng);
    return (i / 1030) % 97 == 3 ? v + 1000 : v;
  });
  checkSoftmaxFamily(rows, 1);
  Tensor x3 = random(dt, {3, 257, 5}, -8, 8);
  checkSoftmaxFamily(x3, 1);
  checkSoftmaxFamily(x3, 0);
  checkSoftmaxFamily(x3, 2);
  Tensor x2 = random(dt, {1030, 6}, -8, 8);
  checkSoftmaxFamily(x2, 0);
  Tensor x4 = random(dt, {4, 3, 129, 2}, -8, 8);
  checkSoftmaxFamily(x4, 2);
  Tensor vec = random(dt, {7}, -8, 8);
  checkSoftmaxFamily(vec, 0);
}

/// softmax and log_softmax of dtype `dt` within `tol`, with masked entries
/// (-inf) and a fully masked row (NaN on both, as ATen).
void checkMaskedSoftmax(DType dt, Tol tol) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor masked = generate(dt, {4, 9}, [&](int64_t i) {
    if (i / 9 == 2 || i % 4 == 1)
      return -inf;
    return static_cast<double>(i % 7) - 3;
  });
  Tensor y(dt, {4, 9});
  RUN_BOTH(softmax, y, masked, 1);
  EXPECT_MATCH(y, tol);
  Tensor logY(dt, {4, 9});
  RUN_BOTH(log_softmax, logY, masked, 1);
  EXPECT_MATCH(logY, tol);
}

TEST_F(CudaKernels, SoftmaxFamily) {
  checkSoftmaxFamilyShapes(SPMD_F32);
  // f64.
  Tensor d2 = random(SPMD_F64, {64, 1030}, -8, 8);
  checkSoftmaxFamily(d2, 1);
  Tensor d3 = random(SPMD_F64, {5, 33, 7}, -8, 8);
  checkSoftmaxFamily(d3, 1);
  checkMaskedSoftmax(SPMD_F32, kReduction);
}

//===----------------------------------------------------------------------===//
// Layer norm
//===----------------------------------------------------------------------===//

/// input's shape with the trailing `normalizedRank` dims set to 1.
Shape statShape(const Shape &input, int64_t normalizedRank) {
  Shape shape = input;
  for (size_t d = shape.size() - normalizedRank; d < shape.size(); ++d)
    shape[d] = 1;
  return shape;
}

Shape normalizedShape(const Shape &input, int64_t normalizedRank) {
  return Shape(input.end() - normalizedRank, input.end());
}

/// native_layer_norm of `x` (with or without weight and bias), with mean
/// and rstd of `statDt`, then its backward on the CPU's mean and rstd
/// (kBF16: rounded to bf16, as the CUDA kernel stores them) with every
/// subset of the gradients.
void checkLayerNorm(DType dt, const Shape &shape, int64_t normalizedRank,
                    DType statDt) {
  SCOPED_TRACE(std::string(spmd_rt_dtype_name(dt.device)) + shapeString(shape) +
               " normalized_rank " + std::to_string(normalizedRank) +
               " statistics " + spmd_rt_dtype_name(statDt.device));
  const bool bf16 = dt.device == SPMD_BF16;
  const Tol norm = bf16 ? kBf16Norm : kNorm;
  const Tol statTol = statDt.device == SPMD_BF16 ? kBf16Norm : kNorm;
  const Shape stats = statShape(shape, normalizedRank);
  const Shape normalized = normalizedShape(shape, normalizedRank);
  int64_t n = 1;
  for (int64_t size : normalized)
    n *= size;
  // Rows with different offsets, so the mean matters.
  std::uniform_real_distribution<double> uniform(-1, 1);
  Tensor x = generate(dt, shape, [&](int64_t i) {
    return uniform(gRng) + 0.5 * ((i / n) % 5);
  });
  Tensor weight = random(dt, normalized, 0.5, 1.5);
  Tensor bias = random(dt, normalized, -0.5, 0.5);
  const double eps = 1e-5;

  for (bool withWeight : {true, false}) {
    for (bool withBias : {true, false}) {
      SCOPED_TRACE(std::string(withWeight ? "weight" : "no weight") + ", " +
                   (withBias ? "bias" : "no bias"));
      Tensor output(dt, shape), mean(statDt, stats), rstd(statDt, stats);
      RUN_BOTH(native_layer_norm, output, mean, rstd, x,
               withWeight ? &weight : nullptr, withBias ? &bias : nullptr,
               normalizedRank, eps);
      EXPECT_MATCH(output, norm);
      EXPECT_MATCH(mean, statTol);
      EXPECT_MATCH(rstd, statTol);
    }
  }

  // The backward on the CPU's statistics.
  Tensor output(dt, shape), mean(statDt, stats), rstd(statDt, stats);
  RUN_BOTH(native_layer_norm, output, mean, rstd, x, &weight, &bias,
           normalizedRank, eps);
  Tensor meanIn = sameValues(mean), rstdIn = sameValues(rstd);
  Tensor gradOut = random(dt, shape, -1, 1);
  const int64_t rows = x.numel() / std::max<int64_t>(n, 1);
  // grad_weight and grad_bias sum over the rows.
  const Tol rowSum = bf16 ? bf16SumTol(static_cast<double>(rows), 2)
                          : sumTol(static_cast<double>(rows), 2);
  for (bool withWeight : {true, false}) {
    for (int subset = 1; subset < 8; ++subset) {
      const bool wantInput = subset & 1, wantWeight = subset & 2,
                 wantBias = subset & 4;
      SCOPED_TRACE(std::string(withWeight ? "weight" : "no weight") +
                   ", grads:" + (wantInput ? " input" : "") +
                   (wantWeight ? " weight" : "") + (wantBias ? " bias" : ""));
      Tensor gradInput(dt, shape), gradWeight(dt, normalized),
          gradBias(dt, normalized);
      RUN_BOTH(native_layer_norm_backward, wantInput ? &gradInput : nullptr,
               wantWeight ? &gradWeight : nullptr,
               wantBias ? &gradBias : nullptr, gradOut, x, meanIn, rstdIn,
               withWeight ? &weight : nullptr, &bias, normalizedRank);
      if (wantInput)
        EXPECT_MATCH(gradInput, norm);
      if (wantWeight)
        EXPECT_MATCH(gradWeight, rowSum);
      if (wantBias)
        EXPECT_MATCH(gradBias, rowSum);
    }
  }
}

void checkLayerNorm(DType dt, const Shape &shape, int64_t normalizedRank) {
  checkLayerNorm(dt, shape, normalizedRank, dt);
}

TEST_F(CudaKernels, LayerNorm) {
  checkLayerNorm(SPMD_F32, {2048, 1030}, 1);
  checkLayerNorm(SPMD_F32, {4, 6, 10}, 2);
  checkLayerNorm(SPMD_F32, {3, 5, 7}, 3);
  checkLayerNorm(SPMD_F32, {2, 3, 4097}, 1);
  checkLayerNorm(SPMD_F64, {64, 257}, 1);
  checkLayerNorm(SPMD_F64, {4, 6, 10}, 2);
}

//===----------------------------------------------------------------------===//
// Scaled-dot-product attention
//===----------------------------------------------------------------------===//

/// An additive attention mask of dtype `dt` and `shape` (2-D or 4-D,
/// broadcasting to the scores [B, H, L, S]): values in [-2, 2), -inf at
/// about one entry in five and at the first key of its first row (with
/// is_causal, that row sees no key); with `maskedRow`, its last row is all
/// -inf (a query that sees no key: zeros and logsumexp 0).
Tensor attentionMask(DType dt, const Shape &shape, bool maskedRow) {
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t keys = shape.back();
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d)
    rows *= shape[d];
  std::uniform_real_distribution<double> uniform(-2, 2);
  std::bernoulli_distribution hidden(0.2);
  return generate(dt, shape, [&](int64_t i) {
    if (i == 0 || (maskedRow && i / keys == rows - 1) || hidden(gRng))
      return -inf;
    return uniform(gRng);
  });
}

/// The dtype of attention's logsumexp for a query of dtype `dt`: f32 for
/// bf16 (ATen's), else query's.
DType logsumexpType(DType dt) {
  return dt.device == SPMD_BF16 ? DType(SPMD_F32) : dt;
}

/// attention of dtype `dt` and its backward on the CPU's output (kBF16:
/// rounded to bf16, as the CUDA kernel stores it) and logsumexp, for
/// L < S, L > S, one query and a [70, 70] head of 64 (past a tile of a
/// tiled kernel); without a mask, with a full [B, H, L, S] one, broadcast
/// [1, 1, L, S], [L, S] and [B, 1, 1, S] ones (-inf entries, fully masked
/// rows); is_causal 0 and 1; scale 1 / sqrt(E) and 0.3. The bf16 forward
/// of head sizes 16, 32, 64, 96 and 128 is the fused kernel: query and key
/// counts that are not multiples of its 64-row tiles, causal tiles skipped
/// (L > S and L < S). Everything within
/// `sumTolOf` of the longest of L, S and E.
void checkAttention(DType dt, SumTolFn sumTolOf) {
  struct Dims {
    int64_t b, h, l, s, e;
  };
  for (Dims d :
       {Dims{2, 3, 5, 7, 8}, Dims{2, 1, 7, 5, 8}, Dims{1, 2, 1, 33, 16},
        Dims{1, 2, 70, 70, 64}, Dims{2, 1, 130, 150, 128},
        Dims{1, 2, 65, 64, 96}, Dims{1, 1, 150, 130, 32}}) {
    const Shape qShape = {d.b, d.h, d.l, d.e}, kShape = {d.b, d.h, d.s, d.e};
    const Shape lseShape = {d.b, d.h, d.l};
    SCOPED_TRACE(std::string(spmd_rt_dtype_name(dt.device)) + " query " +
                 shapeString(qShape) + ", key " + shapeString(kShape));
    const Tol tol = sumTolOf(static_cast<double>(std::max({d.l, d.s, d.e})), 1);
    Tensor q = random(dt, qShape, -1, 1);
    Tensor k = random(dt, kShape, -1, 1);
    Tensor v = random(dt, kShape, -1, 1);
    Tensor gradOut = random(dt, qShape, -1, 1);
    Tensor full = attentionMask(dt, {d.b, d.h, d.l, d.s}, true);
    Tensor shared = attentionMask(dt, {1, 1, d.l, d.s}, true);
    Tensor matrix = attentionMask(dt, {d.l, d.s}, false);
    Tensor keyPadding = attentionMask(dt, {d.b, 1, 1, d.s}, false);
    struct Mask {
      const char *name;
      Tensor *mask;
    };
    for (Mask m :
         {Mask{"no mask", nullptr}, Mask{"mask [B, H, L, S]", &full},
          Mask{"mask [1, 1, L, S]", &shared}, Mask{"mask [L, S]", &matrix},
          Mask{"mask [B, 1, 1, S]", &keyPadding}}) {
      for (int64_t causal : {0, 1}) {
        for (double scale : {1 / std::sqrt(static_cast<double>(d.e)), 0.3}) {
          SCOPED_TRACE(std::string(m.name) + ", is_causal " +
                       std::to_string(causal) + ", scale " +
                       std::to_string(scale));
          Tensor out(dt, qShape), lse(logsumexpType(dt), lseShape);
          RUN_BOTH(attention, out, lse, q, k, v, m.mask, causal, scale);
          EXPECT_MATCH(out, tol);
          EXPECT_MATCH(lse, tol);

          Tensor outIn = sameValues(out), lseIn = sameValues(lse);
          Tensor gradQuery(dt, qShape), gradKey(dt, kShape),
              gradValue(dt, kShape);
          RUN_BOTH(attention_backward, gradQuery, gradKey, gradValue, gradOut,
                   q, k, v, outIn, lseIn, m.mask, causal, scale);
          EXPECT_MATCH(gradQuery, tol);
          EXPECT_MATCH(gradKey, tol);
          EXPECT_MATCH(gradValue, tol);
        }
      }
    }
  }
}

/// A query row that sees no key gives zeros, logsumexp 0 and a zero
/// grad_query on both backends (checked against those values, not only
/// against the CPU), the other rows within `tol`.
void checkFullyMaskedAttentionRow(DType dt, Tol tol) {
  const double inf = std::numeric_limits<double>::infinity();
  const Shape qShape = {1, 1, 3, 4}, kShape = {1, 1, 5, 4};
  Tensor q = random(dt, qShape, -1, 1);
  Tensor k = random(dt, kShape, -1, 1);
  Tensor v = random(dt, kShape, -1, 1);
  // Row 1 sees no key.
  Tensor mask = generate(dt, {3, 5}, [&](int64_t i) {
    return i / 5 == 1 ? -inf : 0.25 * (i % 3);
  });
  Tensor out(dt, qShape), lse(logsumexpType(dt), {1, 1, 3});
  RUN_BOTH(attention, out, lse, q, k, v, mask, 0, 0.5);
  EXPECT_MATCH(out, tol);
  EXPECT_MATCH(lse, tol);
  const std::vector<double> outValues = deviceValues(out);
  for (int64_t e = 0; e < 4; ++e)
    EXPECT_EQ(outValues[4 + e], 0.0) << "output[0, 0, 1, " << e << "]";
  EXPECT_EQ(deviceValues(lse)[1], 0.0) << "logsumexp[0, 0, 1]";

  Tensor outIn = sameValues(out), lseIn = sameValues(lse);
  Tensor gradOut = random(dt, qShape, -1, 1);
  Tensor gradQuery(dt, qShape), gradKey(dt, kShape), gradValue(dt, kShape);
  RUN_BOTH(attention_backward, gradQuery, gradKey, gradValue, gradOut, q, k, v,
           outIn, lseIn, mask, 0, 0.5);
  EXPECT_MATCH(gradQuery, tol);
  EXPECT_MATCH(gradKey, tol);
  EXPECT_MATCH(gradValue, tol);
  const std::vector<double> gradQueryValues = deviceValues(gradQuery);
  for (int64_t e = 0; e < 4; ++e)
    EXPECT_EQ(gradQueryValues[4 + e], 0.0)
        << "grad_query[0, 0, 1, " << e << "]";
}

/// Heads past the unfused path's first chunk of scratch (256 MiB of [L, S]
/// scores and probabilities: 8 f32 heads of 2048 x 2048 a chunk forward,
/// 4 backward).
TEST_F(CudaKernels, AttentionOverSeveralChunks) {
  const Shape qShape = {3, 3, 2048, 8}, lseShape = {3, 3, 2048};
  Tensor q = random(SPMD_F32, qShape, -1, 1);
  Tensor k = random(SPMD_F32, qShape, -1, 1);
  Tensor v = random(SPMD_F32, qShape, -1, 1);
  Tensor out(SPMD_F32, qShape), lse(SPMD_F32, lseShape);
  RUN_BOTH(attention, out, lse, q, k, v, nullptr, 1, 0.5);
  EXPECT_MATCH(out, sumTol(2048));
  EXPECT_MATCH(lse, sumTol(2048));
  Tensor outIn = sameValues(out), lseIn = sameValues(lse);
  Tensor gradOut = random(SPMD_F32, qShape, -1, 1);
  Tensor gradQuery(SPMD_F32, qShape), gradKey(SPMD_F32, qShape),
      gradValue(SPMD_F32, qShape);
  RUN_BOTH(attention_backward, gradQuery, gradKey, gradValue, gradOut, q, k, v,
           outIn, lseIn, nullptr, 1, 0.5);
  EXPECT_MATCH(gradQuery, sumTol(2048));
  EXPECT_MATCH(gradKey, sumTol(2048));
  EXPECT_MATCH(gradValue, sumTol(2048));
}

TEST_F(CudaKernels, Attention) {
  for (int32_t dt : kFloatTypes) {
    checkAttention(dt, sumTol);
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkFullyMaskedAttentionRow(dt, sumTol(5));
  }
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

// {begin, count, vocab}: this rank holds global rows [10, 30) of 50.
constexpr int64_t kRows10to30[] = {10, 20, 50};
// The whole vocabulary.
constexpr int64_t kRowsAll[] = {0, 50, 50};

/// embedding of dtype `dt` (i64 and i32 indices, a 0-D index) and its
/// backward (repeated indices, padding_idx, scale_grad_by_freq) within
/// `sumTolOf`; then the vocabulary-sharded embedding_rows and its backward,
/// and with `wholeVocabulary` embedding_rows holding every row as well.
void checkEmbedding(DType dt, SumTolFn sumTolOf, bool wholeVocabulary) {
  Tensor weight = random(dt, {50, 17}, -1, 1);
  Tensor indices = random(SPMD_I64, {3, 7}, 0, 49);
  Tensor indices32 = random(SPMD_I32, {21}, 0, 49);
  CHECK_KERNEL(kExact, embedding, Tensor(dt, {3, 7, 17}), weight, indices, -1);
  CHECK_KERNEL(kExact, embedding, Tensor(dt, {21, 17}), weight, indices32, 4);
  Tensor scalarIndex = tensor<int64_t>({}, {49});
  CHECK_KERNEL(kExact, embedding, Tensor(dt, {17}), weight, scalarIndex, -1);

  // Repeated indices: the backward adds several rows into one (kBF16: sums
  // in f32, rounded once).
  Tensor repeated = random(SPMD_I64, {3, 7}, 0, 9);
  Tensor grad = random(dt, {3, 7, 17}, -1, 1);
  for (int64_t paddingIdx : {int64_t(-1), int64_t(3)}) {
    for (int64_t scale : {0, 1}) {
      SCOPED_TRACE("padding_idx " + std::to_string(paddingIdx) +
                   " scale_grad_by_freq " + std::to_string(scale));
      CHECK_KERNEL(sumTolOf(21, 1), embedding_dense_backward,
                   Tensor(dt, {50, 17}), grad, repeated, paddingIdx, scale);
    }
  }

  // Vocabulary-sharded: indices outside the held rows give zero; weight
  // and out may have padding rows past the held ones.
  Tensor shard = random(dt, {20, 17}, -1, 1);
  Tensor paddedShard = random(dt, {24, 17}, -1, 1);
  CHECK_KERNEL(kExact, embedding_rows, Tensor(dt, {3, 7, 17}), shard, indices,
               kRows10to30);
  CHECK_KERNEL(kExact, embedding_rows, Tensor(dt, {21, 17}), paddedShard,
               indices32, kRows10to30);
  if (wholeVocabulary)
    CHECK_KERNEL(kExact, embedding_rows, Tensor(dt, {3, 7, 17}), weight,
                 indices, kRowsAll);
  Tensor near = random(SPMD_I64, {3, 7}, 8, 32);
  for (int64_t paddingIdx : {int64_t(-1), int64_t(15)}) {
    for (int64_t scale : {0, 1}) {
      SCOPED_TRACE("rows, padding_idx " + std::to_string(paddingIdx) +
                   " scale_grad_by_freq " + std::to_string(scale));
      CHECK_KERNEL(sumTolOf(21, 1), embedding_dense_backward_rows,
                   Tensor(dt, {24, 17}), grad, near, paddingIdx, scale,
                   kRows10to30);
      CHECK_KERNEL(sumTolOf(21, 1), embedding_dense_backward_rows,
                   Tensor(dt, {20, 17}), grad, indices, paddingIdx, scale,
                   kRows10to30);
    }
  }
}

/// embedding of dtype `dt` on a large table, and its backward with many
/// repeats (contended adds, about 200 a row) within `sumTolOf`.
void checkLargeEmbedding(DType dt, SumTolFn sumTolOf) {
  Tensor weight = random(dt, {1000, 64}, -1, 1);
  Tensor indices = random(SPMD_I64, {4096}, 0, 999);
  CHECK_KERNEL(kExact, embedding, Tensor(dt, {4096, 64}), weight, indices, -1);
  Tensor hot = random(SPMD_I32, {4096}, 0, 19);
  Tensor grad = random(dt, {4096, 64}, -1, 1);
  CHECK_KERNEL(sumTolOf(400, 1), embedding_dense_backward,
               Tensor(dt, {1000, 64}), grad, hot, 0, 0);
  CHECK_KERNEL(sumTolOf(400, 1), embedding_dense_backward,
               Tensor(dt, {1000, 64}), grad, hot, -1, 1);
}

TEST_F(CudaKernels, Embedding) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkEmbedding(dt, sumTol, /*wholeVocabulary=*/true);
  }
  checkLargeEmbedding(SPMD_F32, sumTol);
}

//===----------------------------------------------------------------------===//
// NLL loss
//===----------------------------------------------------------------------===//

/// nll_loss_forward of dtype `dt` (ignored targets, weights, every
/// reduction; batched and not) and nll_loss_backward on the CPU's total
/// weight (kBF16: rounded to bf16), within `tol`.
void checkNllLoss(DType dt, Tol tol) {
  const int64_t batch = 64, classes = 10;
  Tensor self = random(dt, {batch, classes}, -5, 0);
  Tensor weight = random(dt, {classes}, 0.1, 2);
  // Targets with ignored samples (-100), and targets all in range.
  Tensor withIgnored = generate(SPMD_I64, {batch}, [](int64_t i) {
    return i % 7 == 3 ? -100.0 : static_cast<double>((i * 3) % 10);
  });
  Tensor inRange = random(SPMD_I32, {batch}, 0, classes - 1);
  Tensor allIgnored =
      generate(SPMD_I64, {batch}, [](int64_t) { return -100.0; });
  struct Case {
    Tensor *target;
    int64_t ignoreIndex;
  };
  for (Case c : {Case{&withIgnored, -100}, Case{&inRange, -100},
                 Case{&inRange, 3}, Case{&allIgnored, -100}}) {
    for (bool weighted : {false, true}) {
      for (int64_t reduction : {0, 1, 2}) {
        SCOPED_TRACE("ignore_index " + std::to_string(c.ignoreIndex) +
                     (weighted ? " weighted" : "") + " reduction " +
                     std::to_string(reduction));
        Tensor *w = weighted ? &weight : nullptr;
        Shape outShape = reduction == 0 ? Shape{batch} : Shape{};
        Tensor output(dt, outShape), totalWeight(dt, {});
        RUN_BOTH(nll_loss_forward, output, totalWeight, self, *c.target, w,
                 reduction, c.ignoreIndex);
        EXPECT_MATCH(output, tol);
        EXPECT_MATCH(totalWeight, tol);

        Tensor total = sameValues(totalWeight);
        Tensor gradOut = random(dt, outShape, -2, 2);
        CHECK_KERNEL(tol, nll_loss_backward, Tensor(dt, {batch, classes}),
                     gradOut, self, *c.target, w, total, reduction,
                     c.ignoreIndex);
      }
    }
  }
  // Unbatched: self [C], target [].
  Tensor one = random(dt, {classes}, -5, 0);
  Tensor target = tensor<int64_t>({}, {7});
  for (int64_t reduction : {0, 1, 2}) {
    SCOPED_TRACE("unbatched, reduction " + std::to_string(reduction));
    Tensor output(dt, {}), totalWeight(dt, {});
    RUN_BOTH(nll_loss_forward, output, totalWeight, one, target, &weight,
             reduction, -100);
    EXPECT_MATCH(output, tol);
    EXPECT_MATCH(totalWeight, tol);
    Tensor total = sameValues(totalWeight);
    Tensor gradOut = random(dt, {}, -2, 2);
    CHECK_KERNEL(tol, nll_loss_backward, Tensor(dt, {classes}), gradOut, one,
                 target, &weight, total, reduction, -100);
  }
}

/// nll_loss_forward of dtype `dt` on a large batch, mean and sum: the
/// loss within `tol`; the total weight, 4096 ones, exact.
void checkLargeNllLoss(DType dt, Tol tol) {
  Tensor self = random(dt, {4096, 1000}, -8, 0);
  Tensor target = random(SPMD_I64, {4096}, 0, 999);
  for (int64_t reduction : {1, 2}) {
    SCOPED_TRACE("large, reduction " + std::to_string(reduction));
    Tensor output(dt, {}), totalWeight(dt, {});
    RUN_BOTH(nll_loss_forward, output, totalWeight, self, target, nullptr,
             reduction, -100);
    EXPECT_MATCH(output, tol);
    EXPECT_MATCH(totalWeight, kExact);
  }
}

TEST_F(CudaKernels, NllLoss) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkNllLoss(dt, kReduction);
  }
  checkLargeNllLoss(SPMD_F32, kReduction);
}

// {begin, count, total}: the classes a rank holds of the class-sharded
// loss (loss_parallel), as columns 0.. of self and weight (host tables:
// constants, as the lowering passes them).
constexpr int64_t kClasses10to20[] = {10, 10, 30};
constexpr int64_t kClasses0to12[] = {0, 12, 30};
constexpr int64_t kClasses20to30[] = {20, 10, 30};
constexpr int64_t kClassesNone[] = {12, 0, 30};
constexpr int64_t kClasses500to1000[] = {500, 500, 1000};

/// nll_loss_forward_rows of dtype `dt` and nll_loss_backward_rows on the
/// CPU's total weight (kBF16: rounded to bf16), within `tol`: self holds 12
/// columns (a piece of 30 classes, padded), the targets range over all 30
/// classes (held or not) and some are ignored (ignore_index -100, or a held
/// class); pieces at the start, in the middle, at the end and an empty one
/// (total weight 0: mean is NaN); every reduction, with and without weight;
/// then unbatched.
void checkNllLossRows(DType dt, Tol tol) {
  const int64_t batch = 64, columns = 12;
  Tensor self = random(dt, {batch, columns}, -5, 0);
  Tensor weight = random(dt, {columns}, 0.1, 2);
  Tensor withIgnored = generate(SPMD_I64, {batch}, [](int64_t i) {
    return i % 7 == 3 ? -100.0 : static_cast<double>((i * 7) % 30);
  });
  Tensor anyClass = random(SPMD_I32, {batch}, 0, 29);
  struct Piece {
    const char *name;
    const int64_t *rows;
  };
  struct Case {
    Tensor *target;
    int64_t ignoreIndex;
  };
  for (Piece p : {Piece{"classes [10, 20)", kClasses10to20},
                  Piece{"classes [0, 12)", kClasses0to12},
                  Piece{"classes [20, 30)", kClasses20to30},
                  Piece{"no classes", kClassesNone}}) {
    for (Case c : {Case{&withIgnored, -100}, Case{&anyClass, -100},
                   Case{&anyClass, 15}}) {
      for (bool weighted : {false, true}) {
        for (int64_t reduction : {0, 1, 2}) {
          SCOPED_TRACE(std::string(p.name) + ", ignore_index " +
                       std::to_string(c.ignoreIndex) +
                       (weighted ? " weighted" : "") + " reduction " +
                       std::to_string(reduction));
          Tensor *w = weighted ? &weight : nullptr;
          Shape outShape = reduction == 0 ? Shape{batch} : Shape{};
          Tensor output(dt, outShape), totalWeight(dt, {});
          RUN_BOTH(nll_loss_forward_rows, output, totalWeight, self, *c.target,
                   w, reduction, c.ignoreIndex, p.rows);
          EXPECT_MATCH(output, tol);
          EXPECT_MATCH(totalWeight, tol);

          Tensor total = sameValues(totalWeight);
          Tensor gradOut = random(dt, outShape, -2, 2);
          CHECK_KERNEL(tol, nll_loss_backward_rows,
                       Tensor(dt, {batch, columns}), gradOut, self, *c.target,
                       w, total, reduction, c.ignoreIndex, p.rows);
        }
      }
    }
  }
  // Unbatched: self [C], target [], held or not.
  Tensor one = random(dt, {columns}, -5, 0);
  Tensor held = tensor<int64_t>({}, {14});
  Tensor elsewhere = tensor<int64_t>({}, {3});
  for (Tensor *target : {&held, &elsewhere}) {
    for (int64_t reduction : {0, 1, 2}) {
      SCOPED_TRACE("unbatched, target " + std::to_string(target->get(0)) +
                   ", reduction " + std::to_string(reduction));
      Tensor output(dt, {}), totalWeight(dt, {});
      RUN_BOTH(nll_loss_forward_rows, output, totalWeight, one, *target,
               &weight, reduction, -100, kClasses10to20);
      EXPECT_MATCH(output, tol);
      EXPECT_MATCH(totalWeight, tol);
      Tensor total = sameValues(totalWeight);
      Tensor gradOut = random(dt, {}, -2, 2);
      CHECK_KERNEL(tol, nll_loss_backward_rows, Tensor(dt, {columns}), gradOut,
                   one, *target, &weight, total, reduction, -100,
                   kClasses10to20);
    }
  }
}

/// nll_loss_forward_rows of dtype `dt` on a large batch, half of whose
/// targets are held, mean and sum, and its backward: the loss and the
/// gradient within `tol`; the total weight (a count) within `countTol`.
void checkLargeNllLossRows(DType dt, Tol tol, Tol countTol) {
  Tensor self = random(dt, {4096, 500}, -8, 0);
  Tensor target = random(SPMD_I64, {4096}, 0, 999);
  for (int64_t reduction : {1, 2}) {
    SCOPED_TRACE("large, reduction " + std::to_string(reduction));
    Tensor output(dt, {}), totalWeight(dt, {});
    RUN_BOTH(nll_loss_forward_rows, output, totalWeight, self, target, nullptr,
             reduction, -100, kClasses500to1000);
    EXPECT_MATCH(output, tol);
    EXPECT_MATCH(totalWeight, countTol);
    Tensor total = sameValues(totalWeight);
    Tensor gradOut = random(dt, {}, -2, 2);
    CHECK_KERNEL(tol, nll_loss_backward_rows, Tensor(dt, {4096, 500}), gradOut,
                 self, target, nullptr, total, reduction, -100,
                 kClasses500to1000);
  }
}

TEST_F(CudaKernels, NllLossRows) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkNllLossRows(dt, kReduction);
  }
  checkLargeNllLossRows(SPMD_F32, kReduction, kExact);
}

//===----------------------------------------------------------------------===//
// bf16 (CUDA only), against the CPU kernels in f32
//===----------------------------------------------------------------------===//

// Each test runs the CUDA kernels on kBF16 tensors (bf16 device buffers) and
// the CPU kernels on their f32 host values, which are bf16-exact: the CPU's
// f32 result is what the CUDA kernel's f32 math gives before it rounds the
// result to bf16 once (see the tolerances kBf16*).

TEST_F(CudaKernelsBf16, ConversionToBf16RoundsToNearestEven) {
  // The host rounding, on ties (halfway between two bf16 values) and near
  // them. In [1, 2) bf16 values are 2^-7 apart.
  const float e8 = std::ldexp(1.0f, -8);
  const float flMax = std::numeric_limits<float>::max();
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(bf16Bits(1.0f), 0x3F80);
  EXPECT_EQ(bf16Bits(1 + e8), 0x3F80);     // down to the even 1
  EXPECT_EQ(bf16Bits(1 + 3 * e8), 0x3F82); // up to the even 1 + 2^-6
  EXPECT_EQ(bf16Bits(std::nextafter(1 + e8, 2.0f)), 0x3F81);
  EXPECT_EQ(bf16Bits(-(1 + e8)), 0xBF80);
  EXPECT_EQ(bf16Bits(-0.0f), 0x8000);
  EXPECT_EQ(bf16Bits(flMax), 0x7F80); // past the largest bf16: infinity
  EXPECT_TRUE(std::isnan(bf16Value(bf16Bits(nan))));

  // f32 -> bf16 on the device, against the values rounding must give.
  struct Case {
    float in, out;
  };
  const float largest = bf16Value(0x7F7F);
  const Case cases[] = {
      {1 + e8, 1},                                    // tie: to even, down
      {1 + 3 * e8, 1 + 4 * e8},                       // tie: to even, up
      {std::nextafter(1 + e8, 2.0f), 1 + 2 * e8},     // above a tie
      {std::nextafter(1 + 3 * e8, 0.0f), 1 + 2 * e8}, // below a tie
      {-(1 + e8), -1},
      {-(1 + 3 * e8), -(1 + 4 * e8)},
      {257, 256}, // bf16 has the even integers in [256, 512)
      {259, 260},
      {-257, -256},
      {0.1f, bf16Value(0x3DCD)},
      {0, 0},
      {-0.0f, -0.0f},
      {largest, largest},
      {flMax, inf},
      {-flMax, -inf},
      {inf, inf},
      {-inf, -inf},
      {nan, nan},
  };
  const int64_t n = sizeof cases / sizeof cases[0];
  Tensor in = generate(SPMD_F32, {n}, [&](int64_t i) { return cases[i].in; });
  Tensor out(kBF16, {n});
  RUN_BOTH(copy, out, in);
  EXPECT_MATCH(out, kBf16Rounded);
  std::vector<double> got = deviceValues(out);
  for (int64_t i = 0; i < n; ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    if (std::isnan(cases[i].out)) {
      EXPECT_TRUE(std::isnan(roundBf16(cases[i].in)));
      EXPECT_TRUE(std::isnan(got[i]));
    } else {
      EXPECT_EQ(roundBf16(cases[i].in), cases[i].out) << cases[i].in;
      EXPECT_EQ(got[i], cases[i].out) << cases[i].in;
    }
  }

  // Every dtype into bf16, reshaping on the way: rounded once. f64 goes
  // through f32 (c10::BFloat16's only constructor takes a float), as the
  // CPU's f64 -> f32 copy does before kBf16Rounded rounds it.
  Tensor f = random(SPMD_F32, {3, 5, 7}, -100, 100);
  CHECK_KERNEL(kBf16Rounded, copy, Tensor(kBF16, {3, 5, 7}), f);
  CHECK_KERNEL(kBf16Rounded, copy, Tensor(kBF16, {7, 15}), f);
  Tensor d = random(SPMD_F64, {3, 5, 7}, -100, 100);
  CHECK_KERNEL(kBf16Rounded, copy, Tensor(kBF16, {105}), d);
  Tensor i = random(SPMD_I64, {3, 5, 7}, -100000, 100000);
  CHECK_KERNEL(kBf16Rounded, copy, Tensor(kBF16, {3, 5, 7}), i);
  Tensor j = random(SPMD_I32, {3, 5, 7}, -1000, 1000);
  CHECK_KERNEL(kBf16Rounded, copy, Tensor(kBF16, {3, 35}), j);
  Tensor mask = random(SPMD_I1, {3, 5, 7}, 0, 1);
  CHECK_KERNEL(kBf16Rounded, copy, Tensor(kBF16, {3, 5, 7}), mask);
  Tensor large = random(SPMD_F32, {1000003}, -1, 1);
  CHECK_KERNEL(kBf16Rounded, copy, Tensor(kBF16, {1000003}), large);
}

TEST_F(CudaKernelsBf16, ConversionFromBf16) {
  // Exact into the float types and into bf16 (a reshape moves the bits).
  Tensor b = random(kBF16, {3, 5, 7}, -300, 300);
  CHECK_KERNEL(kExact, copy, Tensor(kBF16, {7, 15}), b);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_F32, {3, 5, 7}), b);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_F64, {105}), b);
  // Into the integers: truncated toward zero.
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I64, {3, 5, 7}), b);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I32, {35, 3}), b);
  const double truncations[][2] = {
      {2.5, 2},   {-2.5, -2},      {-0.75, 0}, {0.99609375, 0},
      {-1.5, -1}, {-3.984375, -3}, {255, 255}, {-384, -384}};
  const int64_t n = sizeof truncations / sizeof truncations[0];
  Tensor values =
      generate(kBF16, {n}, [&](int64_t k) { return truncations[k][0]; });
  Tensor ints(SPMD_I64, {n});
  RUN_BOTH(copy, ints, values);
  EXPECT_MATCH(ints, kExact);
  std::vector<double> got = deviceValues(ints);
  for (int64_t k = 0; k < n; ++k)
    EXPECT_EQ(got[k], truncations[k][1]) << truncations[k][0];
  // Into i1: nonzero is true (NaN included, -0 not).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor special = generate(kBF16, {8}, [&](int64_t k) {
    const double v[] = {0.0, -0.0, 0.5, -2.0, nan, 1e-30, 1.0, 0.0};
    return v[k];
  });
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I1, {8}), special);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I1, {2, 4}), special);
  Tensor large = random(kBF16, {1000003}, -1000, 1000);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_F32, {1000003}), large);
  CHECK_KERNEL(kExact, copy, Tensor(SPMD_I64, {1000003}), large);
}

TEST_F(CudaKernelsBf16, ContiguousVectorsTailsAndMisalignment) {
  checkVectorizedContiguous(kBF16, kBf16Elementwise, kBf16Rounded);
  checkMisalignedContiguous(kBF16, kBf16Elementwise, kBf16Rounded);
  // bf16 <-> f32 casts: 8 elements per vector on both sides.
  for (int64_t n : {7, 1000003}) {
    Tensor b = random(kBF16, {n}, -300, 300);
    CHECK_KERNEL(kExact, copy, Tensor(SPMD_F32, {n}), b);
    Tensor f = random(SPMD_F32, {n}, -300, 300);
    CHECK_KERNEL(kBf16Rounded, copy, Tensor(kBF16, {n}), f);
  }
}

TEST_F(CudaKernelsBf16, BroadcastingArithmetic) {
  const DType dt = kBF16;
  const Tol tol = kBf16Elementwise;
  const Shape out = {3, 5, 7};
  BroadcastOperands operands(dt);
  // alpha 0.1: scalars are taken in f32, not rounded to bf16.
  checkBinaryArithmetic(dt, operands, tol, 0.1);
  // The checks below reuse some of the operands.
  Tensor &a = operands.a, &b = operands.b, &row = operands.row;

  // Ternary ops.
  Tensor t1 = random(dt, {5, 1}, -1, 1);
  Tensor t2 = random(dt, {3, 1, 7}, -1, 1);
  Tensor den2 = randomSigned(dt, {3, 1, 7}, 0.5, 2);
  CHECK_KERNEL(tol, addcmul, Tensor(dt, out), a, t1, t2, 0.5);
  CHECK_KERNEL(tol, addcmul, Tensor(dt, out), t1, a, t2, -2.0);
  CHECK_KERNEL(tol, addcdiv, Tensor(dt, out), a, t1, den2, -1.5);
  CHECK_KERNEL(tol, addcdiv, Tensor(dt, out), t2, a, den2, 0.3);
  Tensor steps = generate(dt, {5, 7}, [](int64_t i) { return i % 5 - 2; });
  CHECK_KERNEL(tol, threshold_backward, Tensor(dt, out), b, steps, 0.0);
  CHECK_KERNEL(tol, threshold_backward, Tensor(dt, out), b, steps, 1.0);
  CHECK_KERNEL(tol, threshold_backward, Tensor(dt, out), b, a, -0.25);
  // Unlike the other scalars, the threshold is rounded to bf16 (ATen takes
  // it as scalar_t): 0.1 is 0.10009765625, so self = that bf16 is at the
  // threshold. The CPU gets the rounded threshold.
  const float threshold = roundBf16(0.1f);
  const uint16_t thresholdBits = bf16Bits(threshold);
  const double near[] = {bf16Value(static_cast<uint16_t>(thresholdBits - 1)),
                         threshold,
                         bf16Value(static_cast<uint16_t>(thresholdBits + 1))};
  Tensor self3 = generate(dt, {3}, [&](int64_t i) { return near[i]; });
  Tensor grad3 = generate(dt, {3}, [](int64_t i) { return i + 1.0; });
  Tensor thresholded(dt, {3});
  spmd::rt::cpu::spmd_rt_threshold_backward(thresholded.host(), grad3.host(),
                                            self3.host(), threshold);
  spmd_rt_threshold_backward(thresholded.device(), grad3.device(),
                             self3.device(), 0.1);
  EXPECT_MATCH(thresholded, kExact);
  EXPECT_EQ(deviceValues(thresholded), (std::vector<double>{0, 0, 3}));

  // Inputs of other dtypes are converted to bf16 first (exact here: bf16
  // values, integers up to 256); a bf16 input of an f32 result is widened.
  Tensor ints = random(SPMD_I64, {5, 7}, -256, 256);
  CHECK_KERNEL(tol, add_tensor, Tensor(dt, out), a, ints, 0.5);
  Tensor mask = random(SPMD_I1, out, 0, 1);
  CHECK_KERNEL(tol, mul_tensor, Tensor(dt, out), mask, a);
  Tensor bValues = generate(SPMD_F32, out, [&](int64_t i) { return b.get(i); });
  CHECK_KERNEL(tol, sub_tensor, Tensor(dt, out), bValues, a, 1.0);
  Tensor num = random(SPMD_I64, out, -100, 100);
  Tensor divisor = random(SPMD_I32, {7}, 1, 9);
  CHECK_KERNEL(tol, div_tensor, Tensor(dt, out), num, divisor);
  Tensor f = random(SPMD_F32, out, -1, 1);
  CHECK_KERNEL(kElementwise, add_tensor, Tensor(SPMD_F32, out), f, a, 0.5);
  CHECK_KERNEL(kElementwise, addcmul, Tensor(SPMD_F32, out), f, a, row, 0.25);

  checkLargeBinaryArithmetic(dt, tol);
}

TEST_F(CudaKernelsBf16, ScalarAndUnaryOps) {
  const DType dt = kBF16;
  const Tol tol = kBf16Elementwise;
  const Shape out = {3, 5, 7};
  Tensor x = random(dt, out, -1, 1);
  // Scalars are taken in f32 (0.1 is not rounded to bf16).
  CHECK_KERNEL(tol, add_scalar, Tensor(dt, out), x, 0.25, -2.0);
  CHECK_KERNEL(tol, add_scalar, Tensor(dt, out), x, 0.1, 3.0);
  CHECK_KERNEL(tol, mul_scalar, Tensor(dt, out), x, 1.5);
  CHECK_KERNEL(tol, mul_scalar, Tensor(dt, out), x, 0.1);
  CHECK_KERNEL(tol, div_scalar, Tensor(dt, out), x, 3.0);
  CHECK_KERNEL(tol, div_scalar, Tensor(dt, out), x, -0.1);
  CHECK_KERNEL(tol, rsub_scalar, Tensor(dt, out), x, 10.0, 2.0);
  Tensor e = random(dt, out, -3, 3);
  CHECK_KERNEL(tol, pow_scalar, Tensor(dt, out), 2.0, e);
  CHECK_KERNEL(tol, pow_scalar, Tensor(dt, out), 0.5, e);
  // A negative base: integer exponents are real, the others NaN.
  Tensor ints = generate(dt, out, [](int64_t i) {
    return i % 3 == 2 ? 0.5 + (i % 4) : double(i % 9 - 4);
  });
  CHECK_KERNEL(tol, pow_scalar, Tensor(dt, out), -2.0, ints);

  Tensor away = randomSigned(dt, out, 0.25, 4);
  Tensor positive = random(dt, out, 0, 4);
  CHECK_KERNEL(tol, neg, Tensor(dt, out), x);
  CHECK_KERNEL(tol, reciprocal, Tensor(dt, out), away);
  CHECK_KERNEL(tol, sqrt, Tensor(dt, out), positive);
  CHECK_KERNEL(tol, sqrt, Tensor(dt, out), x); // NaN for x < 0
  CHECK_KERNEL(tol, relu, Tensor(dt, out), x);
  CHECK_KERNEL(tol, tanh, Tensor(dt, out), away);
  CHECK_KERNEL(tol, tanh_backward, Tensor(dt, out), away, x);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor special = generate(dt, {6}, [&](int64_t i) {
    const double v[] = {nan, inf, -inf, -0.0, 0.0, -1e-30};
    return v[i];
  });
  CHECK_KERNEL(tol, relu, Tensor(dt, {6}), special);
  CHECK_KERNEL(tol, neg, Tensor(dt, {6}), special);

  // Integer selves: converted to bf16 first, so integers past 256 are
  // rounded before the op (here one that keeps the value).
  Tensor small = random(SPMD_I64, out, -256, 256);
  CHECK_KERNEL(tol, add_scalar, Tensor(dt, out), small, 0.5, 1.0);
  CHECK_KERNEL(tol, div_scalar, Tensor(dt, out), small, 7.0);
  Tensor big = random(SPMD_I64, out, -100000, 100000);
  CHECK_KERNEL(kBf16Rounded, mul_scalar, Tensor(dt, out), big, 1.0);
  Tensor nonzero = generate(
      SPMD_I32, out, [](int64_t i) { return (i % 2 ? 1 : -1) * (1 + i % 13); });
  CHECK_KERNEL(tol, reciprocal, Tensor(dt, out), nonzero);
  CHECK_KERNEL(tol, sqrt, Tensor(dt, out), nonzero);

  Tensor large = random(dt, {1000003}, -1, 1);
  CHECK_KERNEL(tol, rsub_scalar, Tensor(dt, {1000003}), large, 1.0, 0.5);
  CHECK_KERNEL(tol, relu, Tensor(dt, {1000003}), large);
}

TEST_F(CudaKernelsBf16, AbsMaximumPowClamp) {
  const DType dt = kBF16;
  checkAbsMaximumPowClamp(dt, kBf16Elementwise);
  // pow's exponent and clamp's bounds are rounded to bf16 (ATen takes them
  // as scalar_t): 0.1 is 0.10009765625, which the CPU gets.
  const float bound = roundBf16(0.1f);
  const uint16_t boundBits = bf16Bits(bound);
  const double near[] = {bf16Value(static_cast<uint16_t>(boundBits - 1)), bound,
                         bf16Value(static_cast<uint16_t>(boundBits + 1))};
  Tensor x3 = generate(dt, {3}, [&](int64_t i) { return near[i]; });
  Tensor clamped(dt, {3});
  spmd::rt::cpu::spmd_rt_clamp(clamped.host(), x3.host(), 0, bound, 0, 1);
  spmd_rt_clamp(clamped.device(), x3.device(), 0, 0.1, 0, 1);
  EXPECT_MATCH(clamped, kExact);
  EXPECT_EQ(deviceValues(clamped),
            (std::vector<double>{near[0], bound, bound}));
  Tensor powered(dt, {3});
  spmd::rt::cpu::spmd_rt_pow_tensor_scalar(powered.host(), x3.host(), bound);
  spmd_rt_pow_tensor_scalar(powered.device(), x3.device(), 0.1);
  EXPECT_MATCH(powered, kBf16Elementwise);
}

TEST_F(CudaKernelsBf16, DivRoundingModes) {
  checkDivRoundingModes(kBF16, kBf16Elementwise);
}

TEST_F(CudaKernelsBf16, Gelu) {
  checkGelu(kBF16, kBf16Gelu, /*broadcastGrad=*/true);
}

TEST_F(CudaKernelsBf16, Silu) { checkSilu(kBF16, kBf16Elementwise); }

TEST_F(CudaKernelsBf16, LanguageModelPointwise) {
  checkLanguageModelPointwise(kBF16, kBf16Elementwise);
}

TEST_F(CudaKernelsBf16, ExpandPermuteCatSlice) {
  // bf16 inputs move exactly; inputs of other dtypes are rounded to bf16
  // (kBf16Rounded).
  const DType dt = kBF16;
  static constexpr int64_t kHeads[] = {0, 2, 1, 3};
  static constexpr int64_t kRotate3[] = {2, 0, 1};
  static constexpr int64_t kSwap3[] = {0, 2, 1};
  static constexpr int64_t kTranspose[] = {1, 0};
  Tensor row = random(dt, {7}, -1, 1);
  CHECK_KERNEL(kExact, expand, Tensor(dt, {3, 5, 7}), row);
  Tensor col = random(dt, {3, 1, 7}, -1, 1);
  CHECK_KERNEL(kExact, expand, Tensor(dt, {3, 5, 7}), col);
  Tensor scalar = random(dt, {}, -1, 1);
  CHECK_KERNEL(kExact, expand, Tensor(dt, {3, 5, 7}), scalar);
  Tensor sparse = random(dt, {2, 1, 4, 1}, -1, 1);
  CHECK_KERNEL(kExact, expand, Tensor(dt, {2, 3, 4, 5}), sparse);
  Tensor bigRow = random(dt, {1030}, -1, 1);
  CHECK_KERNEL(kExact, expand, Tensor(dt, {2048, 1030}), bigRow);
  Tensor f32Row = random(SPMD_F32, {7}, -1, 1);
  CHECK_KERNEL(kBf16Rounded, expand, Tensor(dt, {3, 5, 7}), f32Row);
  Tensor inner = random(SPMD_I64, {5, 1}, -1000, 1000);
  CHECK_KERNEL(kBf16Rounded, expand, Tensor(dt, {2, 3, 5, 4}), inner);

  Tensor x4 = random(dt, {2, 3, 4, 5}, -1, 1);
  CHECK_KERNEL(kExact, permute, Tensor(dt, {2, 4, 3, 5}), x4, 4, kHeads);
  Tensor x3 = random(dt, {3, 5, 7}, -1, 1);
  CHECK_KERNEL(kExact, permute, Tensor(dt, {7, 3, 5}), x3, 3, kRotate3);
  Tensor t = random(dt, {70, 45}, -1, 1);
  CHECK_KERNEL(kExact, permute, Tensor(dt, {45, 70}), t, 2, kTranspose);
  Tensor wide = random(dt, {1030, 257}, -1, 1);
  CHECK_KERNEL(kExact, permute, Tensor(dt, {257, 1030}), wide, 2, kTranspose);
  Tensor batched = random(dt, {3, 40, 33}, -1, 1);
  CHECK_KERNEL(kExact, permute, Tensor(dt, {3, 33, 40}), batched, 3, kSwap3);
  Tensor f32Batched = random(SPMD_F32, {3, 40, 33}, -1, 1);
  CHECK_KERNEL(kBf16Rounded, permute, Tensor(dt, {3, 33, 40}), f32Batched, 3,
               kSwap3);
  checkTiledTransposes(dt);

  Tensor a = random(dt, {2, 3, 4}, -100, 100);
  Tensor b = random(dt, {2, 1, 4}, -100, 100);
  Tensor c = random(dt, {2, 5, 4}, -100, 100);
  TensorList middle = {&a, &b, &c};
  CHECK_KERNEL(kExact, cat, Tensor(dt, {2, 9, 4}), 3, middle, 1);
  Tensor r1 = random(dt, {1, 5}, -1, 1);
  Tensor r3 = random(dt, {3, 5}, -1, 1);
  TensorList rows = {&r1, &r3, &r1};
  CHECK_KERNEL(kExact, cat, Tensor(dt, {5, 5}), 3, rows, 0);
  Tensor f = random(SPMD_F32, {2, 2, 4}, -100, 100);
  Tensor k = random(SPMD_I64, {2, 1, 4}, -1000, 1000);
  TensorList mixed = {&a, &f, &k};
  CHECK_KERNEL(kBf16Rounded, cat, Tensor(dt, {2, 6, 4}), 3, mixed, 1);
  checkLargeCat(dt);

  checkSliceEveryDim(dt);
  Tensor f32Self = random(SPMD_F32, {4, 6}, -1, 1);
  CHECK_KERNEL(kBf16Rounded, slice, Tensor(dt, {4, 3}), f32Self, 1, 3, 1);
  Tensor big = random(dt, {2048, 1030}, -1, 1);
  CHECK_KERNEL(kExact, slice, Tensor(dt, {2048, 515}), big, 1, 515, 1);
}

TEST_F(CudaKernelsBf16, LocalTake) {
  if (spmd_rt_world_size() != 1)
    GTEST_SKIP() << "the tables are written for a 1-rank job";
  // The fill value is rounded to bf16 via f32, as the CPU's f32 fill is by
  // kBf16Rounded.
  const DType dt = kBF16;
  Tensor self = random(dt, {3, 6, 4}, -1, 1);
  CHECK_KERNEL(kBf16Rounded, local_take, Tensor(dt, {3, 5, 4}), self, 1,
               kTakeMiddle, 0.5);
  Tensor narrow = random(dt, {3, 2, 4}, -1, 1);
  CHECK_KERNEL(kBf16Rounded, local_take, Tensor(dt, {3, 5, 4}), narrow, 1,
               kTakeGrow, 0.1);
  Tensor last = random(dt, {2, 3, 6}, -1, 1);
  CHECK_KERNEL(kBf16Rounded, local_take, Tensor(dt, {2, 3, 3}), last, 2,
               kTakeLast, -1.25);
  Tensor f32Rows = random(SPMD_F32, {6, 3}, -1, 1);
  CHECK_KERNEL(kBf16Rounded, local_take, Tensor(dt, {4, 3}), f32Rows, 0,
               kTakeFirst, -7.0);

  CHECK_KERNEL(kBf16Rounded, local_take_runs, Tensor(dt, {3, 5, 4}), self, 1, 1,
               1, kRunStart1, kRunCount3, -1.5);
  CHECK_KERNEL(kBf16Rounded, local_take_runs, Tensor(dt, {3, 5, 4}), self, 1, 3,
               3, kRunsStart, kRunsCount, 2.5);
  Tensor rows = random(dt, {7, 5}, -100, 100);
  CHECK_KERNEL(kBf16Rounded, local_take_runs, Tensor(dt, {4, 5}), rows, 0, 1, 1,
               kRunStart2, kRunCount4, 0.0);
  CHECK_KERNEL(kBf16Rounded, local_take_runs, Tensor(dt, {2, 3, 2}), last, 2, 1,
               1, kRunStart0, kRunCount0, 0.3);
  Tensor big = random(dt, {64, 1000, 3}, -1, 1);
  CHECK_KERNEL(kBf16Rounded, local_take_runs, Tensor(dt, {64, 5, 3}), big, 1, 1,
               1, kRunStart1, kRunCount3, 0.0);
}

TEST_F(CudaKernelsBf16, TriuFillArange) {
  const DType dt = kBF16;
  checkTriuDiagonals(dt);
  checkLargeTriu(dt);
  Tensor f32 = random(SPMD_F32, {6, 4}, -100, 100);
  CHECK_KERNEL(kBf16Rounded, triu, Tensor(dt, {6, 4}), f32, -2);
  Tensor ints = random(SPMD_I64, {6, 4}, -1000, 1000);
  CHECK_KERNEL(kBf16Rounded, triu, Tensor(dt, {6, 4}), ints, 1);

  // fill rounds its value to bf16 via f32 (257 is a tie: to 256).
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double value : {2.5, 0.1, -3.25, 257.0, 259.0, 1e30, nan}) {
    SCOPED_TRACE("fill " + std::to_string(value));
    CHECK_KERNEL(kBf16Rounded, fill, Tensor(dt, {3, 5, 7}), value);
  }
  CHECK_KERNEL(kBf16Rounded, fill, Tensor(dt, {}), -3.25);
  CHECK_KERNEL(kBf16Rounded, fill, Tensor(dt, {1000003}), 0.1);

  // arange: past 256 bf16 holds only some integers, the others round to
  // even.
  checkArange(dt, kBf16Rounded);
}

TEST_F(CudaKernelsBf16, SliceScatterPadCumsumGatherIndex) {
  // bf16 data moves exactly; inputs of other dtypes and constant_pad_nd's
  // fill value (via f32, as the CPU's f32 fill) are rounded to bf16 once.
  const DType dt = kBF16;
  checkSliceScatter(dt);
  Tensor self = random(dt, {4, 6}, -1, 1);
  Tensor f32Src = random(SPMD_F32, {4, 3}, -1, 1);
  CHECK_KERNEL(kBf16Rounded, slice_scatter, Tensor(dt, {4, 6}), self, f32Src, 1,
               0, 2);
  Tensor intSrc = random(SPMD_I64, {2, 6}, -1000, 1000);
  CHECK_KERNEL(kBf16Rounded, slice_scatter, Tensor(dt, {4, 6}), self, intSrc, 0,
               1, 2);
  checkConstantPad(dt, kBf16Rounded);
  Tensor f32Self = random(SPMD_F32, {3, 5, 7}, -100, 100);
  CHECK_KERNEL(kBf16Rounded, constant_pad_nd, Tensor(dt, {3, 6, 8}), f32Self, 4,
               kPadAndCrop, 0.1);
  checkGather(dt);
  Tensor picks = random(SPMD_I64, {3, 5, 2}, -7, 6);
  CHECK_KERNEL(kBf16Rounded, gather, Tensor(dt, {3, 5, 2}), f32Self, 2, picks);
  checkIndex(dt);
  Tensor rows = random(SPMD_I64, {4}, -3, 2);
  TensorList one = {&rows};
  CHECK_KERNEL(kBf16Rounded, index, Tensor(dt, {4, 5, 7}), f32Self, 1, one);

  // cumsum sums in f32 and rounds each result once.
  checkCumsum(dt, bf16SumTol);
  // Small integers: every partial sum is exact in f32, so the result is the
  // exact sum rounded to bf16 (summing in bf16 would drop ones past 256).
  std::uniform_int_distribution<int> count(0, 3);
  Tensor counts = generate(
      dt, {4, 3000}, [&](int64_t) { return static_cast<double>(count(gRng)); });
  CHECK_KERNEL(kBf16Rounded, cumsum, Tensor(dt, {4, 3000}), counts, 1);
  Tensor intCounts = random(SPMD_I64, {3000, 5}, 0, 3);
  CHECK_KERNEL(kBf16Rounded, cumsum, Tensor(dt, {3000, 5}), intCounts, 0);
  // bf16 summed into f32 (cumsum(dtype=float32)): the f32 tolerance.
  Tensor x = random(dt, {4, 3000}, -1, 1);
  CHECK_KERNEL(sumTol(3000), cumsum, Tensor(SPMD_F32, {4, 3000}), x, 1);
}

TEST_F(CudaKernelsBf16, BernoulliAndDropoutDrawTheSameNumbers) {
  const DType dt = kBF16;
  spmd_rt_set_seed(20240611);
  for (uint64_t step : {3, 4}) {
    spmd_rt_set_step(step);
    SCOPED_TRACE("step " + std::to_string(step));
    CHECK_KERNEL(kExact, bernoulli_p, Tensor(dt, {37, 129}), 0.3, 11, kGlobal2,
                 kOffset2);
    CHECK_KERNEL(kExact, bernoulli_p, Tensor(dt, {2, 5, 17}), 0.5, 12, kGlobal3,
                 kOffset3);
    CHECK_KERNEL(kExact, bernoulli_p, Tensor(dt, {4, 10, 33}), 0.9, 12,
                 kGlobal3, kZero3);
  }
  Tensor draws(dt, {1000003});
  RUN_BOTH(bernoulli_p, draws, 0.3, 7, kGlobal1, kOffset1);
  EXPECT_MATCH(draws, kExact);

  // native_dropout: the same mask; the output is input * keep * scale in
  // f32 (the CPU's f32 output), rounded to bf16 once.
  spmd_rt_set_seed(77);
  spmd_rt_set_step(5);
  checkNativeDropout(dt, kBf16Rounded, kBf16Elementwise, {2.0, 1.0 / 0.7});
  checkLargeNativeDropout(dt, kBf16Rounded);
}

TEST_F(CudaKernelsBf16, MatrixProducts) {
  const DType dt = kBF16;
  // alpha 0.3: scalars are taken in f32, not rounded to bf16.
  checkMmAddmmBmmBaddbmm(dt, bf16MatmulTol, 0.3);
  checkMatmulTransposedOperands(dt, bf16MatmulTol, /*nullSelfBeta=*/false);
  checkLargeMmBmm(dt, bf16MatmulTol);
  checkAttentionScores(dt, bf16MatmulTol);

  // Sums of 2048 positive products (about 512): accumulated in bf16 they
  // would stall (past 256 bf16 cannot add a product below 1) and end far
  // below. f32 accumulation is within the final rounding; 2e-2 leaves room
  // for cuBLAS's split-K partial sums, which it may round to bf16 (as ATen
  // allows by default).
  Tensor pa = random(dt, {64, 2048}, 0, 1);
  Tensor pb = random(dt, {2048, 48}, 0, 1);
  CHECK_KERNEL((Tol{2e-2, 0}), mm, Tensor(dt, {64, 48}), pa, pb);
}

TEST_F(CudaKernelsBf16, Sum) {
  const DType dt = kBF16;
  Tensor x = random(dt, {3, 5, 7}, -100, 100);
  const Tol tol = bf16SumTol(105, 100);
  CHECK_KERNEL(tol, sum, Tensor(dt, {5, 7}), x, 1, kDim0);
  CHECK_KERNEL(tol, sum, Tensor(dt, {1, 5, 7}), x, 1, kDim0);
  CHECK_KERNEL(tol, sum, Tensor(dt, {3, 7}), x, 1, kDim1);
  CHECK_KERNEL(tol, sum, Tensor(dt, {3, 5}), x, 1, kDim2);
  CHECK_KERNEL(tol, sum, Tensor(dt, {5}), x, 2, kDims02);
  CHECK_KERNEL(tol, sum, Tensor(dt, {}), x, 3, kDims201);
  CHECK_KERNEL(tol, sum, Tensor(dt, {}), x, 0, nullptr);
  CHECK_KERNEL(kExact, sum, Tensor(dt, {3, 5, 7}), x, 0, nullptr); // a copy
  Tensor one = random(dt, {1}, -1, 1);
  CHECK_KERNEL(kExact, sum, Tensor(dt, {}), one, 0, nullptr);
  // bf16 summed into f32 (ATen's sum(dtype=float32)): the f32 kernel.
  CHECK_KERNEL(sumTol(105, 100), sum, Tensor(SPMD_F32, {3, 5}), x, 1, kDim2);

  // Small integers: every partial sum is exact in f32, so the result is the
  // exact sum rounded to bf16 once, for every summation path (summing in
  // bf16 would drop ones past 256).
  const int64_t n = 1000003;
  std::uniform_int_distribution<int> count(0, 3);
  auto counts = [&](int64_t) { return static_cast<double>(count(gRng)); };
  Tensor flat = generate(dt, {n}, counts);
  CHECK_KERNEL(kBf16Rounded, sum, Tensor(dt, {}), flat, 0, nullptr);
  CHECK_KERNEL(kBf16Rounded, sum, Tensor(dt, {}), flat, 1, kDim0);
  Tensor grid = generate(dt, {2048, 1030}, counts);
  CHECK_KERNEL(kBf16Rounded, sum, Tensor(dt, {1030}), grid, 1, kDim0);
  CHECK_KERNEL(kBf16Rounded, sum, Tensor(dt, {2048}), grid, 1, kDim1);
  Tensor cube = generate(dt, {64, 1000, 17}, counts);
  CHECK_KERNEL(kBf16Rounded, sum, Tensor(dt, {64, 17}), cube, 1, kDim1);
  CHECK_KERNEL(kBf16Rounded, sum, Tensor(dt, {1000}), cube, 2, kDims02);

  checkLongSums(dt, kBf16Reduction, bf16SumTol);
  checkSumsOverLargeDims(dt, bf16SumTol);
}

TEST_F(CudaKernelsBf16, TruthValuesWhereLerp) {
  checkTruthWhereLerp(kBF16, kBf16Elementwise);
}

TEST_F(CudaKernelsBf16, MeanAndAmax) {
  checkMeanAndAmax(kBF16, kBf16Reduction, kBf16Rounded);
}

TEST_F(CudaKernelsBf16, SoftmaxFamily) {
  // The shifted rows: bf16 holds multiples of 4 there.
  checkSoftmaxFamilyShapes(kBF16);
  // Rows too long to stay in registers.
  Tensor longRows = random(kBF16, {3, 40000}, -8, 8);
  checkSoftmaxFamily(longRows, 1);
  checkMaskedSoftmax(kBF16, kBf16Reduction);
}

TEST_F(CudaKernelsBf16, LayerNorm) {
  // Statistics in bf16 (PyTorch's CPU kernel) and in f32 (its CUDA kernel).
  for (DType stats : {kBF16, DType(SPMD_F32)}) {
    checkLayerNorm(kBF16, {2048, 1030}, 1, stats);
    checkLayerNorm(kBF16, {4, 6, 10}, 2, stats);
    checkLayerNorm(kBF16, {3, 5, 7}, 3, stats);
    checkLayerNorm(kBF16, {2, 3, 4097}, 1, stats);
    checkLayerNorm(kBF16, {4, 8200}, 1, stats); // rows not in registers
  }
}

/// bf16 attention: the probabilities P and dS are rounded to bf16 before
/// the products that read them (as FlashAttention's P V), so an output's
/// error scales with the terms it sums (|P| |V| <= 1 here), not with the
/// output, which cancels; 2^-7 of the terms' scale, besides the result's
/// own rounding.
Tol bf16AttentionTol(double, double) { return {1e-2, 1.0 / 128}; }

TEST_F(CudaKernelsBf16, Attention) {
  // f32 scores and softmax on the bf16 values; logsumexp in f32.
  checkAttention(kBF16, bf16AttentionTol);
  checkFullyMaskedAttentionRow(kBF16, bf16AttentionTol(5, 1));
}

TEST_F(CudaKernelsBf16, Embedding) {
  checkEmbedding(kBF16, bf16SumTol, /*wholeVocabulary=*/false);
  checkLargeEmbedding(kBF16, bf16SumTol);
}

TEST_F(CudaKernelsBf16, NllLoss) {
  checkNllLoss(kBF16, kBf16Reduction);
  // The sums accumulate in f32.
  checkLargeNllLoss(kBF16, kBf16Reduction);
}

TEST_F(CudaKernelsBf16, NllLossRows) {
  checkNllLossRows(kBF16, kBf16Reduction);
  // The sums accumulate in f32; the total weight, a count, is rounded once.
  checkLargeNllLossRows(kBF16, kBf16Reduction, kBf16Rounded);
}

//===----------------------------------------------------------------------===//
// Device-side errors
//===----------------------------------------------------------------------===//

/// Reads `t` back: where the CUDA backend reports device-side errors.
void readBack(const Tensor &t) { (void)t.download(); }

// The regexes match the CPU kernels' messages too ("spmd_rt_embedding:
// index 7 at position 2 is out of range [0, 5)").
TEST_F(CudaKernelsDeathTest, IndexErrorsAreReportedOnRead) {
  Tensor weight = random(SPMD_F32, {5, 3}, -1, 1);
  Tensor indices = tensor<int64_t>({4}, {1, 0, 7, 2});
  Tensor negative = tensor<int32_t>({2}, {0, -3});
  Tensor out(SPMD_F32, {4, 3});
  Tensor out2(SPMD_F32, {2, 3});
  Tensor grad = random(SPMD_F32, {4, 3}, -1, 1);
  Tensor gradWeight(SPMD_F32, {5, 3});
  Tensor self = random(SPMD_F32, {4, 10}, -5, 0);
  Tensor target = tensor<int64_t>({4}, {1, 12, 0, 2});
  Tensor loss(SPMD_F32, {}), totalWeight(SPMD_F32, {});
  Tensor gradSelf(SPMD_F32, {4, 10});
  Tensor gradLoss = tensor<float>({}, {1.0f});
  Tensor one = tensor<float>({}, {4.0f});
  Tensor shard = random(SPMD_F32, {20, 3}, -1, 1);
  Tensor beyondVocab = tensor<int64_t>({2}, {12, 60});
  Tensor out3(SPMD_F32, {2, 3});

  StartupEnvironment startup; // the children start their own 1-rank job
  EXPECT_DEATH(
      {
        spmd_rt_embedding(out.device(), weight.device(), indices.device(), -1);
        readBack(out);
      },
      "spmd_rt_embedding: .*index 7");
  EXPECT_DEATH(
      {
        spmd_rt_embedding(out2.device(), weight.device(), negative.device(),
                          -1);
        readBack(out2);
      },
      "spmd_rt_embedding: .*index -3");
  EXPECT_DEATH(
      {
        spmd_rt_embedding_dense_backward(gradWeight.device(), grad.device(),
                                         indices.device(), -1, 0);
        readBack(gradWeight);
      },
      "spmd_rt_embedding_dense_backward: .*index 7");
  EXPECT_DEATH(
      {
        spmd_rt_embedding_rows(out3.device(), shard.device(),
                               beyondVocab.device(), kRows10to30);
        readBack(out3);
      },
      "spmd_rt_embedding_rows: .*index 60");
  EXPECT_DEATH(
      {
        spmd_rt_nll_loss_forward(loss.device(), totalWeight.device(),
                                 self.device(), target.device(), nullptr, 1,
                                 -100);
        readBack(loss);
      },
      "spmd_rt_nll_loss_forward: .*target 12");
  EXPECT_DEATH(
      {
        spmd_rt_nll_loss_backward(gradSelf.device(), gradLoss.device(),
                                  self.device(), target.device(), nullptr,
                                  one.device(), 1, -100);
        readBack(gradSelf);
      },
      "spmd_rt_nll_loss_backward: .*target 12");
}

// max pooling's backward and scatter report the CPU's messages for an index
// outside the plane or the dim.
TEST_F(CudaKernelsDeathTest, PoolingAndScatterIndexErrorsAreReportedOnRead) {
  Tensor grad = random(SPMD_F32, {1, 2, 2, 2}, -1, 1);
  Tensor at = tensor<int64_t>({1, 2, 2, 2}, {0, 1, 4, 5, 0, 16, 2, 3});
  Tensor pooled(SPMD_F32, {1, 2, 4, 4});
  Tensor self = random(SPMD_F32, {3, 4}, -1, 1);
  Tensor index = tensor<int64_t>({3, 1}, {0, 4, 1});
  Tensor scattered(SPMD_F32, {3, 4});

  StartupEnvironment startup; // the children start their own 1-rank job
  EXPECT_DEATH(
      {
        spmd_rt_max_pool2d_with_indices_backward(pooled.device(), grad.device(),
                                                 at.device());
        readBack(pooled);
      },
      "spmd_rt_max_pool2d_with_indices_backward: index 16 is outside a "
      "plane of 16 elements");
  EXPECT_DEATH(
      {
        spmd_rt_scatter(scattered.device(), self.device(), 1, index.device(),
                        self.device(), 1);
        readBack(scattered);
      },
      "spmd_rt_scatter_add: index 4 is out of bounds for dim 1 of size 4");
}

// gather and index report the CPU's "index I is out of bounds for dim D of
// size N" (a negative index counts from the end: -N is the first), the
// class-sharded losses an out-of-range target (beyond all classes, not only
// the held ones).
TEST_F(CudaKernelsDeathTest, GatherIndexAndShardedLossErrorsAreReportedOnRead) {
  Tensor self = random(SPMD_F32, {3, 4}, -1, 1);
  Tensor beyond = tensor<int64_t>({3, 2}, {0, 1, 9, 2, -4, 3});
  Tensor before = tensor<int32_t>({2, 4}, {0, 1, 2, 0, -4, 1, 2, 0});
  Tensor gathered(SPMD_F32, {3, 2}), gathered2(SPMD_F32, {2, 4});
  Tensor rows = tensor<int64_t>({2}, {1, 3});
  Tensor fine = tensor<int64_t>({2}, {0, -3});
  Tensor cols = tensor<int64_t>({2}, {-4, -5});
  TensorList one = {&rows};
  TensorList two = {&fine, &cols};
  Tensor indexed(SPMD_F32, {2, 4}), indexed2(SPMD_F32, {2});
  Tensor logProbs = random(SPMD_F32, {4, 12}, -5, 0);
  Tensor target = tensor<int64_t>({4}, {11, 45, 12, 2});
  Tensor loss(SPMD_F32, {}), totalWeight(SPMD_F32, {});
  Tensor gradSelf(SPMD_F32, {4, 12});
  Tensor gradLoss = tensor<float>({}, {1.0f});
  Tensor count = tensor<float>({}, {2.0f});

  StartupEnvironment startup; // the children start their own 1-rank job
  EXPECT_DEATH(
      {
        spmd_rt_gather(gathered.device(), self.device(), 1, beyond.device());
        readBack(gathered);
      },
      "spmd_rt_gather: index 9 is out of bounds for dim 1 of size 4");
  EXPECT_DEATH(
      {
        spmd_rt_gather(gathered2.device(), self.device(), 0, before.device());
        readBack(gathered2);
      },
      "spmd_rt_gather: index -4 is out of bounds for dim 0 of size 3");
  EXPECT_DEATH(
      {
        spmd_rt_index(indexed.device(), self.device(), 1, one.device());
        readBack(indexed);
      },
      "spmd_rt_index: index 3 is out of bounds for dim 0 of size 3");
  EXPECT_DEATH(
      {
        spmd_rt_index(indexed2.device(), self.device(), 2, two.device());
        readBack(indexed2);
      },
      "spmd_rt_index: index -5 is out of bounds for dim 1 of size 4");
  EXPECT_DEATH(
      {
        spmd_rt_nll_loss_forward_rows(loss.device(), totalWeight.device(),
                                      logProbs.device(), target.device(),
                                      nullptr, 1, -100, kClasses10to20);
        readBack(loss);
      },
      "spmd_rt_nll_loss_forward_rows: .*target 45");
  EXPECT_DEATH(
      {
        spmd_rt_nll_loss_backward_rows(
            gradSelf.device(), gradLoss.device(), logProbs.device(),
            target.device(), nullptr, count.device(), 1, -100, kClasses10to20);
        readBack(gradSelf);
      },
      "spmd_rt_nll_loss_backward_rows: .*target 45");
}

//===----------------------------------------------------------------------===//
// Collectives (NCCL, 1-rank groups)
//===----------------------------------------------------------------------===//

TEST_F(CudaCollectives, OneRankGroupsGiveTheirInput) {
  for (int32_t dt : {SPMD_F32, SPMD_F64, SPMD_I64, SPMD_I32}) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    const Shape shape = {6, 10, 4};
    Tensor in = random(dt, shape, -1000, 1000);
    for (int32_t reduce :
         {SPMD_REDUCE_SUM, SPMD_REDUCE_AVG, SPMD_REDUCE_MAX, SPMD_REDUCE_MIN}) {
      if (reduce == SPMD_REDUCE_AVG && !isFloat(dt))
        continue; // avg of integers is not supported
      SCOPED_TRACE("reduce " + std::to_string(reduce));
      Tensor out(dt, shape);
      spmd_rt_all_reduce(out.device(), in.device(), 1, kMeshDim0, reduce);
      expectDeviceBytes(out, in);
      Tensor scattered(dt, shape);
      spmd_rt_reduce_scatter(scattered.device(), in.device(), 1, kMeshDim0, 1,
                             reduce);
      expectDeviceBytes(scattered, in);
    }
    for (int64_t dim : {0, 1, 2}) {
      SCOPED_TRACE("dim " + std::to_string(dim));
      Tensor gathered(dt, shape);
      spmd_rt_all_gather(gathered.device(), in.device(), 1, kMeshDim0, dim);
      expectDeviceBytes(gathered, in);
      Tensor exchanged(dt, shape);
      spmd_rt_all_to_all(exchanged.device(), in.device(), 1, kMeshDim0, dim,
                         2 - dim);
      expectDeviceBytes(exchanged, in);
    }
    Tensor broadcast(dt, shape);
    spmd_rt_broadcast(broadcast.device(), in.device(), 1, kMeshDim0, 0);
    expectDeviceBytes(broadcast, in);
  }
  // Masks move as bytes.
  Tensor mask = random(SPMD_I1, {6, 10, 4}, 0, 1);
  Tensor gathered(SPMD_I1, {6, 10, 4});
  spmd_rt_all_gather(gathered.device(), mask.device(), 1, kMeshDim0, 1);
  expectDeviceBytes(gathered, mask);
  Tensor broadcast(SPMD_I1, {6, 10, 4});
  spmd_rt_broadcast(broadcast.device(), mask.device(), 1, kMeshDim0, 0);
  expectDeviceBytes(broadcast, mask);
}

// Kernel -> collective -> kernel: the collective (communication stream)
// must wait for the slow kernel that produced its input, and each consumer
// kernel (compute stream) for the collective's result. A fresh collective
// output holds poison, so a consumer that runs early reads 3.4e38.
TEST_F(CudaCollectives, KernelsAndCollectivesAreOrdered) {
  const int64_t n = 2048;
  // Small integers: the product is exact whatever the summation order.
  Tensor a = random(SPMD_I64, {n, n}, -2, 2);
  Tensor b = random(SPMD_I64, {n, n}, -2, 2);
  Tensor af(SPMD_F32, {n, n}), bf(SPMD_F32, {n, n});
  for (int64_t i = 0; i < n * n; ++i) {
    af.set(i, a.get(i));
    bf.set(i, b.get(i));
  }
  af.upload();
  bf.upload();
  Tensor product(SPMD_F32, {n, n});
  RUN_BOTH(mm, product, af, bf);
  EXPECT_MATCH(product, kExact);

  Tensor narrow = random(SPMD_F32, {n, 16}, -2, 2);
  Tensor picks = random(SPMD_I64, {64}, 0, n - 1);
  Tensor weight = random(SPMD_F32, {n}, 0.5, 1.5);
  Tensor bias = random(SPMD_F32, {n}, -0.5, 0.5);
  static constexpr int64_t kTranspose[] = {1, 0};

  // Each consumer reads `shared` (the collective's result) on both backends.
  using Consumer = std::function<void(Tensor & shared)>;
  const std::vector<std::pair<const char *, Consumer>> consumers = {
      {"add_scalar",
       [&](Tensor &s) {
         CHECK_KERNEL(kExact, add_scalar, Tensor(SPMD_F32, {n, n}), s, 1.0,
                      1.0);
       }},
      {"mm",
       [&](Tensor &s) {
         // `s` holds sums of n products of {-2..2}: about 90 in magnitude.
         CHECK_KERNEL(matmulTol(n, 128), mm, Tensor(SPMD_F32, {n, 16}), s,
                      narrow);
       }},
      {"sum",
       [&](Tensor &s) {
         CHECK_KERNEL(kExact, sum, Tensor(SPMD_F32, {n}), s, 1, kDim0);
       }},
      {"softmax",
       [&](Tensor &s) {
         CHECK_KERNEL(kReduction, softmax, Tensor(SPMD_F32, {n, n}), s, 1);
       }},
      {"copy",
       [&](Tensor &s) {
         CHECK_KERNEL(kExact, copy, Tensor(SPMD_F32, {2 * n, n / 2}), s);
       }},
      {"permute",
       [&](Tensor &s) {
         CHECK_KERNEL(kExact, permute, Tensor(SPMD_F32, {n, n}), s, 2,
                      kTranspose);
       }},
      {"embedding",
       [&](Tensor &s) {
         CHECK_KERNEL(kExact, embedding, Tensor(SPMD_F32, {64, n}), s, picks,
                      -1);
       }},
      {"native_layer_norm",
       [&](Tensor &s) {
         Tensor output(SPMD_F32, {n, n}), mean(SPMD_F32, {n, 1}),
             rstd(SPMD_F32, {n, 1});
         RUN_BOTH(native_layer_norm, output, mean, rstd, s, &weight, &bias, 1,
                  1e-5);
         EXPECT_MATCH(output, kNorm);
         EXPECT_MATCH(mean, kNorm);
       }},
      {"all_gather then add_scalar",
       [&](Tensor &s) {
         Tensor gathered(SPMD_F32, {n, n});
         spmd_rt_all_gather(gathered.device(), s.device(), 1, kMeshDim0, 0);
         std::memcpy(gathered.hostData(), s.hostData(), s.bytes());
         CHECK_KERNEL(kExact, add_scalar, Tensor(SPMD_F32, {n, n}), gathered,
                      -1.0, 1.0);
       }},
  };
  for (const auto &[name, consume] : consumers) {
    SCOPED_TRACE(std::string("consumer ") + name);
    Tensor produced(SPMD_F32, {n, n});
    spmd_rt_mm(produced.device(), af.device(), bf.device()); // slow
    Tensor shared(SPMD_F32, {n, n});
    spmd_rt_all_reduce(shared.device(), produced.device(), 1, kMeshDim0,
                       SPMD_REDUCE_SUM);
    std::memcpy(shared.hostData(), product.hostData(), product.bytes());
    consume(shared);
  }

  // Several steps in flight before anything is read back: each collective
  // waits for its producer, each consumer for its collective.
  const int64_t big = int64_t(1) << 24;
  Tensor x = random(SPMD_I64, {big}, 0, 1000);
  Tensor xf(SPMD_F32, {big});
  for (int64_t i = 0; i < big; ++i)
    xf.set(i, x.get(i));
  xf.upload();
  std::vector<Tensor> results;
  std::vector<Tensor> keep;
  for (int step = 1; step <= 4; ++step) {
    Tensor scaled(SPMD_F32, {big});
    spmd_rt_mul_scalar(scaled.device(), xf.device(), step);
    Tensor reduced(SPMD_F32, {big});
    spmd_rt_all_reduce(reduced.device(), scaled.device(), 1, kMeshDim0,
                       SPMD_REDUCE_SUM);
    Tensor result(SPMD_F32, {big});
    spmd_rt_add_scalar(result.device(), reduced.device(), step, 1.0);
    for (int64_t i = 0; i < big; ++i)
      result.set(i, x.get(i) * step + step);
    results.push_back(std::move(result));
    keep.push_back(std::move(scaled));
    keep.push_back(std::move(reduced));
  }
  for (size_t k = 0; k < results.size(); ++k) {
    SCOPED_TRACE("step " + std::to_string(k + 1));
    EXPECT_MATCH(results[k], kExact);
  }
}

// A collective's input freed right after the call: the allocator must not
// hand its block to a later kernel before the collective has read it.
TEST_F(CudaCollectives, FreedCollectiveInputsAreNotReusedEarly) {
  const int64_t n = int64_t(1) << 24;
  const Shape shape = {n};
  Tensor x = random(SPMD_I64, shape, 0, 1000);
  Tensor xf(SPMD_F32, shape);
  for (int64_t i = 0; i < n; ++i)
    xf.set(i, x.get(i));
  xf.upload();
  std::vector<Tensor> reduced;
  std::vector<DeviceBuffer> overwriters;
  for (int step = 1; step <= 4; ++step) {
    SpmdBuffer *input = spmd_rt_alloc(SPMD_F32, 1, shape.data());
    spmd_rt_mul_scalar(input, xf.device(), step);
    Tensor out(SPMD_F32, shape);
    spmd_rt_all_reduce(out.device(), input, 1, kMeshDim0, SPMD_REDUCE_SUM);
    spmd_rt_free(input);
    // Same size: the block `input` had is the allocator's first choice.
    DeviceBuffer next(spmd_rt_alloc(SPMD_F32, 1, shape.data()));
    spmd_rt_fill(next.get(), -1.0);
    for (int64_t i = 0; i < n; ++i)
      out.set(i, x.get(i) * step);
    reduced.push_back(std::move(out));
    overwriters.push_back(std::move(next));
  }
  for (size_t k = 0; k < reduced.size(); ++k) {
    SCOPED_TRACE("step " + std::to_string(k + 1));
    EXPECT_MATCH(reduced[k], kExact);
  }
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// A convolution: input and weight shapes, bias or none, and the window
/// lists (one entry per spatial dim).
struct ConvCase {
  Shape input, weight;
  bool bias;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
};

/// Its output shape (ATen's): [N, O, windowOutputSize per spatial dim].
Shape convOutput(const ConvCase &c) {
  Shape out = {c.input[0], c.weight[0]};
  for (size_t d = 0; d + 2 < c.input.size(); ++d)
    out.push_back(spmd::rt::windowOutputSize(c.input[d + 2], c.weight[d + 2],
                                             c.stride[d], c.padding[d],
                                             c.dilation[d], false));
  return out;
}

/// 2-D (padded; strided, dilated and grouped; depthwise; pointwise; a 7x7
/// stride-2 stem), 1-D and 3-D convolutions of dtype `dt`, forward and
/// backward, within `matmulTolOf` of their sums' lengths.
void checkConvolutions(DType dt, MatmulTolFn matmulTolOf) {
  const ConvCase cases[] = {
      {{2, 4, 9, 11}, {6, 4, 3, 3}, true, {1, 1}, {1, 1}, {1, 1}, 1},
      {{3, 6, 10, 8}, {4, 3, 3, 2}, true, {2, 1}, {2, 0}, {2, 1}, 2},
      {{2, 8, 7, 7}, {8, 1, 3, 3}, true, {2, 2}, {1, 1}, {1, 1}, 8},
      {{2, 16, 5, 5}, {8, 16, 1, 1}, false, {1, 1}, {0, 0}, {1, 1}, 1},
      {{4, 3, 32, 32}, {16, 3, 7, 7}, false, {2, 2}, {3, 3}, {1, 1}, 1},
      {{2, 4, 20}, {6, 2, 5}, true, {3}, {2}, {1}, 2},
      {{1, 3, 5, 6, 7},
       {4, 3, 2, 3, 3},
       true,
       {1, 2, 1},
       {1, 0, 1},
       {1, 1, 1},
       1},
  };
  for (const ConvCase &c : cases) {
    SCOPED_TRACE("input " + shapeString(c.input) + " weight " +
                 shapeString(c.weight) + " groups " + std::to_string(c.groups));
    const int32_t spatial = static_cast<int32_t>(c.stride.size());
    Tensor input = random(dt, c.input, -1, 1);
    Tensor weight = random(dt, c.weight, -1, 1);
    Tensor bias = random(dt, {c.weight[0]}, -1, 1);
    const Shape outShape = convOutput(c);
    int64_t taps = 1, positions = 1;
    for (size_t d = 1; d < c.weight.size(); ++d)
      taps *= c.weight[d];
    for (size_t d = 2; d < outShape.size(); ++d)
      positions *= outShape[d];
    // cuDNN's bf16 forward algorithms may hold partial sums in bf16 (the
    // observed errors reach 2^-8 of the terms' scale): 2^-7 absolute, as
    // the bf16 attention.
    Tol forward = matmulTolOf(taps + 1, 1);
    if (dt.device == SPMD_BF16)
      forward.atol = std::max(forward.atol, 1.0 / 128);
    CHECK_KERNEL(forward, convolution, Tensor(dt, outShape), input, weight,
                 c.bias ? &bias : nullptr, spatial, c.stride.data(), spatial,
                 c.padding.data(), spatial, c.dilation.data(), c.groups);
    Tensor grad = random(dt, outShape, -1, 1);
    Tensor gradInput(dt, c.input), gradWeight(dt, c.weight);
    RUN_BOTH(convolution_backward, gradInput, gradWeight, grad, input, weight,
             spatial, c.stride.data(), spatial, c.padding.data(), spatial,
             c.dilation.data(), c.groups);
    EXPECT_MATCH(gradInput, matmulTolOf(c.weight[0] / c.groups * taps, 1));
    EXPECT_MATCH(gradWeight, matmulTolOf(c.input[0] * positions, 1));
    // A NULL gradient is not computed (output_mask).
    Tensor onlyInput(dt, c.input), onlyWeight(dt, c.weight);
    RUN_BOTH(convolution_backward, &onlyInput, nullptr, grad, input, weight,
             spatial, c.stride.data(), spatial, c.padding.data(), spatial,
             c.dilation.data(), c.groups);
    RUN_BOTH(convolution_backward, nullptr, &onlyWeight, grad, input, weight,
             spatial, c.stride.data(), spatial, c.padding.data(), spatial,
             c.dilation.data(), c.groups);
    EXPECT_MATCH(onlyInput, matmulTolOf(c.weight[0] / c.groups * taps, 1));
    EXPECT_MATCH(onlyWeight, matmulTolOf(c.input[0] * positions, 1));
  }
}

TEST_F(CudaKernels, Convolution) {
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkConvolutions(dt, matmulTol);
  }
}

TEST_F(CudaKernelsBf16, Convolution) {
  checkConvolutions(kBF16, bf16MatmulTol);
}

/// A 2-D pooling window: kernel size, stride (empty: the kernel size),
/// padding, dilation and ceil_mode.
struct PoolCase {
  std::vector<int64_t> kernel, stride, padding, dilation;
  int64_t ceilMode;
};

/// The pooled shape of `self` (rank 3 or 4) under `c`.
Shape pooledShape(const Shape &self, const PoolCase &c) {
  Shape out(self.begin(), self.end() - 2);
  for (int d = 0; d < 2; ++d)
    out.push_back(spmd::rt::windowOutputSize(
        self[self.size() - 2 + d], c.kernel[d],
        c.stride.empty() ? c.kernel[d] : c.stride[d], c.padding[d],
        c.dilation[d], c.ceilMode != 0));
  return out;
}

const PoolCase kPoolCases[] = {
    {{3, 3}, {2, 2}, {1, 1}, {1, 1}, 0}, // ResNet's stem pooling
    {{2, 2}, {}, {0, 0}, {1, 1}, 0},     // stride = kernel
    {{3, 3}, {2, 2}, {0, 0}, {1, 1}, 1}, // ceil_mode's partial window
    {{3, 2}, {1, 2}, {1, 0}, {2, 1}, 0}, // dilation (max pooling)
    {{2, 3}, {2, 1}, {1, 1}, {1, 1}, 1},
};

/// max_pool2d_with_indices of dtype `dt` on [2, 3, 9, 10] and [3, 8, 8]
/// selves (floats: with NaNs), and its backward at the forward's indices,
/// within `sumTolOf` (overlapping windows add several gradients).
void checkMaxPool(DType dt, Tol exact, SumTolFn sumTolOf) {
  for (const Shape &shape : {Shape{2, 3, 9, 10}, Shape{3, 8, 8}}) {
    Tensor self = random(dt, shape, -10, 10);
    if (isFloat(dt.host)) {
      self.set(5, std::numeric_limits<double>::quiet_NaN());
      self.set(41, std::numeric_limits<double>::quiet_NaN());
      self.upload();
    }
    for (const PoolCase &c : kPoolCases) {
      SCOPED_TRACE("self " + shapeString(shape) + " kernel " +
                   shapeString(c.kernel) + " ceil_mode " +
                   std::to_string(c.ceilMode));
      const Shape outShape = pooledShape(shape, c);
      Tensor out(dt, outShape), indices(SPMD_I64, outShape);
      RUN_BOTH(max_pool2d_with_indices, out, indices, self, 2, c.kernel.data(),
               static_cast<int32_t>(c.stride.size()), c.stride.data(), 2,
               c.padding.data(), 2, c.dilation.data(), c.ceilMode);
      EXPECT_MATCH(out, exact);
      EXPECT_MATCH(indices, kExact);
      Tensor grad = random(dt, outShape, -1, 1);
      CHECK_KERNEL(sumTolOf(4, 1), max_pool2d_with_indices_backward,
                   Tensor(dt, shape), grad, indices);
    }
  }
}

/// avg_pool2d (count_include_pad both ways, a divisor_override) and
/// adaptive_avg_pool2d (smaller, equal and 1x1 outputs; a ResNet pooler) of
/// dtype `dt`, forward and backward, within `sumTolOf` of the window sizes.
void checkAvgPool(DType dt, SumTolFn sumTolOf) {
  const Shape shape = {2, 3, 9, 10};
  Tensor self = random(dt, shape, -1, 1);
  for (const PoolCase &c : kPoolCases) {
    if (c.dilation[0] != 1)
      continue; // avg_pool2d has no dilation
    const Shape outShape = pooledShape(shape, c);
    Tensor grad = random(dt, outShape, -1, 1);
    for (int64_t countPad : {0, 1})
      for (int64_t divisor : {0, 5}) {
        SCOPED_TRACE("kernel " + shapeString(c.kernel) + " ceil_mode " +
                     std::to_string(c.ceilMode) + " count_include_pad " +
                     std::to_string(countPad) + " divisor_override " +
                     std::to_string(divisor));
        const int32_t nStride = static_cast<int32_t>(c.stride.size());
        CHECK_KERNEL(sumTolOf(9, 1), avg_pool2d, Tensor(dt, outShape), self, 2,
                     c.kernel.data(), nStride, c.stride.data(), 2,
                     c.padding.data(), c.ceilMode, countPad, divisor);
        CHECK_KERNEL(sumTolOf(9, 1), avg_pool2d_backward, Tensor(dt, shape),
                     grad, 2, c.kernel.data(), nStride, c.stride.data(), 2,
                     c.padding.data(), c.ceilMode, countPad, divisor);
      }
  }
  struct Adaptive {
    Shape self, out;
  };
  const Adaptive adaptive[] = {{shape, {2, 3, 4, 3}},
                               {shape, shape},
                               {shape, {2, 3, 1, 1}},
                               {{3, 7, 5}, {3, 3, 4}},
                               {{8, 64, 7, 7}, {8, 64, 1, 1}}};
  for (const Adaptive &a : adaptive) {
    SCOPED_TRACE("adaptive " + shapeString(a.self) + " -> " +
                 shapeString(a.out));
    Tensor x = random(dt, a.self, -1, 1);
    Tensor grad = random(dt, a.out, -1, 1);
    CHECK_KERNEL(sumTolOf(49, 1), adaptive_avg_pool2d, Tensor(dt, a.out), x);
    CHECK_KERNEL(sumTolOf(4, 1), adaptive_avg_pool2d_backward,
                 Tensor(dt, a.self), grad);
  }
}

TEST_F(CudaKernels, Pooling) {
  for (int32_t dt : {SPMD_F32, SPMD_F64, SPMD_I64}) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkMaxPool(dt, kExact, sumTol);
  }
  for (int32_t dt : kFloatTypes) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkAvgPool(dt, sumTol);
  }
}

TEST_F(CudaKernelsBf16, Pooling) {
  checkMaxPool(kBF16, kBf16Rounded, bf16SumTol);
  checkAvgPool(kBF16, bf16SumTol);
}

//===----------------------------------------------------------------------===//
// scatter, sort, topk
//===----------------------------------------------------------------------===//

/// Integer values in [lo, hi] of dtype `dt` (exact in every dtype, bf16
/// included, and so are their small sums): ties for the sorts, exact sums
/// for scatter_add.
Tensor smallIntegers(DType dt, const Shape &shape, int64_t lo, int64_t hi) {
  std::uniform_int_distribution<int64_t> uniform(lo, hi);
  return generate(dt, shape,
                  [&](int64_t) { return static_cast<double>(uniform(gRng)); });
}

/// scatter and scatter_add of dtype `dt` into a [4, 5, 6] self along each
/// dim (repeated and negative indices: the last write wins, sums in the
/// CPU's order), with an index smaller than src, a [2048, 64] self and a
/// 1-D one of 1000 elements written 5000 times.
void checkScatter(DType dt) {
  const Shape shape = {4, 5, 6};
  Tensor self = smallIntegers(dt, shape, -8, 8);
  struct Case {
    int64_t dim;
    Shape index;
  };
  for (const Case &c : {Case{0, {4, 5, 6}}, Case{1, {4, 3, 6}},
                        Case{2, {3, 5, 9}}, Case{1, {2, 2, 2}}}) {
    const int64_t size = shape[c.dim];
    Tensor index = random(SPMD_I64, c.index, -size, size - 1);
    // src at least as large as index and self.
    Shape srcShape = c.index;
    for (size_t d = 0; d < srcShape.size(); ++d)
      srcShape[d] = std::max(srcShape[d], shape[d]);
    Tensor from = smallIntegers(dt, srcShape, -8, 8);
    for (int64_t add : {0, 1}) {
      SCOPED_TRACE("dim " + std::to_string(c.dim) + " index " +
                   shapeString(c.index) + " add " + std::to_string(add));
      CHECK_KERNEL(kExact, scatter, Tensor(dt, shape), self, c.dim, index, from,
                   add);
    }
  }
  Tensor big = smallIntegers(dt, {2048, 64}, -8, 8);
  Tensor picks = random(SPMD_I32, {2048, 16}, -64, 63);
  Tensor values = smallIntegers(dt, {2048, 16}, -8, 8);
  for (int64_t add : {0, 1})
    CHECK_KERNEL(kExact, scatter, Tensor(dt, {2048, 64}), big, 1, picks, values,
                 add);
  Tensor line = smallIntegers(dt, {1000}, -8, 8);
  Tensor many = random(SPMD_I64, {5000}, -1000, 999);
  Tensor manyValues = smallIntegers(dt, {5000}, -1, 1);
  for (int64_t add : {0, 1})
    CHECK_KERNEL(kExact, scatter, Tensor(dt, {1000}), line, 0, many, manyValues,
                 add);
}

/// sort (both directions) and topk (largest and smallest; k of 1, 3 and
/// the whole dim) of dtype `dt` along each dim of [4, 50, 6] (many ties;
/// floats: NaNs, -0 and +0), a [512, 1000] one, a router's [4096, 8] top 2
/// and 100000 elements: values and positions exactly the CPU's.
void checkSortTopk(DType dt, Tol exact) {
  const Shape shape = {4, 50, 6};
  Tensor self = smallIntegers(dt, shape, -3, 3);
  if (isFloat(dt.host)) {
    for (int64_t i : {3, 77, 78, 500, 1000})
      self.set(i, std::numeric_limits<double>::quiet_NaN());
    for (int64_t i : {10, 11, 12})
      self.set(i, -0.0);
    self.upload();
  }
  auto run = [&](Tensor &x, int64_t dim, int64_t k, bool sort, int64_t flag) {
    SCOPED_TRACE((sort ? "sort " : "topk ") + shapeString(x.shape()) + " dim " +
                 std::to_string(dim) + " k " + std::to_string(k) +
                 (flag ? " descending/largest" : ""));
    Shape outShape = x.shape();
    outShape[dim] = k;
    Tensor values(dt, outShape), indices(SPMD_I64, outShape);
    if (sort)
      RUN_BOTH(sort, values, indices, x, dim, flag);
    else
      RUN_BOTH(topk, values, indices, x, k, dim, flag);
    EXPECT_MATCH(values, exact);
    EXPECT_MATCH(indices, kExact);
  };
  for (int64_t dim : {0, 1, 2})
    for (int64_t flag : {0, 1}) {
      run(self, dim, shape[dim], true, flag);
      for (int64_t k :
           {int64_t(1), std::min<int64_t>(3, shape[dim]), shape[dim]})
        run(self, dim, k, false, flag);
    }
  Tensor rows = random(dt, {512, 1000}, -1, 1);
  run(rows, 1, 1000, true, 1);
  run(rows, 0, 512, true, 0);
  Tensor router = random(dt, {4096, 8}, -1, 1);
  run(router, 1, 2, false, 1);
  Tensor flat = smallIntegers(dt, {100000}, -1000, 1000);
  run(flat, 0, 100000, true, 0);
  run(flat, 0, 7, false, 1);
}

TEST_F(CudaKernels, ScatterSortTopk) {
  for (int32_t dt : {SPMD_F32, SPMD_F64, SPMD_I64, SPMD_I32}) {
    SCOPED_TRACE(spmd_rt_dtype_name(dt));
    checkScatter(dt);
    checkSortTopk(dt, kExact);
  }
  SCOPED_TRACE("i1");
  checkScatter(SPMD_I1);
}

TEST_F(CudaKernelsBf16, ScatterSortTopk) {
  checkScatter(kBF16);
  checkSortTopk(kBF16, kBf16Rounded);
}

//===----------------------------------------------------------------------===//
// Coverage (defined last: runs after the kernel tests)
//===----------------------------------------------------------------------===//

/// The kernels of KernelList.def that the CUDA backend implements.
const std::vector<std::string> &kernelListNames() {
  static const std::vector<std::string> names = [] {
    const spmd::rt::Backend &cuda = spmd::rt::cuda::backend();
    std::vector<std::string> implemented;
#define SPMD_RT_KERNEL(name, params, args)                                     \
  if (cuda.name)                                                               \
    implemented.push_back(#name);
#include "spmd/Runtime/KernelList.def"
    return implemented;
  }();
  return names;
}

/// The CUDA backend implements every kernel of KernelList.def.
TEST_F(CudaKernels, ImplementsEveryKernel) {
  EXPECT_EQ(kernelListNames().size(), 109u);
}

/// Whether the whole suite runs, in order, in a 1-rank job: what the
/// coverage tests need to have seen every kernel test.
bool runsWholeSuite() {
  return GTEST_FLAG_GET(filter) == "*" && !GTEST_FLAG_GET(shuffle) &&
         spmd_rt_world_size() == 1;
}

TEST_F(CudaKernels, ZzEveryKernelOfKernelListRan) {
  if (!runsWholeSuite())
    GTEST_SKIP() << "needs the whole suite, in order, in a 1-rank job";
  for (const std::string &name : kernelListNames())
    EXPECT_TRUE(exercisedKernels().count(name))
        << "spmd_rt_" << name << " is never compared";
}

// Every kernel takes bf16 on the CUDA backend but the bitwise ones, which
// ATen refuses on floats.
TEST_F(CudaKernelsBf16, ZzEveryKernelOfKernelListRanOnBf16) {
  if (!runsWholeSuite())
    GTEST_SKIP() << "needs the whole suite, in order, in a 1-rank job";
  for (const std::string &name : kernelListNames())
    EXPECT_TRUE(exercisedBf16Kernels().count(name) || name == "bitwise_and" ||
                name == "bitwise_or")
        << "spmd_rt_" << name << " is never compared on bf16 data";
}

} // namespace

int main(int argc, char **argv) {
  // CUDA does not survive fork: death tests re-execute this binary.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  snapshotEnvironment();
  ::testing::InitGoogleTest(&argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf(
        "SPMDRuntimeCudaTests: no CUDA GPU visible; every test skipped\n");
    std::fflush(stdout);
    return RUN_ALL_TESTS();
  }
  gHaveGpu = true;
  spmd_rt_set_backend("cuda");
  spmd_rt_init(&argc, &argv);
  int result = RUN_ALL_TESTS();
  spmd_rt_finalize();
  return result;
}
