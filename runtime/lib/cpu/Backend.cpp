//===- Backend.cpp - the CPU backend's entry of the backend table ---------===//
//
// Host memory, the kernels of runtime/lib/cpu/ and the MPI collectives,
// complete when they return.
//
//===----------------------------------------------------------------------===//

#include "../Backends.h"
#include "../Math.h"

#include <cstdlib>
#include <cstring>
#include <deque>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace spmd::rt::cpu {
namespace {

/// 64-byte aligned, for vectorised kernels; never a zero-size request.
void *allocate(int64_t bytes, const char *) {
  size_t request = (static_cast<size_t>(bytes) + 63) / 64 * 64 + 64;
  void *data = std::aligned_alloc(64, request);
  if (!data)
    spmd_rt_fatal("out of memory allocating %lld bytes",
                  static_cast<long long>(bytes));
  return data;
}

void release(Storage &storage) { std::free(storage.data); }

size_t byteSize(const SpmdBuffer *buffer) {
  return static_cast<size_t>(buffer->numel) * spmd_rt_dtype_size(buffer->dtype);
}

void write(SpmdBuffer *buffer, const void *host, const char *) {
  std::memcpy(buffer->data, host, byteSize(buffer));
}

void read(const SpmdBuffer *buffer, void *host, const char *) {
  std::memcpy(host, buffer->data, byteSize(buffer));
}

/// The kernels run to completion on the calling thread.
void synchronize() {}

/// The f32 copies of one kernel call's bf16 buffers. bf16 on the CPU follows
/// ATen's CPU kernels (opmath_type): values are widened to float, the op
/// computes and accumulates in float, and each stored value is rounded to
/// bf16 once (nearest even). So a call with bf16 buffers runs the f32 kernel
/// on exact widened copies of its inputs and rounds what it wrote, one
/// formula for both dtypes. The copies are host scratch, not runtime
/// buffers: spmd_rt_live_bytes counts the bf16 tensors only.
class Bf16Scratch {
public:
  const SpmdBuffer *input(const SpmdBuffer *buffer) {
    if (!buffer || buffer->dtype != SPMD_BF16)
      return buffer;
    SpmdBuffer &wide = widened(*buffer);
    const auto *bits = static_cast<const uint16_t *>(buffer->data);
    auto *values = static_cast<float *>(wide.data);
    for (int64_t i = 0; i < buffer->numel; ++i)
      values[i] = bf16ToFloat(bits[i]);
    return &wide;
  }
  /// Results are fresh buffers (Runtime.h): nothing to read in.
  SpmdBuffer *output(SpmdBuffer *buffer) {
    if (!buffer || buffer->dtype != SPMD_BF16)
      return buffer;
    SpmdBuffer &wide = widened(*buffer);
    written.emplace_back(buffer, &wide);
    return &wide;
  }
  const SpmdBuffer *const *inputs(int64_t n, const SpmdBuffer *const *list) {
    lists.emplace_back(list, list + n);
    for (const SpmdBuffer *&buffer : lists.back())
      buffer = input(buffer);
    return lists.back().data();
  }
  /// Rounds each result the kernel wrote in f32 into its bf16 buffer.
  void roundResults() {
    for (auto &[bf16, wide] : written) {
      auto *bits = static_cast<uint16_t *>(bf16->data);
      const auto *values = static_cast<const float *>(wide->data);
      for (int64_t i = 0; i < bf16->numel; ++i)
        bits[i] = floatToBf16(values[i]);
    }
  }

private:
  SpmdBuffer &widened(const SpmdBuffer &buffer) {
    data.emplace_back(static_cast<size_t>(buffer.numel));
    SpmdBuffer &wide = copies.emplace_back(buffer);
    wide.dtype = SPMD_F32;
    wide.data = data.back().data();
    wide.storage = nullptr;
    return wide;
  }

  std::deque<std::vector<float>> data;
  std::deque<SpmdBuffer> copies;
  std::deque<std::vector<const SpmdBuffer *>> lists;
  std::vector<std::pair<SpmdBuffer *, SpmdBuffer *>> written;
};

inline bool isBf16(const SpmdBuffer *buffer) {
  return buffer && buffer->dtype == SPMD_BF16;
}
/// Whether argument I of a kernel call is or lists a bf16 buffer (a list of
/// buffers follows its int32_t length, KernelList.def).
template <size_t I, typename Args> bool hasBf16(const Args &args) {
  using T = std::tuple_element_t<I, Args>;
  if constexpr (std::is_same_v<T, const SpmdBuffer *const *>) {
    for (int64_t i = 0, e = std::get<I - 1>(args); i < e; ++i)
      if (isBf16(std::get<I>(args)[i]))
        return true;
    return false;
  } else if constexpr (std::is_convertible_v<T, const SpmdBuffer *>) {
    return isBf16(std::get<I>(args));
  } else {
    return false;
  }
}
/// Argument I of a kernel call with its bf16 buffers replaced by f32 ones.
template <size_t I, typename Args>
std::tuple_element_t<I, Args> widen(Bf16Scratch &scratch, const Args &args) {
  using T = std::tuple_element_t<I, Args>;
  if constexpr (std::is_same_v<T, const SpmdBuffer *const *>)
    return scratch.inputs(std::get<I - 1>(args), std::get<I>(args));
  else if constexpr (std::is_same_v<T, SpmdBuffer *>)
    return scratch.output(std::get<I>(args));
  else if constexpr (std::is_same_v<T, const SpmdBuffer *>)
    return scratch.input(std::get<I>(args));
  else
    return std::get<I>(args);
}

/// The CPU backend's entry for kernel `Fn`: `Fn` itself, or on bf16 buffers
/// `Fn` on f32 copies (Bf16Scratch).
template <auto Fn> struct Bf16Call;
template <typename... P, void (*Fn)(P...)> struct Bf16Call<Fn> {
  static void call(P... params) {
    std::tuple<P...> args(params...);
    bf16Call(args, std::index_sequence_for<P...>());
  }
  template <size_t... I>
  static void bf16Call(const std::tuple<P...> &args,
                       std::index_sequence<I...>) {
    if (!(hasBf16<I>(args) || ...))
      return Fn(std::get<I>(args)...);
    Bf16Scratch scratch;
    Fn(widen<I>(scratch, args)...);
    scratch.roundResults();
  }
};

} // namespace

const Backend &backend() {
  // Host collectives are complete on return: no hooks around them.
  static const Backend cpu = {
      "cpu",       "mpi",   allocate, release, write,   read,
      synchronize, nullptr, nullptr,  nullptr, nullptr, nullptr,
#define SPMD_RT_KERNEL(kernel, params, args) Bf16Call<&spmd_rt_##kernel>::call,
#include "spmd/Runtime/KernelList.def"
  };
  return cpu;
}

} // namespace spmd::rt::cpu
