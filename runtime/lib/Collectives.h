//===- Collectives.h - device mesh and collective backends ------*- C++ -*-===//
//
// Private to the runtime. The C functions of Runtime.h ("Device mesh and
// collectives") own the mesh, validate every call against the spmd dialect's
// shape rules, turn each collective along a tensor dim into a collective on
// contiguous blocks (packing and unpacking around it), and hand that to a
// `CollectiveBackend`:
//
//   - `MpiBackend` (host buffers): Open MPI / MPICH communicators;
//   - `NcclBackend` (device buffers, NcclBackend.h; built when the CUDA
//     toolkit and NCCL are found): ncclCommSplit (same color/key as
//     MPI_Comm_split) and ncclAllReduce/AllGather/ReduceScatter/Broadcast/
//     grouped Send-Recv on the backend's CUDA stream.
//
// `spmd_rt_set_collective_backend` picks one before the runtime starts. The
// packing around a collective goes through the backend too (`allocate`,
// `copyRows`), so that it runs where the buffers live.
//
// Groups (DESIGN.md §2: ranks are row-major over the mesh shape): the group
// of a collective over the mesh dims D = [d0, d1, ...] is the set of ranks
// that share this rank's coordinates on every other mesh dim; a member's
// position in the group is the row-major index of its coordinates on D, in
// the listed order. D = [] is a group of one rank.
//
// Communicators are created collectively on a dims list's first use, so every
// rank must run the same sequence of collectives (the SPMD program does), from
// one thread at a time.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_COLLECTIVES_H
#define SPMD_RUNTIME_COLLECTIVES_H

#include "spmd/Runtime/Runtime.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

namespace spmd {
namespace runtime {

/// Ends the job (spmd_rt_fatal) naming `what` and the MPI `call` when `rc`
/// is not MPI_SUCCESS, with MPI's error string.
void checkMpi(int rc, const char *what, const char *call);

/// One group of ranks that take part in a collective, described
/// independently of the backend. All groups of one `meshDims` list partition
/// the job: they are created together (collectively over all ranks) and a
/// backend may cache its communicator by `meshDims`.
struct CollectiveGroup {
  /// The mesh dims the group spans, in the listed order (the cache key).
  std::vector<int64_t> meshDims;
  /// Which group of the partition this rank belongs to: row-major index of
  /// this rank's coordinates on the mesh dims not in `meshDims`.
  int color = 0;
  /// This rank's position in the group (row-major over `meshDims`).
  int position = 0;
  /// Number of ranks in the group.
  int size = 1;
};

/// A collective in flight (the `_start` forms of Runtime.h): the steps that
/// complete it, in order (the backend's wait, then unpacking, averaging and
/// releasing scratch memory).
struct Request {
  std::vector<std::function<void()>> steps;
};

/// Runs `step` now when `async` is null (a synchronous collective), else
/// when `async` completes.
void then(Request *async, std::function<void()> step);

/// Advances the collectives in flight (spmd_rt_alloc calls it, so that a
/// library without a progress thread moves them while kernels run).
void progressCollectives();
/// Completes the collective in flight on `out`, if any (spmd_rt_free of
/// a buffer whose collective was not waited for).
void completeCollective(const SpmdBuffer *out);

/// A communication library that runs collectives on contiguous blocks.
///
/// Every rank of the job calls the same sequence of collectives (SPMD), so a
/// backend may create a group's communicator collectively on its first use.
/// All pieces have the same size on every member. Every pointer (`in`,
/// `out`, and those of `allocate` and `copyRows`) is a host pointer for
/// `MpiBackend`, a device pointer for a device backend; a call's result is
/// ready for the next operation ordered after it (MPI: on return; NCCL: on
/// the backend's stream), and on the host after `synchronize`. Errors end the
/// job through `spmd_rt_fatal`, naming `what` (the collective).
class CollectiveBackend {
public:
  virtual ~CollectiveBackend() = default;

  /// Short name for messages ("mpi", "nccl").
  virtual const char *name() const = 0;
  /// This process's rank in the job and the number of ranks.
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;

  /// Forgets every cached group (the mesh changed). Collective.
  virtual void resetGroups() = 0;

  /// Whether `allReduce` and `reduceScatter` take `dtype`: SPMD_F32/F64/I64/
  /// I32/BF16 everywhere (MPI: bf16 through the runtime's own operators,
  /// each pair summed in float and rounded); NCCL adds SPMD_F16.
  virtual bool canReduce(int32_t dtype) const;

  /// `bytes` bytes of scratch memory where the backend's buffers live (used
  /// for packing), released by `deallocate`; usable by every operation
  /// ordered after it, and may be released before a `synchronize`.
  virtual void *allocate(int64_t bytes, const char *what) = 0;
  virtual void deallocate(void *data, const char *what) = 0;
  /// Copies `rows` rows of `width` bytes from `src`, whose rows start
  /// `srcPitch` bytes apart, to `dst`, whose rows start `dstPitch` bytes
  /// apart (cudaMemcpy2D's semantics). `dst` and `src` do not overlap unless
  /// they are equal (then nothing is copied).
  virtual void copyRows(void *dst, int64_t dstPitch, const void *src,
                        int64_t srcPitch, int64_t width, int64_t rows,
                        const char *what) = 0;
  /// Waits until every operation issued so far is done, so that the results
  /// can be used by any code (the end of each collective of Runtime.h).
  virtual void synchronize(const char *what) = 0;

  /// Whether the collectives below take a non-null `async`: they then only
  /// start, `in` and `out` must stay valid and `out` unread until the steps
  /// they add to `async` have run. Backends without it are given null.
  virtual bool supportsAsync() const { return false; }
  /// Advances the collectives in flight (a library without a progress
  /// thread moves them only when called); cheap when none is.
  virtual void progress() {}

  /// out[i] = reduce over the group of in[i], i < count; `dtype` is one
  /// `canReduce` accepts, `reduce` a SpmdReduceKind (avg = sum / size, and
  /// not for integers). `out` may equal `in`.
  virtual void allReduce(void *out, const void *in, int64_t count,
                         int32_t dtype, int32_t reduce,
                         const CollectiveGroup &group, const char *what,
                         Request *async) = 0;
  /// out = the group's `bytes`-byte blocks concatenated in position order.
  virtual void allGather(void *out, const void *in, int64_t bytes,
                         const CollectiveGroup &group, const char *what,
                         Request *async) = 0;
  /// `in` holds `size` blocks of `count` elements; out = reduce over the
  /// group of block number `position` (MPI_Reduce_scatter_block).
  virtual void reduceScatter(void *out, const void *in, int64_t count,
                             int32_t dtype, int32_t reduce,
                             const CollectiveGroup &group, const char *what,
                             Request *async) = 0;
  /// `in` holds `size` blocks of `bytes` bytes; block j goes to member j and
  /// out block i comes from member i (MPI_Alltoall).
  virtual void allToAll(void *out, const void *in, int64_t bytes,
                        const CollectiveGroup &group, const char *what,
                        Request *async) = 0;
  /// `buffer` (`bytes` bytes) takes the value of member `root`'s buffer.
  virtual void broadcast(void *buffer, int64_t bytes, int root,
                         const CollectiveGroup &group, const char *what,
                         Request *async) = 0;
};

/// The MPI backend: MPI_Init (or a singleton job of one rank when not
/// launched by mpirun) unless MPI is already initialised, one communicator
/// per mesh dims list from MPI_Comm_split(MPI_COMM_WORLD, color, position),
/// MPI_ERRORS_RETURN on every communicator and every return code checked.
class MpiBackend final : public CollectiveBackend {
public:
  MpiBackend(int *argc, char ***argv);
  /// Frees the communicators and finalises MPI if this backend started it.
  ~MpiBackend() override;

  const char *name() const override { return "mpi"; }
  int rank() const override { return worldRank; }
  int worldSize() const override { return worldRanks; }
  void resetGroups() override;

  /// Host memory: malloc/free, memmove row by row, nothing to wait for.
  void *allocate(int64_t bytes, const char *what) override;
  void deallocate(void *data, const char *what) override;
  void copyRows(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
                int64_t width, int64_t rows, const char *what) override;
  void synchronize(const char *what) override {}
  /// Nonblocking MPI collectives (MPI_Iallreduce, ...), completed by
  /// MPI_Wait and advanced by `progress` (MPI_Test on each).
  bool supportsAsync() const override { return true; }
  void progress() override;

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
  /// The communicator of `group` (created on first use).
  MPI_Comm communicator(const CollectiveGroup &group, const char *what);
  /// A new MPI request that `async` waits for (its first step).
  MPI_Request *track(Request *async, const char *what);

  int worldRank = 0;
  int worldRanks = 1;
  bool ownsMpi = false;
  std::map<std::vector<int64_t>, MPI_Comm> comms;
  /// The requests of the collectives in flight (owned by their Request).
  std::vector<std::weak_ptr<MPI_Request>> inFlight;
};

/// A collective backend that spmd_rt_set_collective_backend can choose.
struct CollectiveLibrary {
  /// "mpi", "nccl".
  const char *name;
  /// Fatal unless it can run in this process (NCCL: a GPU is visible), so
  /// that choosing it fails rather than its first call; null: it can.
  void (*requireRunnable)();
  /// Starts it with spmd_rt_init's arguments (null outside spmd_rt_init).
  std::unique_ptr<CollectiveBackend> (*start)(int *argc, char ***argv);
};

/// CollectiveLibrary::start for backend B.
template <typename B>
std::unique_ptr<CollectiveBackend> startLibrary(int *argc, char ***argv) {
  return std::make_unique<B>(argc, argv);
}

/// MPI (Collectives.cpp) and NCCL (NcclBackend.cpp, built with
/// SPMD_HAVE_NCCL).
const CollectiveLibrary &mpiLibrary();
const CollectiveLibrary &ncclLibrary();
/// The built collective backend named `name`, or null (Dispatch.cpp).
const CollectiveLibrary *findCollectiveLibrary(const std::string &name);

} // namespace runtime
} // namespace spmd

#endif // SPMD_RUNTIME_COLLECTIVES_H
