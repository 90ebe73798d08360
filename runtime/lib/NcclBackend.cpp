//===- NcclBackend.cpp - NCCL collective backend on device buffers --------===//
//
// `NcclBackend` (NcclBackend.h). Plain C++ against the CUDA runtime API and
// NCCL: no kernels of our own, so no nvcc. Packing for collectives along an
// inner tensor dim is done by the C layer (Collectives.cpp) through
// `copyRows` (cudaMemcpy2DAsync); averages use ncclAvg.
//
// Every operation is issued on one stream (`stream()`). With the CPU kernels
// (device buffers handed in by the caller, as the collective test driver
// does) each collective of Runtime.h ends with `synchronize`
// (cudaStreamSynchronize), so it is complete on return, as with MPI. With the
// CUDA backend the stream is its communication stream and collectives return
// with the work in flight, ordered against the kernels by events
// (cuda/Device.cu).
//
// NCCL API references (NCCL user guide, API section):
//   communicators  ncclGetUniqueId, ncclCommInitRank, ncclCommSplit (2.18),
//                  ncclCommDestroy, ncclCommCount, ncclCommUserRank;
//   collectives    ncclAllReduce, ncclAllGather, ncclReduceScatter,
//                  ncclBroadcast; ncclAvg since 2.10, ncclBfloat16 since 2.10;
//   point-to-point ncclSend/ncclRecv (2.7) inside ncclGroupStart/End, which
//                  NCCL runs as one operation (the guide's all-to-all
//                  example).
//
//===----------------------------------------------------------------------===//

#include "NcclBackend.h"

#include "Backends.h"

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace spmd::runtime;

namespace {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

void checkCuda(cudaError_t rc, const char *what, const char *call) {
  if (rc != cudaSuccess)
    spmd_rt_fatal("%s: %s failed: %s", what, call, cudaGetErrorString(rc));
}

void checkNccl(ncclResult_t rc, const char *what, const char *call) {
  if (rc == ncclSuccess)
    return;
  std::string detail;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 13, 0)
  // The last error's own text (e.g. which peer or resource); `comm` unused.
  if (const char *last = ncclGetLastError(nullptr); last && *last)
    detail = std::string(" (") + last + ")";
#endif
  spmd_rt_fatal("%s: %s failed: %s%s", what, call, ncclGetErrorString(rc),
                detail.c_str());
}

//===----------------------------------------------------------------------===//
// Types and devices
//===----------------------------------------------------------------------===//

/// The NCCL type of a reducible dtype; false for the others.
bool ncclTypeOf(int32_t dtype, ncclDataType_t &type) {
  switch (dtype) {
  case SPMD_F32:
    type = ncclFloat32;
    return true;
  case SPMD_F64:
    type = ncclFloat64;
    return true;
  case SPMD_I64:
    type = ncclInt64;
    return true;
  case SPMD_I32:
    type = ncclInt32;
    return true;
  case SPMD_F16:
    type = ncclFloat16;
    return true;
  case SPMD_I1: // 0 or 1 bytes: max is "any", min is "all"
    type = ncclUint8;
    return true;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
  case SPMD_BF16:
    type = ncclBfloat16;
    return true;
#endif
  }
  return false;
}

ncclDataType_t ncclType(int32_t dtype, const char *what) {
  ncclDataType_t type = ncclUint8;
  if (!ncclTypeOf(dtype, type))
    spmd_rt_fatal("%s: dtype %d cannot be reduced by NCCL", what, dtype);
  return type;
}

ncclRedOp_t ncclOp(int32_t reduce, const char *what) {
  switch (reduce) {
  case SPMD_REDUCE_SUM:
    return ncclSum;
  case SPMD_REDUCE_AVG:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
    // Floats only (the C layer rejects integer averages): NCCL scales each
    // input by 1/size before the sum, which may differ from sum / size in
    // the last bit when size is not a power of two.
    return ncclAvg;
#else
    spmd_rt_fatal("%s: avg needs ncclAvg (NCCL >= 2.10); this runtime was "
                  "built against NCCL %d.%d.%d",
                  what, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
#endif
  case SPMD_REDUCE_MAX:
    return ncclMax;
  case SPMD_REDUCE_MIN:
    return ncclMin;
  }
  spmd_rt_fatal("%s: unknown reduce kind %d", what, reduce);
}

size_t toSize(int64_t count, const char *what) {
  if (count < 0)
    spmd_rt_fatal("%s: negative count %lld", what,
                  static_cast<long long>(count));
  return static_cast<size_t>(count);
}

/// This process's rank among the job's processes on its node: the launcher's
/// variable when Open MPI set it (same launcher for every rank, so either
/// all ranks take the collective fallback or none), else the rank in
/// MPI_Comm_split_type(SHARED).
int localRank(int worldRank) {
  if (const char *env = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
    char *end = nullptr;
    long value = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && value >= 0)
      return static_cast<int>(value);
  }
  const char *what = "init";
  MPI_Comm node = MPI_COMM_NULL;
  checkMpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank,
                               MPI_INFO_NULL, &node),
           what, "MPI_Comm_split_type");
  int rank = 0;
  checkMpi(MPI_Comm_rank(node, &rank), what, "MPI_Comm_rank");
  checkMpi(MPI_Comm_free(&node), what, "MPI_Comm_free");
  return rank;
}

/// Number of visible CUDA devices; fatal when there is none.
int visibleDevices() {
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  // Without a driver or a device this is cudaErrorNoDevice or
  // cudaErrorInsufficientDriver rather than a count of 0.
  if (rc != cudaSuccess)
    spmd_rt_fatal("collective backend 'nccl' needs a GPU, but no CUDA device "
                  "is visible (cudaGetDeviceCount: %s)",
                  cudaGetErrorString(rc));
  if (count < 1)
    spmd_rt_fatal("collective backend 'nccl' needs a GPU, but no CUDA device "
                  "is visible (cudaGetDeviceCount found 0)");
  return count;
}

/// Rank 0 of `comm` creates an id that MPI_Bcast hands to the others.
ncclUniqueId shareUniqueId(MPI_Comm comm, int rank, const char *what) {
  ncclUniqueId id;
  if (rank == 0)
    checkNccl(ncclGetUniqueId(&id), what, "ncclGetUniqueId");
  checkMpi(MPI_Bcast(&id, static_cast<int>(sizeof(id)), MPI_BYTE, 0, comm),
           what, "MPI_Bcast");
  return id;
}

} // namespace

void spmd::runtime::requireCudaDevice() { (void)visibleDevices(); }

const CollectiveLibrary &spmd::runtime::ncclLibrary() {
  static const CollectiveLibrary nccl = {"nccl", requireCudaDevice,
                                         startLibrary<NcclBackend>};
  return nccl;
}

//===----------------------------------------------------------------------===//
// Lifetime and communicators
//===----------------------------------------------------------------------===//

NcclBackend::NcclBackend(int *argc, char ***argv) : mpi(argc, argv) {
  const char *what = "init";
  // One GPU per rank on each node (NCCL does not take two ranks of one
  // communicator on the same device).
  device = localRank(mpi.rank()) % visibleDevices();
  checkCuda(cudaSetDevice(device), what, "cudaSetDevice");
  // Non-blocking: no implicit ordering with the legacy default stream that
  // other code may use.
  if (!spmd::rt::activeBackend().commStream)
    checkCuda(cudaStreamCreateWithFlags(&ownStream, cudaStreamNonBlocking),
              what, "cudaStreamCreateWithFlags");
  ncclUniqueId id = shareUniqueId(MPI_COMM_WORLD, mpi.rank(), what);
  checkNccl(ncclCommInitRank(&world, mpi.worldSize(), id, mpi.rank()), what,
            "ncclCommInitRank");
}

NcclBackend::~NcclBackend() {
  // Best effort and silent: this may run at exit, after the CUDA runtime
  // started unloading, where a fatal error would only hide the real one.
  if (ownStream)
    (void)cudaStreamSynchronize(ownStream);
  for (auto &entry : comms)
    (void)ncclCommDestroy(entry.second);
  comms.clear();
  if (world)
    (void)ncclCommDestroy(world);
  if (ownStream)
    (void)cudaStreamDestroy(ownStream);
}

cudaStream_t NcclBackend::stream() {
  if (!ownStream)
    return static_cast<cudaStream_t>(spmd::rt::activeBackend().commStream());
  return ownStream;
}

void NcclBackend::resetGroups() {
  const char *what = "set_mesh";
  synchronize(what);
  for (auto &entry : comms)
    checkNccl(ncclCommDestroy(entry.second), what, "ncclCommDestroy");
  comms.clear();
}

ncclComm_t NcclBackend::communicator(const CollectiveGroup &group,
                                     const char *what) {
  auto found = comms.find(group.meshDims);
  if (found != comms.end())
    return found->second;
  // Collective over the world: every rank reaches the first collective over
  // these mesh dims at the same point of the (SPMD) program.
  ncclComm_t comm = nullptr;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)
  // A NULL config inherits the world's.
  checkNccl(ncclCommSplit(world, group.color, group.position, &comm, nullptr),
            what, "ncclCommSplit");
#else
  MPI_Comm split = MPI_COMM_NULL;
  checkMpi(MPI_Comm_split(MPI_COMM_WORLD, group.color, group.position, &split),
           what, "MPI_Comm_split");
  ncclUniqueId id = shareUniqueId(split, group.position, what);
  checkMpi(MPI_Comm_free(&split), what, "MPI_Comm_free");
  checkNccl(ncclCommInitRank(&comm, group.size, id, group.position), what,
            "ncclCommInitRank");
#endif
  int commRank = 0, commSize = 0;
  checkNccl(ncclCommUserRank(comm, &commRank), what, "ncclCommUserRank");
  checkNccl(ncclCommCount(comm, &commSize), what, "ncclCommCount");
  if (commRank != group.position || commSize != group.size)
    spmd_rt_fatal("%s: the NCCL communicator of a group has rank %d of %d, "
                  "expected %d of %d",
                  what, commRank, commSize, group.position, group.size);
  comms.emplace(group.meshDims, comm);
  return comm;
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

bool NcclBackend::canReduce(int32_t dtype) const {
  ncclDataType_t type;
  return ncclTypeOf(dtype, type);
}

void *NcclBackend::allocate(int64_t bytes, const char *what) {
  if (bytes <= 0)
    return nullptr;
  // Stream-ordered: the pool reuses freed blocks without a device sync.
  void *data = nullptr;
  checkCuda(cudaMallocAsync(&data, toSize(bytes, what), stream()), what,
            "cudaMallocAsync");
  return data;
}

void NcclBackend::deallocate(void *data, const char *what) {
  if (data)
    checkCuda(cudaFreeAsync(data, stream()), what, "cudaFreeAsync");
}

void NcclBackend::copyRows(void *dst, int64_t dstPitch, const void *src,
                           int64_t srcPitch, int64_t width, int64_t rows,
                           const char *what) {
  if (width <= 0 || rows <= 0 || dst == src)
    return;
  if (rows == 1 || (dstPitch == width && srcPitch == width)) {
    checkCuda(cudaMemcpyAsync(dst, src, toSize(width * rows, what),
                              cudaMemcpyDeviceToDevice, stream()),
              what, "cudaMemcpyAsync");
    return;
  }
  checkCuda(cudaMemcpy2DAsync(dst, toSize(dstPitch, what), src,
                              toSize(srcPitch, what), toSize(width, what),
                              toSize(rows, what), cudaMemcpyDeviceToDevice,
                              stream()),
            what, "cudaMemcpy2DAsync");
}

void NcclBackend::synchronize(const char *what) {
  checkCuda(cudaStreamSynchronize(stream()), what, "cudaStreamSynchronize");
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

void NcclBackend::allReduce(void *out, const void *in, int64_t count,
                            int32_t dtype, int32_t reduce,
                            const CollectiveGroup &group, const char *what,
                            Request * /*async: unsupported*/) {
  ncclComm_t comm = communicator(group, what);
  if (count == 0)
    return; // Same on every member (every piece has the same size).
  // In place when out == in (NCCL allows sendbuff == recvbuff).
  checkNccl(ncclAllReduce(in, out, toSize(count, what), ncclType(dtype, what),
                          ncclOp(reduce, what), comm, stream()),
            what, "ncclAllReduce");
}

void NcclBackend::allGather(void *out, const void *in, int64_t bytes,
                            const CollectiveGroup &group, const char *what,
                            Request * /*async: unsupported*/) {
  ncclComm_t comm = communicator(group, what);
  if (bytes == 0)
    return;
  // Bytes as ncclUint8: NCCL counts are size_t, no 2^31 limit.
  checkNccl(
      ncclAllGather(in, out, toSize(bytes, what), ncclUint8, comm, stream()),
      what, "ncclAllGather");
}

void NcclBackend::reduceScatter(void *out, const void *in, int64_t count,
                                int32_t dtype, int32_t reduce,
                                const CollectiveGroup &group, const char *what,
                                Request * /*async: unsupported*/) {
  ncclComm_t comm = communicator(group, what);
  if (count == 0)
    return;
  // `count` is the size of one block (NCCL's recvcount).
  checkNccl(ncclReduceScatter(in, out, toSize(count, what),
                              ncclType(dtype, what), ncclOp(reduce, what), comm,
                              stream()),
            what, "ncclReduceScatter");
}

void NcclBackend::allToAll(void *out, const void *in, int64_t bytes,
                           const CollectiveGroup &group, const char *what,
                           Request * /*async: unsupported*/) {
  ncclComm_t comm = communicator(group, what);
  if (bytes == 0)
    return;
  const char *send = static_cast<const char *>(in);
  char *recv = static_cast<char *>(out);
  size_t block = toSize(bytes, what);
  // NCCL has no all-to-all: one send and one receive per peer (self
  // included), fused into one operation by the group.
  checkNccl(ncclGroupStart(), what, "ncclGroupStart");
  for (int peer = 0; peer < group.size; ++peer) {
    checkNccl(
        ncclSend(send + peer * block, block, ncclUint8, peer, comm, stream()),
        what, "ncclSend");
    checkNccl(
        ncclRecv(recv + peer * block, block, ncclUint8, peer, comm, stream()),
        what, "ncclRecv");
  }
  checkNccl(ncclGroupEnd(), what, "ncclGroupEnd");
}

void NcclBackend::broadcast(void *buffer, int64_t bytes, int root,
                            const CollectiveGroup &group, const char *what,
                            Request * /*async: unsupported*/) {
  ncclComm_t comm = communicator(group, what);
  if (bytes == 0)
    return;
  // In place: the root's buffer already holds the value.
  checkNccl(ncclBroadcast(buffer, buffer, toSize(bytes, what), ncclUint8, root,
                          comm, stream()),
            what, "ncclBroadcast");
}
