//===- collectives-check.cpp - checks the runtime's collectives -----------===//
//
// Usage: mpirun -np N spmd-collectives-check MESH [--backend mpi|nccl]
//                                 [--fail-on-rank R] [--bad-shape]
//
// MESH is the device mesh, e.g. `4` or `2x2` (its product must be N). Every
// collective of Runtime.h is run over every mesh dims list (every subset of
// the mesh dims in every order, and the empty list), for several dtypes,
// tensor dims (outer and inner) and reduce kinds. Each rank's input is a
// function of its rank and the element's index, so each rank computes the
// expected result locally from the group it derives on its own from the
// mesh (DESIGN.md §2: row-major ranks; a member's position is the row-major
// index of its coordinates on the listed dims, in the listed order).
//
// With `--backend nccl` (spmd_rt_set_collective_backend) the runtime gets
// device buffers: each input is filled on the host and copied to cudaMalloc'd
// memory, each output copied back before it is checked; reductions also run
// on f16 (bf16 runs on both backends; NCCL >= 2.10 for bf16 and avg). Averages
// are then checked with a tolerance, since NCCL scales each input by 1/size
// before summing. Without the NCCL backend built, or without a GPU, the
// runtime's own error ends the run.
//
// Prints one line per failing check, then `collectives ok: <n> checks on
// mesh <MESH>` on rank 0, and exits non-zero on any failure. With
// `--fail-on-rank R`, rank R calls spmd_rt_fatal("injected failure") while
// the other ranks enter a collective: the whole job must end. With
// `--bad-shape`, every rank calls all_gather with an out buffer of the wrong
// shape, which the runtime must reject naming the collective.
//
//===----------------------------------------------------------------------===//

#include "spmd/Runtime/Runtime.h"

#include <mpi.h>

#ifdef SPMD_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using Shape = std::vector<int64_t>;

/// Whether the runtime's buffers are device memory (`--backend nccl`).
bool onDevice = false;
/// --async: every collective runs as its `_start` form, then spmd_rt_wait.
bool async = false;

/// Runs a collective through its synchronous form or, with --async, its
/// `_start` form, an allocation (which advances collectives in flight) and
/// spmd_rt_wait.
template <typename T> struct Same { using type = T; };
template <typename... A>
void runCollective(void (*sync)(SpmdBuffer *, const SpmdBuffer *, A...),
                   void (*start)(SpmdBuffer *, const SpmdBuffer *, A...),
                   SpmdBuffer *out, const SpmdBuffer *in,
                   typename Same<A>::type... args) {
  if (!async)
    return sync(out, in, args...);
  start(out, in, args...);
  spmd_rt_free(spmd_rt_alloc(SPMD_F32, 0, nullptr));
  spmd_rt_wait(out, in);
}

const char *reduceName(int32_t reduce) {
  static const char *names[] = {"sum", "avg", "max", "min"};
  return names[reduce];
}

std::string formatList(const Shape &values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

Shape unravel(int64_t flat, const Shape &shape) {
  Shape index(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    index[k] = flat % shape[k];
    flat /= shape[k];
  }
  return index;
}

int64_t ravel(const Shape &index, const Shape &shape) {
  int64_t flat = 0;
  for (size_t k = 0; k < shape.size(); ++k)
    flat = flat * shape[k] + index[k];
  return flat;
}

/// IEEE binary16 and bfloat16 <-> float, rounding to nearest even (finite
/// values; binary16 subnormals flush to zero, the checks never make any).
uint16_t toBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

float fromBf16(uint16_t half) {
  uint32_t bits = static_cast<uint32_t>(half) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint16_t toF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = bits & 0x7fffff;
  if (exponent <= 0)
    return sign;
  // Round the 23-bit mantissa to 10 bits; a carry moves into the exponent.
  uint32_t rounded = ((static_cast<uint32_t>(exponent) << 23 | mantissa) +
                      0xfff + ((mantissa >> 13) & 1)) >>
                     13;
  if (rounded >= 0x7c00)
    return static_cast<uint16_t>(sign | 0x7c00);
  return static_cast<uint16_t>(sign | rounded);
}

float fromF16(uint16_t half) {
  int32_t exponent = (half >> 10) & 0x1f;
  float magnitude = exponent == 0
                        ? std::ldexp(static_cast<float>(half & 0x3ff), -24)
                        : std::ldexp(static_cast<float>((half & 0x3ff) | 0x400),
                                     exponent - 25);
  return (half & 0x8000) ? -magnitude : magnitude;
}

/// The input element `index` of rank `rank` in check number `salt`: small
/// integers and quarters (exact in f32 sums), not monotonic in the rank, so
/// max and min pick different ranks for different elements; i64 values need
/// more than 32 bits.
double inputValue(int32_t dtype, int rank, int64_t index, int64_t salt) {
  int64_t mix = (rank * 131 + index * 17 + salt * 7) % 29 - 14;
  switch (dtype) {
  case SPMD_F32:
  case SPMD_F64:
  case SPMD_F16:
  case SPMD_BF16: // Quarters below 64 are exact in 8 significant bits.
    return static_cast<double>(mix) + 0.25 * (rank % 4);
  case SPMD_I64:
    return static_cast<double>(mix * (int64_t{1} << 33) + rank);
  case SPMD_I32:
    return static_cast<double>(mix * 1000 + rank);
  case SPMD_I1:
    return static_cast<double>((mix + 14 + rank) % 2);
  }
  return 0;
}

/// Reads element `i` of a buffer as a double (exact for the values used).
double readElement(const SpmdBuffer *buffer, int64_t i) {
  switch (buffer->dtype) {
  case SPMD_F32:
    return static_cast<const float *>(buffer->data)[i];
  case SPMD_F64:
    return static_cast<const double *>(buffer->data)[i];
  case SPMD_F16:
    return fromF16(static_cast<const uint16_t *>(buffer->data)[i]);
  case SPMD_BF16:
    return fromBf16(static_cast<const uint16_t *>(buffer->data)[i]);
  case SPMD_I64:
    return static_cast<double>(static_cast<const int64_t *>(buffer->data)[i]);
  case SPMD_I32:
    return static_cast<const int32_t *>(buffer->data)[i];
  case SPMD_I1:
    return static_cast<const uint8_t *>(buffer->data)[i];
  }
  return 0;
}

void writeElement(SpmdBuffer *buffer, int64_t i, double value) {
  switch (buffer->dtype) {
  case SPMD_F32:
    static_cast<float *>(buffer->data)[i] = static_cast<float>(value);
    return;
  case SPMD_F64:
    static_cast<double *>(buffer->data)[i] = value;
    return;
  case SPMD_F16:
    static_cast<uint16_t *>(buffer->data)[i] = toF16(static_cast<float>(value));
    return;
  case SPMD_BF16:
    static_cast<uint16_t *>(buffer->data)[i] =
        toBf16(static_cast<float>(value));
    return;
  case SPMD_I64:
    static_cast<int64_t *>(buffer->data)[i] = static_cast<int64_t>(value);
    return;
  case SPMD_I32:
    static_cast<int32_t *>(buffer->data)[i] = static_cast<int32_t>(value);
    return;
  case SPMD_I1:
    static_cast<uint8_t *>(buffer->data)[i] = static_cast<uint8_t>(value);
    return;
  }
}

/// Rounds a value computed in double the way the dtype stores it (the
/// average of integers truncates, f32 rounds).
double asStored(int32_t dtype, double value) {
  switch (dtype) {
  case SPMD_F32:
    return static_cast<float>(value);
  case SPMD_F16:
    return fromF16(toF16(static_cast<float>(value)));
  case SPMD_BF16:
    return fromBf16(toBf16(static_cast<float>(value)));
  case SPMD_I64:
  case SPMD_I32:
    return std::trunc(value);
  }
  return value;
}

/// Machine epsilon of a float dtype (0 for the others).
double epsilonOf(int32_t dtype) {
  switch (dtype) {
  case SPMD_F32:
    return 0x1p-23;
  case SPMD_F64:
    return 0x1p-52;
  case SPMD_F16:
    return 0x1p-10;
  case SPMD_BF16:
    return 0x1p-7;
  }
  return 0;
}

/// How far a result may be from `want`. Sums, max and min of the inputs are
/// exact in every dtype, so only f32's rounding (1e-6 relative) and, on the
/// device, NCCL's average are allowed for: each input (below 16 in
/// magnitude) times a rounded 1/size, then summed, is a few ulps of 16 off.
/// A bf16 average divides in float and rounds to bf16 on MPI too.
double toleranceOf(int32_t dtype, double want, bool average) {
  double tolerance =
      dtype == SPMD_F32 ? 1e-6 * std::max(1.0, std::fabs(want)) : 0;
  if (average && (onDevice || dtype == SPMD_BF16))
    tolerance = std::max(tolerance, 64 * epsilonOf(dtype));
  return tolerance;
}

/// Combines per-member values the way a reduction over the group does.
double reduceValues(int32_t reduce, const std::vector<double> &values) {
  double result = values[0];
  for (size_t i = 1; i < values.size(); ++i) {
    if (reduce == SPMD_REDUCE_MAX)
      result = std::max(result, values[i]);
    else if (reduce == SPMD_REDUCE_MIN)
      result = std::min(result, values[i]);
    else
      result += values[i];
  }
  if (reduce == SPMD_REDUCE_AVG)
    result /= static_cast<double>(values.size());
  return result;
}

#ifdef SPMD_HAVE_NCCL
void checkCuda(cudaError_t rc, const char *call) {
  if (rc != cudaSuccess)
    spmd_rt_fatal("collectives-check: %s failed: %s", call,
                  cudaGetErrorString(rc));
}
#endif

/// A tensor for the runtime: `buffer` on the host, where it is filled and
/// checked, and, on the device, a descriptor of the same shape whose data is
/// device memory (`arg`), kept in step by `upload` and `download`.
struct Buffer {
  SpmdBuffer *buffer;
  SpmdBuffer device;
  Buffer(int32_t dtype, const Shape &shape)
      : buffer(spmd_rt_alloc(dtype, static_cast<int32_t>(shape.size()),
                             shape.data())),
        device(*buffer) {
#ifdef SPMD_HAVE_NCCL
    if (onDevice)
      checkCuda(cudaMalloc(&device.data, std::max<size_t>(bytes(), 1)),
                "cudaMalloc");
#endif
  }
  ~Buffer() {
#ifdef SPMD_HAVE_NCCL
    if (onDevice)
      cudaFree(device.data);
#endif
    spmd_rt_free(buffer);
  }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  SpmdBuffer *operator->() const { return buffer; }
  operator SpmdBuffer *() const { return buffer; }

  /// The buffer the runtime's collectives get.
  SpmdBuffer *arg() { return onDevice ? &device : buffer; }
  size_t bytes() const {
    return static_cast<size_t>(buffer->numel) *
           spmd_rt_dtype_size(buffer->dtype);
  }
  void upload() {
#ifdef SPMD_HAVE_NCCL
    if (onDevice)
      checkCuda(cudaMemcpy(device.data, buffer->data, bytes(),
                           cudaMemcpyHostToDevice),
                "cudaMemcpy to the device");
#endif
  }
  void download() {
#ifdef SPMD_HAVE_NCCL
    if (onDevice)
      checkCuda(cudaMemcpy(buffer->data, device.data, bytes(),
                           cudaMemcpyDeviceToHost),
                "cudaMemcpy from the device");
#endif
  }
};

class Checker {
public:
  Checker(const Shape &mesh, int rank) : mesh(mesh), rank(rank) {
    coords = unravel(rank, mesh);
  }

  int checks = 0;
  int failures = 0;

  /// Records one check: `ok`, or a failure line naming it.
  void expect(bool ok, const std::string &what, const std::string &detail) {
    ++checks;
    if (ok)
      return;
    ++failures;
    std::printf("FAIL rank %d: %s: %s\n", rank, what.c_str(), detail.c_str());
    std::fflush(stdout);
  }

  void checkMeshCoords() {
    // spmd_rt_mesh_coord agrees with row-major ranks.
    for (size_t k = 0; k < mesh.size(); ++k) {
      int64_t got = spmd_rt_mesh_coord(static_cast<int32_t>(k));
      expect(got == coords[k], "mesh_coord(" + std::to_string(k) + ")",
             "got " + std::to_string(got) + ", expected " +
                 std::to_string(coords[k]));
    }
  }

  /// Runs every collective over the mesh dims list `dims`.
  void checkGroup(const Shape &dims) {
    setGroup(dims);
    checkAllReduce();
    checkAllGather();
    checkReduceScatter();
    checkAllToAll();
    checkBroadcast();
  }

  /// An all_reduce and an all_gather over every mesh dim in flight at once,
  /// waited for in the opposite order, each input freed right after.
  void checkTwoInFlight() {
    Shape all;
    for (size_t dim = 0; dim < mesh.size(); ++dim)
      all.push_back(static_cast<int64_t>(dim));
    setGroup(all);
    const Shape shape = {4, 3};
    Shape gathered = shape;
    gathered[0] *= groupSize;
    int64_t s = nextSalt();
    auto in1 = std::make_unique<Buffer>(SPMD_F32, shape);
    auto in2 = std::make_unique<Buffer>(SPMD_I64, shape);
    Buffer out1(SPMD_F32, shape), out2(SPMD_I64, gathered);
    fill(*in1, s);
    fill(*in2, s);
    int32_t n = static_cast<int32_t>(all.size());
    spmd_rt_all_reduce_start(out1.arg(), in1->arg(), n, all.data(),
                             SPMD_REDUCE_SUM);
    spmd_rt_all_gather_start(out2.arg(), in2->arg(), n, all.data(), 0);
    spmd_rt_free(spmd_rt_alloc(SPMD_F32, 0, nullptr));
    spmd_rt_wait(out2.arg(), in2->arg());
    in2.reset();
    spmd_rt_wait(out1.arg(), in1->arg());
    in1.reset();
    compare(out1, shape, describe("all_reduce", SPMD_F32, "two in flight"),
            [&](const Shape &index) {
              std::vector<double> values;
              for (int64_t m = 0; m < groupSize; ++m)
                values.push_back(inputValue(SPMD_F32, memberRank(m),
                                            ravel(index, shape), s));
              return reduceValues(SPMD_REDUCE_SUM, values);
            });
    compare(out2, gathered, describe("all_gather", SPMD_I64, "two in flight"),
            [&](Shape index) {
              int64_t member = index[0] / shape[0];
              index[0] %= shape[0];
              return inputValue(SPMD_I64, memberRank(member),
                                ravel(index, shape), s);
            });
  }

private:
  void setGroup(const Shape &dims) {
    groupDims = dims;
    groupSize = 1;
    position = 0;
    for (int64_t dim : dims) {
      groupSize *= mesh[dim];
      position = position * mesh[dim] + coords[dim];
    }
  }

  /// The world rank of the group member at `member`.
  int memberRank(int64_t member) const {
    Shape memberCoords = coords;
    for (size_t k = groupDims.size(); k-- > 0;) {
      memberCoords[groupDims[k]] = member % mesh[groupDims[k]];
      member /= mesh[groupDims[k]];
    }
    return static_cast<int>(ravel(memberCoords, mesh));
  }

  std::string describe(const char *collective, int32_t dtype,
                       const std::string &extra) const {
    return std::string(collective) + " over mesh dims " +
           formatList(groupDims) + " " + spmd_rt_dtype_name(dtype) +
           (extra.empty() ? "" : " " + extra);
  }

  void fill(SpmdBuffer *buffer, int64_t salt) const {
    for (int64_t i = 0; i < buffer->numel; ++i)
      writeElement(buffer, i, inputValue(buffer->dtype, rank, i, salt));
  }

  /// Fills the host side of `buffer` and copies it to the device.
  void fill(Buffer &buffer, int64_t salt) const {
    fill(buffer.buffer, salt);
    buffer.upload();
  }

  /// Compares every element of `out` with expected(index), one check;
  /// `average` is true for the results of an avg reduction.
  template <typename Expected>
  void compare(Buffer &outBuffer, const Shape &shape, const std::string &what,
               Expected expected, bool average = false) {
    outBuffer.download();
    const SpmdBuffer *out = outBuffer.buffer;
    for (int64_t i = 0; i < out->numel; ++i) {
      double want = asStored(out->dtype, expected(unravel(i, shape)));
      double got = readElement(out, i);
      double tolerance = toleranceOf(out->dtype, want, average);
      if (std::fabs(got - want) > tolerance) {
        char detail[256];
        std::snprintf(detail, sizeof(detail),
                      "element %s is %.17g, expected %.17g",
                      formatList(unravel(i, shape)).c_str(), got, want);
        expect(false, what, detail);
        return;
      }
    }
    expect(true, what, "");
  }

  int64_t nextSalt() { return ++salt; }

  /// The dtypes all_reduce is checked on: bf16 everywhere (MPI through the
  /// runtime's own operators), f16 on NCCL only.
  static std::vector<int32_t> reducedDtypes() {
    std::vector<int32_t> dtypes = {SPMD_F32, SPMD_F64, SPMD_I64, SPMD_I32,
                                   SPMD_BF16};
    if (onDevice)
      dtypes.push_back(SPMD_F16);
    return dtypes;
  }

  void checkAllReduce() {
    const Shape shape = {3, 2, 5};
    for (int32_t dtype : reducedDtypes()) {
      for (int32_t reduce : {SPMD_REDUCE_SUM, SPMD_REDUCE_AVG, SPMD_REDUCE_MAX,
                             SPMD_REDUCE_MIN}) {
        bool isFloat = epsilonOf(dtype) != 0;
        if (reduce == SPMD_REDUCE_AVG && !isFloat)
          continue;
        // f32 sums are also checked in place (out == in).
        for (bool inPlace : {false, true}) {
          if (inPlace && (dtype != SPMD_F32 || reduce != SPMD_REDUCE_SUM))
            continue;
          int64_t s = nextSalt();
          Buffer in(dtype, shape), separate(dtype, shape);
          Buffer &out = inPlace ? in : separate;
          fill(in, s);
          runCollective(spmd_rt_all_reduce, spmd_rt_all_reduce_start, out.arg(),
                        in.arg(), static_cast<int32_t>(groupDims.size()),
                        groupDims.data(), reduce);
          compare(
              out, shape,
              describe("all_reduce", dtype,
                       std::string(reduceName(reduce)) +
                           (inPlace ? " in place" : "")),
              [&](const Shape &index) {
                std::vector<double> values;
                for (int64_t m = 0; m < groupSize; ++m)
                  values.push_back(
                      inputValue(dtype, memberRank(m), ravel(index, shape), s));
                return reduceValues(reduce, values);
              },
              reduce == SPMD_REDUCE_AVG);
        }
      }
    }
  }

  void checkAllGather() {
    const Shape base = {2, 3, 2};
    for (int32_t dtype : {SPMD_F32, SPMD_I64, SPMD_I1}) {
      for (int64_t dim = 0; dim < 3; ++dim) {
        if (dtype == SPMD_I1 && dim != 1)
          continue;
        int64_t s = nextSalt();
        Shape outShape = base;
        outShape[dim] *= groupSize;
        Buffer in(dtype, base), out(dtype, outShape);
        fill(in, s);
        runCollective(spmd_rt_all_gather, spmd_rt_all_gather_start, out.arg(),
                      in.arg(), static_cast<int32_t>(groupDims.size()),
                      groupDims.data(), dim);
        compare(
            out, outShape,
            describe("all_gather", dtype, "gather_dim " + std::to_string(dim)),
            [&](Shape index) {
              int64_t member = index[dim] / base[dim];
              index[dim] %= base[dim];
              return inputValue(dtype, memberRank(member), ravel(index, base),
                                s);
            });
      }
    }
  }

  void checkReduceScatter() {
    const Shape base = {2, 3, 2};
    std::vector<int32_t> dtypes = {SPMD_F32, SPMD_I64, SPMD_BF16};
    if (onDevice) // NCCL reduces f16 too.
      dtypes.push_back(SPMD_F16);
    for (int32_t dtype : dtypes) {
      for (int64_t dim = 0; dim < 3; ++dim) {
        for (int32_t reduce : {SPMD_REDUCE_SUM, SPMD_REDUCE_AVG,
                               SPMD_REDUCE_MAX, SPMD_REDUCE_MIN}) {
          if (reduce == SPMD_REDUCE_AVG && dtype == SPMD_I64)
            continue;
          int64_t s = nextSalt();
          Shape inShape = base;
          inShape[dim] *= groupSize;
          Buffer in(dtype, inShape), out(dtype, base);
          fill(in, s);
          runCollective(spmd_rt_reduce_scatter, spmd_rt_reduce_scatter_start,
                        out.arg(), in.arg(),
                        static_cast<int32_t>(groupDims.size()),
                        groupDims.data(), dim, reduce);
          compare(
              out, base,
              describe("reduce_scatter", dtype,
                       std::string(reduceName(reduce)) + " scatter_dim " +
                           std::to_string(dim)),
              [&](Shape index) {
                index[dim] += position * base[dim];
                std::vector<double> values;
                for (int64_t m = 0; m < groupSize; ++m)
                  values.push_back(inputValue(dtype, memberRank(m),
                                              ravel(index, inShape), s));
                return reduceValues(reduce, values);
              },
              reduce == SPMD_REDUCE_AVG);
        }
      }
    }
  }

  void checkAllToAll() {
    const Shape base = {2, 3, 2};
    for (int32_t dtype : {SPMD_F32, SPMD_I64, SPMD_I1}) {
      for (int64_t split = 0; split < 3; ++split) {
        for (int64_t concat = 0; concat < 3; ++concat) {
          if (dtype == SPMD_I1 && (split != 2 || concat != 1))
            continue;
          int64_t s = nextSalt();
          Shape inShape = base;
          inShape[split] *= groupSize;
          Shape piece = base; // inShape with split_dim / g
          Shape outShape = piece;
          outShape[concat] *= groupSize;
          Buffer in(dtype, inShape), out(dtype, outShape);
          fill(in, s);
          runCollective(spmd_rt_all_to_all, spmd_rt_all_to_all_start, out.arg(),
                        in.arg(), static_cast<int32_t>(groupDims.size()),
                        groupDims.data(), split, concat);
          compare(out, outShape,
                  describe("all_to_all", dtype,
                           "split_dim " + std::to_string(split) +
                               " concat_dim " + std::to_string(concat)),
                  [&](Shape index) {
                    // Piece number `position` of the member the block at
                    // index[concat] came from.
                    int64_t member = index[concat] / piece[concat];
                    index[concat] %= piece[concat];
                    index[split] += position * piece[split];
                    return inputValue(dtype, memberRank(member),
                                      ravel(index, inShape), s);
                  });
        }
      }
    }
  }

  void checkBroadcast() {
    const Shape shape = {4, 3};
    for (int32_t dtype : {SPMD_F32, SPMD_I64, SPMD_I1}) {
      for (int64_t root = 0; root < groupSize; ++root) {
        if (dtype == SPMD_I1 && root != groupSize - 1)
          continue;
        int64_t s = nextSalt();
        Buffer in(dtype, shape), out(dtype, shape);
        fill(in, s);
        runCollective(spmd_rt_broadcast, spmd_rt_broadcast_start, out.arg(),
                      in.arg(), static_cast<int32_t>(groupDims.size()),
                      groupDims.data(), root);
        compare(out, shape,
                describe("broadcast", dtype, "root " + std::to_string(root)),
                [&](const Shape &index) {
                  return inputValue(dtype, memberRank(root),
                                    ravel(index, shape), s);
                });
      }
    }
  }

  Shape mesh;
  int rank;
  Shape coords;
  Shape groupDims;
  int64_t groupSize = 1;
  int64_t position = 0;
  int64_t salt = 0;
};

/// Every subset of {0..ndims) in every order, the empty list first.
std::vector<Shape> allDimLists(int64_t ndims) {
  std::vector<Shape> lists;
  for (int64_t mask = 0; mask < (int64_t{1} << ndims); ++mask) {
    Shape dims;
    for (int64_t dim = 0; dim < ndims; ++dim)
      if (mask & (int64_t{1} << dim))
        dims.push_back(dim);
    do
      lists.push_back(dims);
    while (std::next_permutation(dims.begin(), dims.end()));
  }
  return lists;
}

bool parseMesh(const char *text, Shape &mesh) {
  std::string spec = text;
  size_t start = 0;
  while (true) {
    size_t end = spec.find('x', start);
    std::string part = spec.substr(start, end - start);
    if (part.empty() ||
        part.find_first_not_of("0123456789") != std::string::npos)
      return false;
    mesh.push_back(std::stoll(part));
    if (end == std::string::npos)
      return true;
    start = end + 1;
  }
}

int usage() {
  std::fprintf(stderr, "usage: spmd-collectives-check MESH (e.g. 4 or 2x2) "
                       "[--backend mpi|nccl] [--fail-on-rank R] "
                       "[--bad-shape] [--async]\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  Shape mesh;
  const char *meshText = nullptr;
  const char *backend = "mpi";
  int failRank = -1;
  bool badShape = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
      backend = argv[++i];
    else if (std::strcmp(argv[i], "--fail-on-rank") == 0 && i + 1 < argc)
      failRank = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--bad-shape") == 0)
      badShape = true;
    else if (std::strcmp(argv[i], "--async") == 0)
      async = true;
    else if (!meshText && parseMesh(argv[i], mesh))
      meshText = argv[i];
    else
      return usage();
  }
  if (!meshText)
    return usage();

  // Fatal (naming the reason) when the backend is not built or has no GPU.
  spmd_rt_set_collective_backend(backend);
  onDevice = std::strcmp(backend, "nccl") == 0;
  spmd_rt_init(&argc, &argv);
  int rank = spmd_rt_rank();
  Checker checker(mesh, rank);
  // Before any spmd_rt_set_mesh the mesh is 1-D over the world.
  checker.expect(spmd_rt_mesh_coord(0) == rank, "default mesh_coord(0)",
                 "differs from the rank");
  spmd_rt_set_mesh(static_cast<int32_t>(mesh.size()), mesh.data());

  if (failRank >= 0) {
    if (rank == failRank)
      spmd_rt_fatal("injected failure");
    // The others block in a collective that rank R never joins.
    int64_t value = 1;
    Buffer in(SPMD_I64, {1}), out(SPMD_I64, {1});
    std::memcpy(in->data, &value, sizeof(value));
    in.upload();
    Shape all;
    for (size_t dim = 0; dim < mesh.size(); ++dim)
      all.push_back(static_cast<int64_t>(dim));
    spmd_rt_all_reduce(out.arg(), in.arg(), static_cast<int32_t>(all.size()),
                       all.data(), SPMD_REDUCE_SUM);
  }

  if (badShape) {
    // Gathered over mesh dim 0, out would need dim 0 of size 2 * mesh[0].
    Buffer in(SPMD_F32, {2, 3}), out(SPMD_F32, {2, 3});
    int64_t dims[] = {0};
    spmd_rt_all_gather(out.arg(), in.arg(), 1, dims, 0);
  }

  checker.checkMeshCoords();
  for (const Shape &dims : allDimLists(static_cast<int64_t>(mesh.size())))
    checker.checkGroup(dims);
  if (async)
    checker.checkTwoInFlight();

  // Tally over the job with plain MPI, independently of the runtime.
  int failures = checker.failures, totalFailures = 0;
  MPI_Allreduce(&failures, &totalFailures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (totalFailures == 0)
      std::printf("collectives ok: %d checks on mesh %s\n", checker.checks,
                  meshText);
    else
      std::printf("collectives FAILED: %d failing checks over all ranks on "
                  "mesh %s\n",
                  totalFailures, meshText);
    std::fflush(stdout);
  }
  spmd_rt_finalize();
  return totalFailures == 0 ? 0 : 1;
}
