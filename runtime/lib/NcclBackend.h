//===- NcclBackend.h - NCCL collectives on device buffers -------*- C++ -*-===//
//
// Private to the runtime; compiled only when CMake found the CUDA toolkit and
// NCCL (SPMD_HAVE_NCCL). `NcclBackend` implements `CollectiveBackend`
// (Collectives.h) on device buffers with NCCL, bootstrapped over MPI:
//
//   - world: rank 0 creates an ncclUniqueId, MPI_Bcast sends it to every
//     rank, and each rank joins with ncclCommInitRank after selecting device
//     `local rank mod device count` (one GPU per rank on each node);
//   - groups: ncclCommSplit(world, color, key = position), the same partition
//     as MpiBackend's MPI_Comm_split, cached per mesh dims list (NCCL older
//     than 2.18 has no split: MPI_Comm_split, then one unique id per group);
//   - every operation is issued on one CUDA stream that the backend owns.
//
// References: NCCL user guide, "Creating a communicator" and "Collective
// operations", https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/ ;
// CUDA runtime API, "Memory management" (cudaMemcpy2DAsync,
// cudaMallocAsync).
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_NCCLBACKEND_H
#define SPMD_RUNTIME_NCCLBACKEND_H

#include "Collectives.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace spmd {
namespace runtime {

/// Ends the job with a clear message unless the CUDA runtime sees at least
/// one GPU (called when 'nccl' is selected, before anything starts).
void requireCudaDevice();

/// The NCCL backend. Buffers are device memory of the device this backend
/// makes current in its constructor (on the calling thread).
class NcclBackend final : public CollectiveBackend {
public:
  /// Starts MPI like `MpiBackend` (which it keeps for the bootstrap), picks
  /// and makes current this rank's device, creates the stream and the world
  /// communicator. Collective over MPI_COMM_WORLD.
  NcclBackend(int *argc, char ***argv);
  /// Waits for the stream, destroys the communicators and the stream, then
  /// lets `MpiBackend` finalise MPI if it started it.
  ~NcclBackend() override;

  const char *name() const override { return "nccl"; }
  int rank() const override { return mpi.rank(); }
  int worldSize() const override { return mpi.worldSize(); }
  void resetGroups() override;

  /// Adds SPMD_F16 and, with NCCL >= 2.10, SPMD_BF16.
  bool canReduce(int32_t dtype) const override;

  /// Device memory: cudaMallocAsync/cudaFreeAsync and cudaMemcpy2DAsync on
  /// the backend's stream; `synchronize` is cudaStreamSynchronize.
  void *allocate(int64_t bytes, const char *what) override;
  void deallocate(void *data, const char *what) override;
  void copyRows(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
                int64_t width, int64_t rows, const char *what) override;
  void synchronize(const char *what) override;

  void allReduce(void *out, const void *in, int64_t count, int32_t dtype,
                 int32_t reduce, const CollectiveGroup &group, const char *what,
                 Request *async) override;
  void allGather(void *out, const void *in, int64_t bytes,
                 const CollectiveGroup &group, const char *what,
                 Request *async) override;
  void reduceScatter(void *out, const void *in, int64_t count, int32_t dtype,
                     int32_t reduce, const CollectiveGroup &group,
                     const char *what, Request *async) override;
  void allToAll(void *out, const void *in, int64_t bytes,
                const CollectiveGroup &group, const char *what,
                Request *async) override;
  void broadcast(void *buffer, int64_t bytes, int root,
                 const CollectiveGroup &group, const char *what,
                 Request *async) override;

private:
  /// The communicator of `group` (created on first use, collectively).
  ncclComm_t communicator(const CollectiveGroup &group, const char *what);
  /// The stream NCCL runs on: the CUDA backend's communication stream when
  /// that backend runs the kernels (its events order it against compute),
  /// else the backend's own stream.
  cudaStream_t stream();

  /// Declared first: MPI outlives every NCCL communicator.
  MpiBackend mpi;
  /// The CUDA device of this rank.
  int device = 0;
  cudaStream_t ownStream = nullptr;
  ncclComm_t world = nullptr;
  std::map<std::vector<int64_t>, ncclComm_t> comms;
};

} // namespace runtime
} // namespace spmd

#endif // SPMD_RUNTIME_NCCLBACKEND_H
