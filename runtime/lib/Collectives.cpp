//===- Collectives.cpp - device mesh, collectives, MPI backend ------------===//
//
// The C functions of Runtime.h's "Device mesh and collectives" section, the
// choice of backend, and the MPI implementation of `CollectiveBackend`
// (Collectives.h; the NCCL one is in NcclBackend.cpp).
//
// Semantics, per group of g ranks (every piece has the same size, which the
// spmd dialect's verifier guarantees and the functions below re-check):
//
//   all_reduce      out = elementwise sum / avg / max / min over the group
//                   (avg = sum / g);
//   all_gather      out = the members' inputs concatenated along gather_dim
//                   in group order (torch.distributed all_gather_into_tensor,
//                   along any dim);
//   reduce_scatter  the reduction split into g pieces along scatter_dim;
//                   member p keeps piece p (torch.distributed
//                   reduce_scatter_tensor, along any dim);
//   all_to_all      in is split into g pieces along split_dim, piece j goes
//                   to member j, and the received pieces are concatenated
//                   along concat_dim in group order (torch.distributed
//                   all_to_all_single, generalised to split_dim != concat_dim
//                   as in the spmd dialect);
//   broadcast       out = the input of the member at position root.
//
// The backend works on contiguous blocks: collectives along an inner tensor
// dim pack the pieces into blocks before the call or unpack them after, with
// the backend's own memory operations (host memcpy for MPI, device copies
// for NCCL), and every collective ends with the backend's `synchronize`,
// except on the CUDA backend: there the collective is ordered after the
// kernels issued before it and before the kernels that use its result by
// CUDA events (cuda/Device.cu), and returns with the work in flight.
//
//===----------------------------------------------------------------------===//

#include "Collectives.h"

#include "Backends.h"
#include "JobStatus.h"
#include "Math.h"

#ifdef __has_include
#if __has_include(<sanitizer/lsan_interface.h>)
#include <sanitizer/lsan_interface.h>
#endif
#endif
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace spmd::runtime;

namespace {

//===----------------------------------------------------------------------===//
// Messages and validation
//===----------------------------------------------------------------------===//

std::string formatList(const int64_t *values, int64_t n) {
  std::string text = "[";
  for (int64_t i = 0; i < n; ++i) {
    if (i)
      text += ", ";
    text += std::to_string(values[i]);
  }
  return text + "]";
}

std::string formatShape(const SpmdBuffer *buffer) {
  return formatList(buffer->shape, buffer->rank);
}

std::string formatShape(const std::vector<int64_t> &shape) {
  return formatList(shape.data(), static_cast<int64_t>(shape.size()));
}

std::vector<int64_t> shapeOf(const SpmdBuffer *buffer) {
  return std::vector<int64_t>(buffer->shape, buffer->shape + buffer->rank);
}

CollectiveBackend &backend();

/// The dtypes `backend().canReduce` accepts, for messages ("f32, f64, ...").
std::string reducibleDtypes() {
  std::string text;
  for (int32_t dtype = SPMD_F32; dtype <= SPMD_I1; ++dtype)
    if (backend().canReduce(dtype))
      text += std::string(text.empty() ? "" : ", ") + spmd_rt_dtype_name(dtype);
  return text;
}

/// Checks the buffers and dtypes of a collective: both present, same dtype,
/// same tensor rank; a dtype the backend can reduce when `reduces`, any
/// known dtype (moved as bytes) otherwise.
void checkBuffers(const char *what, const SpmdBuffer *out, const SpmdBuffer *in,
                  bool reduces) {
  if (!out || !in)
    spmd_rt_fatal("%s: %s buffer is NULL", what, out ? "in" : "out");
  if (in->dtype < SPMD_F32 || in->dtype > SPMD_I1)
    spmd_rt_fatal("%s: unknown dtype %d", what, in->dtype);
  if (out->dtype != in->dtype)
    spmd_rt_fatal("%s: out dtype %s differs from in dtype %s", what,
                  spmd_rt_dtype_name(out->dtype),
                  spmd_rt_dtype_name(in->dtype));
  if (reduces && !backend().canReduce(in->dtype))
    spmd_rt_fatal("%s: dtype %s cannot be reduced (supported: %s)", what,
                  spmd_rt_dtype_name(in->dtype), reducibleDtypes().c_str());
  if (out->rank != in->rank)
    spmd_rt_fatal("%s: out has rank %d, in has rank %d", what, out->rank,
                  in->rank);
}

void checkReduce(const char *what, int32_t reduce, int32_t dtype) {
  if (reduce < SPMD_REDUCE_SUM || reduce > SPMD_REDUCE_MIN)
    spmd_rt_fatal("%s: unknown reduce kind %d", what, reduce);
  bool isFloat = dtype == SPMD_F32 || dtype == SPMD_F64 || dtype == SPMD_F16 ||
                 dtype == SPMD_BF16;
  if (reduce == SPMD_REDUCE_AVG && !isFloat)
    spmd_rt_fatal("%s: avg of an integer tensor (%s) is not supported", what,
                  spmd_rt_dtype_name(dtype));
  // A sum of truth values is not one (ATen sums bools into i64).
  if (dtype == SPMD_I1 && reduce != SPMD_REDUCE_MAX &&
      reduce != SPMD_REDUCE_MIN)
    spmd_rt_fatal("%s: i1 tensors reduce only by max (any) or min (all)", what);
}

void checkDim(const char *what, const char *role, int64_t dim,
              const SpmdBuffer *buffer) {
  if (dim < 0 || dim >= buffer->rank)
    spmd_rt_fatal("%s: %s %lld is out of range for a tensor of rank %d", what,
                  role, static_cast<long long>(dim), buffer->rank);
}

/// Checks that out has the `expected` shape, which `rule` derives from in's.
void checkShape(const char *what, const SpmdBuffer *out,
                const std::vector<int64_t> &expected, const std::string &rule) {
  if (shapeOf(out) != expected)
    spmd_rt_fatal("%s: out shape %s does not match %s (expected %s)", what,
                  formatShape(out).c_str(), rule.c_str(),
                  formatShape(expected).c_str());
}

/// Fatal unless dim `dim` of `in` splits into `pieces` equal pieces.
void checkSplits(const char *what, const SpmdBuffer *in, int64_t dim,
                 int pieces) {
  if (in->shape[dim] % pieces != 0)
    spmd_rt_fatal("%s: in shape %s: dim %lld of size %lld does not split into "
                  "%d equal pieces",
                  what, formatShape(in).c_str(), static_cast<long long>(dim),
                  static_cast<long long>(in->shape[dim]), pieces);
}

int64_t product(const int64_t *begin, const int64_t *end) {
  int64_t result = 1;
  for (; begin != end; ++begin)
    result *= *begin;
  return result;
}

int64_t bytesOf(const SpmdBuffer *buffer) {
  return buffer->numel *
         static_cast<int64_t>(spmd_rt_dtype_size(buffer->dtype));
}

/// Copies `in` to `out` (a collective over a group of one rank).
void copyBuffer(SpmdBuffer *out, const SpmdBuffer *in, const char *what) {
  int64_t bytes = bytesOf(in);
  backend().copyRows(out->data, bytes, in->data, bytes, bytes, 1, what);
}

/// Scratch memory of the backend for packing, released with the last
/// reference (shared with the steps of an asynchronous collective).
class Scratch {
public:
  Scratch(int64_t bytes, const char *what)
      : data(static_cast<char *>(backend().allocate(bytes, what))), what(what) {
  }
  ~Scratch() { backend().deallocate(data, what); }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;

  char *const data;

private:
  const char *what;
};

//===----------------------------------------------------------------------===//
// Packing: a tensor dim cut into g pieces <-> g contiguous blocks
//===----------------------------------------------------------------------===//

/// src is [outer][g][piece] bytes, dst becomes [g][outer][piece]: block j of
/// dst holds piece j of every outer slice (one strided copy per block).
void splitIntoBlocks(char *dst, const char *src, int64_t outer, int64_t g,
                     int64_t piece, const char *what) {
  for (int64_t j = 0; j < g; ++j)
    backend().copyRows(dst + j * outer * piece, piece, src + j * piece,
                       g * piece, piece, outer, what);
}

/// The inverse: src is [g][outer][piece], dst becomes [outer][g][piece].
void joinBlocks(char *dst, const char *src, int64_t outer, int64_t g,
                int64_t piece, const char *what) {
  for (int64_t j = 0; j < g; ++j)
    backend().copyRows(dst + j * piece, g * piece, src + j * outer * piece,
                       piece, piece, outer, what);
}

//===----------------------------------------------------------------------===//
// Process state: backend and mesh
//===----------------------------------------------------------------------===//

struct RuntimeState {
  /// The backend chosen by spmd_rt_set_collective_backend ("mpi" or "nccl").
  std::string backendName = "mpi";
  std::unique_ptr<CollectiveBackend> backend;
  /// The device mesh; empty until set or first used (then 1-D of the world).
  std::vector<int64_t> meshShape;
  /// This rank's coordinates on meshShape (row-major ranks).
  std::vector<int64_t> meshCoords;
  /// The collectives started and not yet waited for, by their `out`.
  std::map<const SpmdBuffer *, Request> pending;
};

RuntimeState &state() {
  static RuntimeState runtimeState;
  return runtimeState;
}

/// Starts the chosen backend (spmd_rt_set_collective_backend checked that
/// it is built).
void startBackend(int *argc, char ***argv) {
  RuntimeState &s = state();
  s.backend = findCollectiveLibrary(s.backendName)->start(argc, argv);
}

/// The chosen backend, started on first use.
CollectiveBackend &backend() {
  RuntimeState &s = state();
  if (!s.backend)
    startBackend(nullptr, nullptr);
  return *s.backend;
}

void assignMesh(std::vector<int64_t> shape) {
  RuntimeState &s = state();
  s.meshShape = std::move(shape);
  s.meshCoords.assign(s.meshShape.size(), 0);
  int64_t rest = backend().rank();
  for (size_t k = s.meshShape.size(); k-- > 0;) {
    s.meshCoords[k] = rest % s.meshShape[k];
    rest /= s.meshShape[k];
  }
}

const std::vector<int64_t> &meshShape() {
  RuntimeState &s = state();
  if (s.meshShape.empty())
    assignMesh({static_cast<int64_t>(backend().worldSize())});
  return s.meshShape;
}

/// The group of this rank for a collective over `meshDims` (Collectives.h).
CollectiveGroup groupOf(const char *what, int32_t n, const int64_t *meshDims) {
  const std::vector<int64_t> &shape = meshShape();
  const std::vector<int64_t> &coords = state().meshCoords;
  int64_t ndims = static_cast<int64_t>(shape.size());
  if (n < 0 || (n > 0 && !meshDims))
    spmd_rt_fatal("%s: invalid list of %d mesh dims", what, n);
  std::vector<bool> listed(shape.size(), false);
  CollectiveGroup group;
  int64_t position = 0, size = 1;
  for (int32_t i = 0; i < n; ++i) {
    int64_t dim = meshDims[i];
    if (dim < 0 || dim >= ndims)
      spmd_rt_fatal("%s: mesh dim %lld is out of range for mesh %s", what,
                    static_cast<long long>(dim), formatShape(shape).c_str());
    if (listed[dim])
      spmd_rt_fatal("%s: mesh dim %lld is listed twice in %s", what,
                    static_cast<long long>(dim),
                    formatList(meshDims, n).c_str());
    listed[dim] = true;
    group.meshDims.push_back(dim);
    position = position * shape[dim] + coords[dim];
    size *= shape[dim];
  }
  int64_t color = 0;
  for (int64_t dim = 0; dim < ndims; ++dim)
    if (!listed[dim])
      color = color * shape[dim] + coords[dim];
  group.color = static_cast<int>(color);
  group.position = static_cast<int>(position);
  group.size = static_cast<int>(size);
  return group;
}

//===----------------------------------------------------------------------===//
// Collectives along a tensor dim, on the backend's blocks
//===----------------------------------------------------------------------===//

/// all_gather of checked buffers along `dim`, issued (not yet synchronised).
void gatherBlocks(SpmdBuffer *out, const SpmdBuffer *in,
                  const CollectiveGroup &group, int64_t dim, const char *what,
                  Request *async) {
  if (group.size == 1)
    return copyBuffer(out, in, what);
  int64_t bytes = bytesOf(in);
  int64_t outer = product(in->shape, in->shape + dim);
  if (outer == 1 || bytes == 0)
    return backend().allGather(out->data, in->data, bytes, group, what, async);
  // The gathered blocks are [g][outer][piece]; out is [outer][g][piece].
  auto blocks = std::make_shared<Scratch>(bytes * group.size, what);
  backend().allGather(blocks->data, in->data, bytes, group, what, async);
  then(async, [=, size = group.size] {
    joinBlocks(static_cast<char *>(out->data), blocks->data, outer, size,
               bytes / outer, what);
  });
}

/// reduce_scatter of checked buffers along `dim`, issued.
void scatterBlocks(SpmdBuffer *out, const SpmdBuffer *in,
                   const CollectiveGroup &group, int64_t dim, int32_t reduce,
                   const char *what, Request *async) {
  if (group.size == 1)
    return copyBuffer(out, in, what);
  int64_t blockCount = out->numel;
  int64_t outer = product(in->shape, in->shape + dim);
  if (outer == 1 || blockCount == 0)
    return backend().reduceScatter(out->data, in->data, blockCount, in->dtype,
                                   reduce, group, what, async);
  // in is [outer][g][piece]; the backend scatters blocks [g][outer][piece].
  int64_t blockBytes = bytesOf(out);
  auto blocks = std::make_shared<Scratch>(blockBytes * group.size, what);
  splitIntoBlocks(blocks->data, static_cast<const char *>(in->data), outer,
                  group.size, blockBytes / outer, what);
  backend().reduceScatter(out->data, blocks->data, blockCount, in->dtype,
                          reduce, group, what, async);
  then(async, [blocks] {}); // the blocks are read until the end
}

/// all_to_all of checked buffers (`piece`: the shape of one piece), issued.
void exchangeBlocks(SpmdBuffer *out, const SpmdBuffer *in,
                    const CollectiveGroup &group, int64_t splitDim,
                    int64_t concatDim, const std::vector<int64_t> &piece,
                    const char *what, Request *async) {
  if (group.size == 1)
    return copyBuffer(out, in, what);
  int64_t blockBytes = bytesOf(in) / group.size;
  if (blockBytes == 0)
    return backend().allToAll(out->data, in->data, 0, group, what, async);
  // Send blocks: piece j of in along split_dim, contiguous.
  const char *send = static_cast<const char *>(in->data);
  int64_t splitOuter = product(in->shape, in->shape + splitDim);
  bool packSend = splitOuter != 1 || out->data == in->data;
  auto sendBlocks =
      std::make_shared<Scratch>(packSend ? blockBytes * group.size : 0, what);
  if (packSend) {
    splitIntoBlocks(sendBlocks->data, send, splitOuter, group.size,
                    blockBytes / splitOuter, what);
    send = sendBlocks->data;
  }
  // Received blocks: piece i from member i, concatenated along concat_dim.
  int64_t concatOuter = product(piece.data(), piece.data() + concatDim);
  if (concatOuter == 1) {
    backend().allToAll(out->data, send, blockBytes, group, what, async);
    return then(async, [sendBlocks] {});
  }
  auto recvBlocks = std::make_shared<Scratch>(blockBytes * group.size, what);
  backend().allToAll(recvBlocks->data, send, blockBytes, group, what, async);
  then(async, [=, keep = sendBlocks, size = group.size] {
    joinBlocks(static_cast<char *>(out->data), recvBlocks->data, concatOuter,
               size, blockBytes / concatOuter, what);
  });
}

//===----------------------------------------------------------------------===//
// MPI helpers
//===----------------------------------------------------------------------===//

int toMpiCount(int64_t count, const char *what) {
  if (count < 0 || count > INT_MAX)
    spmd_rt_fatal("%s: %lld elements do not fit in one MPI call", what,
                  static_cast<long long>(count));
  return static_cast<int>(count);
}

MPI_Datatype mpiType(int32_t dtype, const char *what) {
  switch (dtype) {
  case SPMD_F32:
    return MPI_FLOAT;
  case SPMD_F64:
    return MPI_DOUBLE;
  case SPMD_I64:
    return MPI_INT64_T;
  case SPMD_I32:
    return MPI_INT32_T;
  case SPMD_BF16: // its bits; reduced by the bf16 operators below
    return MPI_UINT16_T;
  case SPMD_I1: // 0 or 1 bytes: max is "any", min is "all"
    return MPI_UINT8_T;
  }
  spmd_rt_fatal("%s: dtype %s cannot be reduced", what,
                spmd_rt_dtype_name(dtype));
}

/// MPI has no bf16: inout = in (op) inout element by element, each pair
/// computed in float and rounded once to bf16, as NCCL reduces bf16.
template <typename Combine>
void bf16Reduce(void *in, void *inout, int *len, MPI_Datatype *) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = spmd::rt::floatToBf16(
        Combine()(spmd::rt::bf16ToFloat(a[i]), spmd::rt::bf16ToFloat(b[i])));
}
struct Plus {
  float operator()(float a, float b) const { return a + b; }
};
struct Max {
  float operator()(float a, float b) const {
    return std::isnan(a) || a > b ? a : b;
  }
};
struct Min {
  float operator()(float a, float b) const {
    return std::isnan(a) || a < b ? a : b;
  }
};

/// The bf16 operators, created on first use (they outlive every
/// communicator; MPI frees them at MPI_Finalize).
MPI_Op bf16Op(int32_t reduce, const char *what) {
  static MPI_Op ops[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  static MPI_User_function *const fns[3] = {bf16Reduce<Plus>, bf16Reduce<Max>,
                                            bf16Reduce<Min>};
  int k = reduce == SPMD_REDUCE_MAX ? 1 : reduce == SPMD_REDUCE_MIN ? 2 : 0;
  if (ops[k] == MPI_OP_NULL)
    checkMpi(MPI_Op_create(fns[k], /*commute=*/1, &ops[k]), what,
             "MPI_Op_create");
  return ops[k];
}

MPI_Op mpiOp(int32_t reduce, int32_t dtype, const char *what) {
  if (reduce < SPMD_REDUCE_SUM || reduce > SPMD_REDUCE_MIN)
    spmd_rt_fatal("%s: unknown reduce kind %d", what, reduce);
  if (dtype == SPMD_BF16)
    return bf16Op(reduce, what);
  switch (reduce) {
  case SPMD_REDUCE_MAX:
    return MPI_MAX;
  case SPMD_REDUCE_MIN:
    return MPI_MIN;
  default: // MPI has no average: sum, then divide.
    return MPI_SUM;
  }
}

template <typename T> void divideAll(void *data, int64_t count, int divisor) {
  T *values = static_cast<T *>(data);
  for (int64_t i = 0; i < count; ++i)
    values[i] = static_cast<T>(values[i] / static_cast<T>(divisor));
}

/// The avg of a sum over `size` ranks.
void finishAverage(void *data, int64_t count, int32_t dtype, int size) {
  switch (dtype) {
  case SPMD_F32:
    return divideAll<float>(data, count, size);
  case SPMD_F64:
    return divideAll<double>(data, count, size);
  case SPMD_I64:
    return divideAll<int64_t>(data, count, size);
  case SPMD_I32:
    return divideAll<int32_t>(data, count, size);
  case SPMD_BF16: {
    auto *bits = static_cast<uint16_t *>(data);
    for (int64_t i = 0; i < count; ++i)
      bits[i] = spmd::rt::floatToBf16(spmd::rt::bf16ToFloat(bits[i]) /
                                      static_cast<float>(size));
    return;
  }
  }
}

/// `bytes` bytes as MPI elements: the widest unsigned integer type that
/// divides it, so that blocks up to 16 GiB fit in an int count.
std::pair<MPI_Datatype, int> byteBlock(int64_t bytes, const char *what) {
  if (bytes % 8 == 0)
    return {MPI_UINT64_T, toMpiCount(bytes / 8, what)};
  if (bytes % 4 == 0)
    return {MPI_UINT32_T, toMpiCount(bytes / 4, what)};
  if (bytes % 2 == 0)
    return {MPI_UINT16_T, toMpiCount(bytes / 2, what)};
  return {MPI_BYTE, toMpiCount(bytes, what)};
}

} // namespace

bool CollectiveBackend::canReduce(int32_t dtype) const {
  return dtype == SPMD_F32 || dtype == SPMD_F64 || dtype == SPMD_I64 ||
         dtype == SPMD_I32 || dtype == SPMD_BF16 || dtype == SPMD_I1;
}

//===----------------------------------------------------------------------===//
// MpiBackend
//===----------------------------------------------------------------------===//

namespace {
#if defined(__SANITIZE_ADDRESS__)
#define SPMD_RT_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPMD_RT_LSAN 1
#endif
#endif
/// In the sanitizer build: MPI's own allocations are not spmd's leaks, and
/// LeakSanitizer cannot always tell, since MPI_Finalize unloads the
/// components that made them (their frames become "<unknown module>",
/// which no suppression can name). What MPI_Init, MPI_Comm_split and
/// MPI_Finalize allocate is kept from the check; in a job of two or more ranks,
/// whose progress threads allocate throughout, the check runs once, right after
/// MPI_Init, instead of at exit. Single-process runs keep the full check at
/// exit.
struct MpiOwnedAllocations {
#ifdef SPMD_RT_LSAN
  __lsan::ScopedDisabler disabler;
#endif
};
void skipExitLeakCheckInMultiRankJobs(int ranks) {
#ifdef SPMD_RT_LSAN
  if (ranks > 1)
    __lsan_do_leak_check();
#endif
  (void)ranks;
}
} // namespace

MpiBackend::MpiBackend(int *argc, char ***argv) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    spmd_rt_fatal("MPI was finalised; the runtime cannot start again");
  if (!initialized) {
    // Works without mpirun too: a singleton job of one rank.
    MpiOwnedAllocations mpiOwned;
    checkMpi(MPI_Init(argc, argv), "init", "MPI_Init");
    ownsMpi = true;
  }
  checkMpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "init",
           "MPI_Comm_set_errhandler");
  checkMpi(MPI_Comm_rank(MPI_COMM_WORLD, &worldRank), "init", "MPI_Comm_rank");
  checkMpi(MPI_Comm_size(MPI_COMM_WORLD, &worldRanks), "init", "MPI_Comm_size");
  skipExitLeakCheckInMultiRankJobs(worldRanks);
}

MpiBackend::~MpiBackend() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return;
  MpiOwnedAllocations mpiOwned;
  resetGroups();
  if (ownsMpi)
    checkMpi(MPI_Finalize(), "finalize", "MPI_Finalize");
}

void MpiBackend::resetGroups() {
  for (auto &entry : comms)
    checkMpi(MPI_Comm_free(&entry.second), "finalize", "MPI_Comm_free");
  comms.clear();
}

void *MpiBackend::allocate(int64_t bytes, const char *what) {
  if (bytes <= 0)
    return nullptr;
  void *data = std::malloc(static_cast<size_t>(bytes));
  if (!data)
    spmd_rt_fatal("%s: out of memory allocating %lld bytes of scratch", what,
                  static_cast<long long>(bytes));
  return data;
}

void MpiBackend::deallocate(void *data, const char *what) { std::free(data); }

void MpiBackend::copyRows(void *dst, int64_t dstPitch, const void *src,
                          int64_t srcPitch, int64_t width, int64_t rows,
                          const char *what) {
  if (width <= 0 || dst == src)
    return;
  for (int64_t r = 0; r < rows; ++r)
    std::memmove(static_cast<char *>(dst) + r * dstPitch,
                 static_cast<const char *>(src) + r * srcPitch,
                 static_cast<size_t>(width));
}

MPI_Comm MpiBackend::communicator(const CollectiveGroup &group,
                                  const char *what) {
  auto found = comms.find(group.meshDims);
  if (found != comms.end())
    return found->second;
  // Collective over MPI_COMM_WORLD: every rank reaches the first collective
  // over these mesh dims at the same point of the (SPMD) program.
  MPI_Comm comm = MPI_COMM_NULL;
  MpiOwnedAllocations mpiOwned;
  checkMpi(MPI_Comm_split(MPI_COMM_WORLD, group.color, group.position, &comm),
           what, "MPI_Comm_split");
  checkMpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN), what,
           "MPI_Comm_set_errhandler");
  int commRank = 0, commSize = 0;
  checkMpi(MPI_Comm_rank(comm, &commRank), what, "MPI_Comm_rank");
  checkMpi(MPI_Comm_size(comm, &commSize), what, "MPI_Comm_size");
  if (commRank != group.position || commSize != group.size)
    spmd_rt_fatal("%s: the communicator of mesh dims %s has rank %d of %d, "
                  "expected %d of %d",
                  what,
                  formatList(group.meshDims.data(),
                             static_cast<int64_t>(group.meshDims.size()))
                      .c_str(),
                  commRank, commSize, group.position, group.size);
  comms.emplace(group.meshDims, comm);
  return comm;
}

MPI_Request *MpiBackend::track(Request *async, const char *what) {
  auto request = std::make_shared<MPI_Request>(MPI_REQUEST_NULL);
  inFlight.push_back(request);
  async->steps.push_back([request, what] {
    checkMpi(MPI_Wait(request.get(), MPI_STATUS_IGNORE), what, "MPI_Wait");
  });
  return request.get();
}

void MpiBackend::progress() {
  for (auto it = inFlight.begin(); it != inFlight.end();) {
    std::shared_ptr<MPI_Request> request = it->lock();
    int done = 1;
    if (request && *request != MPI_REQUEST_NULL)
      checkMpi(MPI_Test(request.get(), &done, MPI_STATUS_IGNORE), "progress",
               "MPI_Test");
    it = done ? inFlight.erase(it) : it + 1;
  }
}

void MpiBackend::allReduce(void *out, const void *in, int64_t count,
                           int32_t dtype, int32_t reduce,
                           const CollectiveGroup &group, const char *what,
                           Request *async) {
  MPI_Comm comm = communicator(group, what);
  const void *send = out == in ? MPI_IN_PLACE : in;
  int n = toMpiCount(count, what);
  MPI_Datatype type = mpiType(dtype, what);
  MPI_Op op = mpiOp(reduce, dtype, what);
  if (async)
    checkMpi(MPI_Iallreduce(send, out, n, type, op, comm, track(async, what)),
             what, "MPI_Iallreduce");
  else
    checkMpi(MPI_Allreduce(send, out, n, type, op, comm), what,
             "MPI_Allreduce");
  if (reduce == SPMD_REDUCE_AVG)
    then(async,
         [=, size = group.size] { finishAverage(out, count, dtype, size); });
}

void MpiBackend::allGather(void *out, const void *in, int64_t bytes,
                           const CollectiveGroup &group, const char *what,
                           Request *async) {
  MPI_Comm comm = communicator(group, what);
  auto [type, count] = byteBlock(bytes, what);
  if (async)
    checkMpi(MPI_Iallgather(in, count, type, out, count, type, comm,
                            track(async, what)),
             what, "MPI_Iallgather");
  else
    checkMpi(MPI_Allgather(in, count, type, out, count, type, comm), what,
             "MPI_Allgather");
}

void MpiBackend::reduceScatter(void *out, const void *in, int64_t count,
                               int32_t dtype, int32_t reduce,
                               const CollectiveGroup &group, const char *what,
                               Request *async) {
  MPI_Comm comm = communicator(group, what);
  int n = toMpiCount(count, what);
  MPI_Datatype type = mpiType(dtype, what);
  MPI_Op op = mpiOp(reduce, dtype, what);
  if (async)
    checkMpi(MPI_Ireduce_scatter_block(in, out, n, type, op, comm,
                                       track(async, what)),
             what, "MPI_Ireduce_scatter_block");
  else
    checkMpi(MPI_Reduce_scatter_block(in, out, n, type, op, comm), what,
             "MPI_Reduce_scatter_block");
  if (reduce == SPMD_REDUCE_AVG)
    then(async,
         [=, size = group.size] { finishAverage(out, count, dtype, size); });
}

void MpiBackend::allToAll(void *out, const void *in, int64_t bytes,
                          const CollectiveGroup &group, const char *what,
                          Request *async) {
  MPI_Comm comm = communicator(group, what);
  auto [type, count] = byteBlock(bytes, what);
  if (async)
    checkMpi(MPI_Ialltoall(in, count, type, out, count, type, comm,
                           track(async, what)),
             what, "MPI_Ialltoall");
  else
    checkMpi(MPI_Alltoall(in, count, type, out, count, type, comm), what,
             "MPI_Alltoall");
}

void MpiBackend::broadcast(void *buffer, int64_t bytes, int root,
                           const CollectiveGroup &group, const char *what,
                           Request *async) {
  MPI_Comm comm = communicator(group, what);
  auto [type, count] = byteBlock(bytes, what);
  if (async)
    checkMpi(MPI_Ibcast(buffer, count, type, root, comm, track(async, what)),
             what, "MPI_Ibcast");
  else
    checkMpi(MPI_Bcast(buffer, count, type, root, comm), what, "MPI_Bcast");
}

const CollectiveLibrary &spmd::runtime::mpiLibrary() {
  static const CollectiveLibrary mpi = {"mpi", nullptr,
                                        startLibrary<MpiBackend>};
  return mpi;
}

namespace {

/// Orders a collective after the kernels issued before it (CUDA backend).
void startCollective(const char *what) {
  if (auto before = spmd::rt::activeBackend().beforeCollective)
    before(what);
}

/// Completes a collective: on return for the host backends (at its wait
/// when `async`); with the CUDA backend, events make its result
/// wait-at-first-use (Device.cu).
void finishCollective(SpmdBuffer *out, const SpmdBuffer *in, const char *what,
                      Request *async) {
  if (auto after = spmd::rt::activeBackend().afterCollective)
    return after(out, in, what);
  then(async, [=] { backend().synchronize(what); });
}

/// Runs the steps that complete the collective started on `out`, if any.
void complete(const SpmdBuffer *out) {
  auto &pending = state().pending;
  auto found = pending.find(out);
  if (found == pending.end())
    return;
  Request request = std::move(found->second);
  pending.erase(found);
  for (auto &step : request.steps)
    step();
}

/// Starts `collective` (called with the Request to fill, or null to run
/// it synchronously) and records it under `out`. Synchronous where the
/// backends cannot leave it in flight: the CUDA backend (already queued
/// on its communication stream) and collective backends without
/// supportsAsync.
template <typename Collective>
void start(SpmdBuffer *out, const char *what, Collective collective) {
  if (spmd::rt::activeBackend().afterCollective || !backend().supportsAsync())
    return collective(nullptr);
  auto &pending = state().pending;
  if (pending.count(out))
    spmd_rt_fatal("%s: its result buffer already has a collective in flight",
                  what);
  Request request;
  collective(&request);
  if (!request.steps.empty())
    pending.emplace(out, std::move(request));
}

} // namespace

namespace {

void allReduceCollective(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                         const int64_t *mesh_dims, int32_t reduce,
                         Request *async) {
  const char *what = "all_reduce";
  checkBuffers(what, out, in, /*reduces=*/true);
  checkReduce(what, reduce, in->dtype);
  checkShape(what, out, shapeOf(in), "in shape " + formatShape(in));
  CollectiveGroup group = groupOf(what, n, mesh_dims);
  startCollective(what);
  if (group.size == 1)
    copyBuffer(out, in, what);
  else
    backend().allReduce(out->data, in->data, in->numel, in->dtype, reduce,
                        group, what, async);
  finishCollective(out, in, what, async);
}

void allGatherCollective(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                         const int64_t *mesh_dims, int64_t gather_dim,
                         Request *async) {
  const char *what = "all_gather";
  checkBuffers(what, out, in, /*reduces=*/false);
  checkDim(what, "gather_dim", gather_dim, in);
  CollectiveGroup group = groupOf(what, n, mesh_dims);
  startCollective(what);
  std::vector<int64_t> expected = shapeOf(in);
  expected[gather_dim] *= group.size;
  checkShape(what, out, expected,
             "in shape " + formatShape(in) + " gathered from " +
                 std::to_string(group.size) + " ranks along dim " +
                 std::to_string(gather_dim));
  gatherBlocks(out, in, group, gather_dim, what, async);
  finishCollective(out, in, what, async);
}

void reduceScatterCollective(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                             const int64_t *mesh_dims, int64_t scatter_dim,
                             int32_t reduce, Request *async) {
  const char *what = "reduce_scatter";
  checkBuffers(what, out, in, /*reduces=*/true);
  checkReduce(what, reduce, in->dtype);
  checkDim(what, "scatter_dim", scatter_dim, in);
  CollectiveGroup group = groupOf(what, n, mesh_dims);
  startCollective(what);
  checkSplits(what, in, scatter_dim, group.size);
  std::vector<int64_t> expected = shapeOf(in);
  expected[scatter_dim] /= group.size;
  checkShape(what, out, expected,
             "in shape " + formatShape(in) + " scattered to " +
                 std::to_string(group.size) + " ranks along dim " +
                 std::to_string(scatter_dim));
  scatterBlocks(out, in, group, scatter_dim, reduce, what, async);
  finishCollective(out, in, what, async);
}

void allToAllCollective(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                        const int64_t *mesh_dims, int64_t split_dim,
                        int64_t concat_dim, Request *async) {
  const char *what = "all_to_all";
  checkBuffers(what, out, in, /*reduces=*/false);
  checkDim(what, "split_dim", split_dim, in);
  checkDim(what, "concat_dim", concat_dim, in);
  CollectiveGroup group = groupOf(what, n, mesh_dims);
  startCollective(what);
  checkSplits(what, in, split_dim, group.size);
  // The shape of one piece, and of the concatenation of the g received ones.
  std::vector<int64_t> piece = shapeOf(in);
  piece[split_dim] /= group.size;
  std::vector<int64_t> expected = piece;
  expected[concat_dim] *= group.size;
  checkShape(what, out, expected,
             "in shape " + formatShape(in) + " split " +
                 std::to_string(group.size) + " ways along dim " +
                 std::to_string(split_dim) + " and concatenated along dim " +
                 std::to_string(concat_dim));
  exchangeBlocks(out, in, group, split_dim, concat_dim, piece, what, async);
  finishCollective(out, in, what, async);
}

void broadcastCollective(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                         const int64_t *mesh_dims, int64_t root,
                         Request *async) {
  const char *what = "broadcast";
  checkBuffers(what, out, in, /*reduces=*/false);
  checkShape(what, out, shapeOf(in), "in shape " + formatShape(in));
  CollectiveGroup group = groupOf(what, n, mesh_dims);
  startCollective(what);
  if (root < 0 || root >= group.size)
    spmd_rt_fatal("%s: root %lld is out of range for a group of %d ranks", what,
                  static_cast<long long>(root), group.size);
  if (group.position == root)
    copyBuffer(out, in, what);
  if (group.size > 1)
    backend().broadcast(out->data, bytesOf(out), static_cast<int>(root), group,
                        what, async);
  finishCollective(out, in, what, async);
}

} // namespace

//===----------------------------------------------------------------------===//
// C ABI
//===----------------------------------------------------------------------===//

extern "C" {

int32_t spmd_rt_set_collective_backend(const char *name) {
  std::string wanted = name ? name : "(null)";
  if (wanted != "mpi" && wanted != "nccl")
    spmd_rt_fatal("unknown collective backend '%s' (known: mpi, nccl)",
                  wanted.c_str());
  const CollectiveLibrary *library = findCollectiveLibrary(wanted);
  if (!library)
    spmd_rt_fatal("collective backend '%s' is not built (CUDA toolkit or "
                  "NCCL not found at configure time)",
                  wanted.c_str());
  RuntimeState &s = state();
  if (s.backend) {
    if (wanted == s.backend->name())
      return 0;
    // A running backend owns communicators (and, for NCCL, the device).
    spmd_rt_fatal("collective backend '%s' must be chosen before spmd_rt_init "
                  "and the first collective ('%s' is running)",
                  wanted.c_str(), s.backend->name());
  }
  if (library->requireRunnable)
    library->requireRunnable();
  s.backendName = wanted;
  return 0;
}

void spmd_rt_init(int *argc, char ***argv) {
  RuntimeState &s = state();
  if (!s.backend)
    startBackend(argc, argv);
  spmd::rt::jobStatusStart(s.backend->rank(), s.backend->worldSize());
}

void spmd_rt_finalize(void) {
  RuntimeState &s = state();
  spmd::rt::jobStatusDone();
  // Device errors are reported while MPI can still end the job; the streams
  // outlive the communicators that use them.
  while (!s.pending.empty())
    complete(s.pending.begin()->first);
  const spmd::rt::Backend &compute = spmd::rt::activeBackend();
  bool started = s.backend != nullptr;
  if (started && compute.finish)
    compute.finish();
  s.meshShape.clear();
  s.meshCoords.clear();
  s.backend.reset();
  if (started && compute.shutdown)
    compute.shutdown();
}

int32_t spmd_rt_rank(void) { return backend().rank(); }

int32_t spmd_rt_world_size(void) { return backend().worldSize(); }

void spmd_rt_set_mesh(int32_t ndims, const int64_t *shape) {
  if (ndims < 1 || ndims > SPMD_MAX_RANK || !shape)
    spmd_rt_fatal("a mesh needs 1 to %d dims, got %d", SPMD_MAX_RANK, ndims);
  std::vector<int64_t> newShape(shape, shape + ndims);
  for (int64_t size : newShape)
    if (size < 1)
      spmd_rt_fatal("mesh %s has a dim of size %lld",
                    formatShape(newShape).c_str(),
                    static_cast<long long>(size));
  int64_t ranks = product(shape, shape + ndims);
  int worldSize = backend().worldSize();
  if (ranks != worldSize)
    spmd_rt_fatal("mesh %s needs %lld ranks, the job has %d",
                  formatShape(newShape).c_str(), static_cast<long long>(ranks),
                  worldSize);
  RuntimeState &s = state();
  if (s.meshShape == newShape)
    return;
  // Groups are cut along the mesh: they no longer hold.
  backend().resetGroups();
  assignMesh(std::move(newShape));
}

int64_t spmd_rt_mesh_coord(int32_t dim) {
  const std::vector<int64_t> &shape = meshShape();
  if (dim < 0 || dim >= static_cast<int32_t>(shape.size()))
    spmd_rt_fatal("mesh_coord: dim %d is out of range for mesh %s", dim,
                  formatShape(shape).c_str());
  return state().meshCoords[dim];
}

void spmd_rt_all_reduce(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                        const int64_t *mesh_dims, int32_t reduce) {
  allReduceCollective(out, in, n, mesh_dims, reduce, nullptr);
}

void spmd_rt_all_reduce_start(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                              const int64_t *mesh_dims, int32_t reduce) {
  start(out, "all_reduce", [&](Request *async) {
    allReduceCollective(out, in, n, mesh_dims, reduce, async);
  });
}

void spmd_rt_all_gather(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                        const int64_t *mesh_dims, int64_t gather_dim) {
  allGatherCollective(out, in, n, mesh_dims, gather_dim, nullptr);
}

void spmd_rt_all_gather_start(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                              const int64_t *mesh_dims, int64_t gather_dim) {
  start(out, "all_gather", [&](Request *async) {
    allGatherCollective(out, in, n, mesh_dims, gather_dim, async);
  });
}

void spmd_rt_reduce_scatter(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                            const int64_t *mesh_dims, int64_t scatter_dim,
                            int32_t reduce) {
  reduceScatterCollective(out, in, n, mesh_dims, scatter_dim, reduce, nullptr);
}

void spmd_rt_reduce_scatter_start(SpmdBuffer *out, const SpmdBuffer *in,
                                  int32_t n, const int64_t *mesh_dims,
                                  int64_t scatter_dim, int32_t reduce) {
  start(out, "reduce_scatter", [&](Request *async) {
    reduceScatterCollective(out, in, n, mesh_dims, scatter_dim, reduce, async);
  });
}

void spmd_rt_all_to_all(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                        const int64_t *mesh_dims, int64_t split_dim,
                        int64_t concat_dim) {
  allToAllCollective(out, in, n, mesh_dims, split_dim, concat_dim, nullptr);
}

void spmd_rt_all_to_all_start(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                              const int64_t *mesh_dims, int64_t split_dim,
                              int64_t concat_dim) {
  start(out, "all_to_all", [&](Request *async) {
    allToAllCollective(out, in, n, mesh_dims, split_dim, concat_dim, async);
  });
}

void spmd_rt_broadcast(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                       const int64_t *mesh_dims, int64_t root) {
  broadcastCollective(out, in, n, mesh_dims, root, nullptr);
}

void spmd_rt_broadcast_start(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                             const int64_t *mesh_dims, int64_t root) {
  start(out, "broadcast", [&](Request *async) {
    broadcastCollective(out, in, n, mesh_dims, root, async);
  });
}

void spmd_rt_wait(SpmdBuffer *out, const SpmdBuffer *in) {
  (void)in; // the caller kept it allocated until here
  complete(out);
}

} // extern "C"

void spmd::runtime::checkMpi(int rc, const char *what, const char *call) {
  if (rc == MPI_SUCCESS)
    return;
  char message[MPI_MAX_ERROR_STRING + 1] = {0};
  int length = 0;
  if (MPI_Error_string(rc, message, &length) != MPI_SUCCESS)
    std::snprintf(message, sizeof(message), "error code %d", rc);
  spmd_rt_fatal("%s: %s failed: %s", what, call, message);
}

void spmd::runtime::then(Request *async, std::function<void()> step) {
  if (async)
    async->steps.push_back(std::move(step));
  else
    step();
}

void spmd::runtime::progressCollectives() {
  if (!state().pending.empty())
    backend().progress();
}

void spmd::runtime::completeCollective(const SpmdBuffer *out) {
  if (!state().pending.empty())
    complete(out);
}
