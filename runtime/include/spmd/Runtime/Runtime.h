/*===- Runtime.h - C ABI the lowered spmd programs call -----------*- C -*-===//
//
// `--spmd-lower-to-runtime` turns every tensor value of a program into a
// `SpmdBuffer *` and every op into a call of this ABI:
//
//   - the lowered code allocates each result with `spmd_rt_alloc` (shapes are
//     static in the program) and frees each buffer after its last use;
//   - a kernel `spmd_rt_<op>(outs..., ins..., attributes...)` writes its
//     preallocated results; it reads every shape from the buffers, so the
//     ATen shape rules live in the compiler (aten dialect) only;
//   - ATen Scalars arrive as `double`, integer attributes as `int64_t`,
//     integer lists as (`int32_t n`, `const int64_t *values`); negative dims
//     are already normalised;
//   - optional tensors (layer-norm weight/bias, nll-loss weight) are NULL
//     when absent.
//
// Element types: SPMD_F32, SPMD_F64 and SPMD_BF16 on both backends (bf16:
// fp32 arithmetic and accumulation, one rounding per stored value, ATen's
// opmath_type; the CPU backend runs its f32 kernel on widened copies),
// SPMD_I64/I32 for
// indices and integer arithmetic, SPMD_I1 (one byte per element, 0 or 1)
// for masks. A kernel given a dtype it does not support, or shapes that
// break its op's rule, calls `spmd_rt_fatal`.
//
// Errors: `spmd_rt_fatal` prints `spmd-run: rank R: error: <message>` on
// stderr and ends the whole job (MPI_Abort when MPI is running, exit(1)
// otherwise), so a failing rank never leaves the others hanging.
//
//===----------------------------------------------------------------------===*/

#ifndef SPMD_RUNTIME_RUNTIME_H
#define SPMD_RUNTIME_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPMD_MAX_RANK 8

/* Element types; values are part of the ABI. */
typedef enum SpmdDType {
  SPMD_F32 = 0,
  SPMD_F64 = 1,
  SPMD_F16 = 2,
  SPMD_BF16 = 3,
  SPMD_I64 = 4,
  SPMD_I32 = 5,
  SPMD_I1 = 6
} SpmdDType;

/* Reduction kinds: the values of `spmd::ReduceKind` (SPMDAttrs.td). */
typedef enum SpmdReduceKind {
  SPMD_REDUCE_SUM = 0,
  SPMD_REDUCE_AVG = 1,
  SPMD_REDUCE_MAX = 2,
  SPMD_REDUCE_MIN = 3
} SpmdReduceKind;

/* A dense row-major tensor. `numel` is the product of `shape[0..rank)`
   (1 for rank 0); `data` holds numel * spmd_rt_dtype_size(dtype) bytes.
   `storage` (runtime-private) owns the data, which several buffers may
   share (spmd_rt_view). */
typedef struct SpmdBuffer {
  void *data;
  int64_t numel;
  int32_t dtype;
  int32_t rank;
  int64_t shape[SPMD_MAX_RANK];
  void *storage;
} SpmdBuffer;

/*===----------------------------------------------------------------------===*/
/* Buffers and process state (runtime/lib/Buffer.cpp)                         */
/*===----------------------------------------------------------------------===*/

/* Bytes per element of `dtype`; fatal for an unknown dtype. */
size_t spmd_rt_dtype_size(int32_t dtype);
/* "f32", "f64", "f16", "bf16", "i64", "i32", "i1" (MLIR's spelling), or
   "<unknown dtype>": for messages. */
const char *spmd_rt_dtype_name(int32_t dtype);
/* A new uninitialised buffer; fatal if rank > SPMD_MAX_RANK or a dim < 0. */
SpmdBuffer *spmd_rt_alloc(int32_t dtype, int32_t rank, const int64_t *shape);
/* A buffer sharing `source`'s data under another shape with the same
   element count (no copy): the lowering of view, _unsafe_view,
   _reshape_alias, unsqueeze, clone and detach, which is sound because a
   buffer's data is never written after its kernel produced it. Fatal if
   the element counts differ. */
SpmdBuffer *spmd_rt_view(const SpmdBuffer *source, int32_t rank,
                         const int64_t *shape);
/* A buffer over `data`, host memory the caller owns (a tensor of the
   embedding framework: no copy): spmd_rt_free frees the descriptor only,
   and views share the memory without owning it. The caller keeps the
   memory alive and unchanged while the buffer or a view of it is used.
   Fatal unless the running backend is "cpu". */
SpmdBuffer *spmd_rt_borrow(int32_t dtype, int32_t rank, const int64_t *shape,
                           void *data);
/* Frees a buffer (NULL is a no-op); its data goes with the last buffer
   that shares it. */
void spmd_rt_free(SpmdBuffer *buffer);
/* Bytes of buffer data currently allocated on this rank (shared data
   counted once), and the maximum since the last spmd_rt_reset_peak. */
int64_t spmd_rt_live_bytes(void);
int64_t spmd_rt_peak_bytes(void);
void spmd_rt_reset_peak(void);
/* Chooses where buffers live and which kernels run, before the runtime
   starts (spmd_rt_init or the first buffer, rank or collective call):
     "cpu"   (the default) host memory, the CPU kernels, the collective
             backend spmd_rt_set_collective_backend chose (MPI by default);
     "cuda"  device memory of the rank's GPU (local rank mod the visible
             GPUs), the CUDA kernels (cuBLAS for matrix products) on one
             compute stream, and NCCL collectives on a communication stream,
             ordered against the compute stream by CUDA events.
   Choosing the running backend again is a no-op. Returns 0. Fatal for an
   unknown name, for "cuda" when the runtime was built without CUDA, when no
   GPU is visible, and for another backend once one is running. */
int32_t spmd_rt_set_backend(const char *name);
/* "cpu" or "cuda". */
const char *spmd_rt_backend(void);
/* Host <-> buffer copies of all numel * dtype-size bytes, wherever the
   buffer lives; spmd_rt_read waits for the kernels that produce `buffer`
   (on "cuda" it also reports errors that kernels found on the device). */
void spmd_rt_write(SpmdBuffer *buffer, const void *host);
void spmd_rt_read(const SpmdBuffer *buffer, void *host);
/* Waits until every kernel and collective issued so far is done (a no-op on
   "cpu"); for timing a step. */
void spmd_rt_synchronize(void);
/* Copies `bytes` bytes of constant data (an arith.constant) into `out`. */
void spmd_rt_constant(SpmdBuffer *out, const void *data, int64_t bytes);
/* Ends the job with `spmd-run: rank R: error: <printf message>`. */
void spmd_rt_fatal(const char *format, ...)
    __attribute__((noreturn, format(printf, 1, 2)));

/*===----------------------------------------------------------------------===*/
/* Random numbers (runtime/lib/Random.cpp)                                    */
/*===----------------------------------------------------------------------===*/

/* Seed of the job and number of the step being run: both are part of the
   key of every draw. The step is also this rank's entry in the job's status
   records (see spmd_rt_init). */
void spmd_rt_set_seed(uint64_t seed);
void spmd_rt_set_step(uint64_t step);
/* A uniform float in [0, 1) for element `index` (row-major index in the
   GLOBAL tensor) of random op `op_id`: Philox4x32-10 with key = seed and
   counter = (index, op_id, step); 24 random bits. The same element gets the
   same number whatever the mesh and whichever rank holds it. */
float spmd_rt_uniform(uint64_t op_id, uint64_t index);

/*===----------------------------------------------------------------------===*/
/* Kernels, one per aten op (runtime/lib/cpu/, runtime/lib/cuda/)             */
/*===----------------------------------------------------------------------===*/

/* Each kernel (the entries of KernelList.def, declared at the end of this
   section) runs on the backend spmd_rt_set_backend chose, with the same
   semantics and messages on both. On "cuda" a kernel is queued on the
   compute stream and returns at once; host tables it takes (local_take's
   indices, random offsets) are constants of the program: the backend keeps
   a device copy per address. */

/* The row of a per-rank table of `row_length` entries that belongs to this
   rank: table + spmd_rt_rank() * row_length (a random op's global offsets
   of a sharded result, an embedding's vocabulary rows, a local_take's
   index table). */
const int64_t *spmd_rt_rank_row(const int64_t *table, int64_t row_length);

/* This rank's row of `row_length` positions given as `runs` runs
   starting at entry rank * rank_stride of local_take_runs' starts and
   counts (`rank_stride`: `runs` for runs per rank, 0 for runs every rank
   takes): the positions of each run one after another, -1 for a fill run
   and after the last run. The row is made once per table address and kept
   for the life of the process (the tables are constants of the program);
   fatal when the runs are longer than the row. */
const int64_t *spmd_rt_runs_row(const int64_t *starts, const int64_t *counts,
                                int64_t runs, int64_t rank_stride,
                                int64_t row_length);

#define SPMD_RT_KERNEL(name, params, args) void spmd_rt_##name params;
#include "spmd/Runtime/KernelList.def"

/*===----------------------------------------------------------------------===*/
/* Device mesh and collectives (runtime/lib/Collectives.cpp)                  */
/*===----------------------------------------------------------------------===*/

/* Chooses the library behind the collectives below. Call it before the
   backend starts (spmd_rt_init, or the first rank, mesh or collective call);
   the choice holds until the process ends, and choosing the running backend
   again is a no-op:
     "mpi"   (the default) MPI on host buffers;
     "nccl"  NCCL on device buffers: every `data` given to a collective is
             device memory (cudaMalloc) of the GPU that spmd_rt_init makes
             current on the calling thread (local rank mod the number of
             visible GPUs); the descriptors stay on the host. MPI still
             starts the job and hands out NCCL's unique ids; reductions also
             take f16 and bf16 (avg and bf16 need NCCL >= 2.10).
   Returns 0. Fatal for an unknown name, for "nccl" when the runtime was
   built without it (no CUDA toolkit or NCCL at configure time) or no GPU is
   visible, and for a different backend once one is running. */
int32_t spmd_rt_set_collective_backend(const char *name);
/* Starts the chosen communication backend (MPI_Init if needed; for NCCL
   also the device, a stream and the world communicator). In a job of two or
   more ranks under mpirun (or with $SPMD_RUN_STATUS_DIR set) it also keeps a
   status record of this rank (set-up, step, failed) and handles SIGTERM, which
   mpirun sends when another rank dies: the rank prints "spmd-run: rank R:
   stopped in step S: rank F ended in step T without a message (killed or
   crashed)" (or "failed in step T" for a rank that reported an error) and
   ends. spmd_rt_finalize removes the record. */
void spmd_rt_init(int *argc, char ***argv);
void spmd_rt_finalize(void);
int32_t spmd_rt_rank(void);
int32_t spmd_rt_world_size(void);
/* Sets the device mesh (row-major ranks, DESIGN.md §2): fatal unless the
   product of `shape` equals the world size. */
void spmd_rt_set_mesh(int32_t ndims, const int64_t *shape);
/* This rank's coordinate on mesh dim `dim`. */
int64_t spmd_rt_mesh_coord(int32_t dim);

/* Collectives over the group of ranks that differ only in the listed mesh
   dims (ordered as listed, row-major); every piece has the same size. Each
   is complete when it returns (MPI; NCCL chosen with
   spmd_rt_set_collective_backend: the stream is synchronised), except on
   the "cuda" backend: there it is queued on the communication stream after
   the kernels issued before it, and the first kernel that uses `out` waits
   for it (spmd_rt_read and spmd_rt_synchronize too). */
void spmd_rt_all_reduce(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                        const int64_t *mesh_dims, int32_t reduce);
void spmd_rt_all_gather(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                        const int64_t *mesh_dims, int64_t gather_dim);
void spmd_rt_reduce_scatter(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                            const int64_t *mesh_dims, int64_t scatter_dim,
                            int32_t reduce);
void spmd_rt_all_to_all(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                        const int64_t *mesh_dims, int64_t split_dim,
                        int64_t concat_dim);
void spmd_rt_broadcast(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                       const int64_t *mesh_dims, int64_t root);

/* The same collectives, started (the lowering of a collective whose uses
   are all spmd.wait): `out` must not be read, and `in` must stay allocated,
   until spmd_rt_wait(out, in) completes it. On the MPI backend with host
   buffers a nonblocking MPI collective (MPI_Iallgather, ...), advanced by
   every spmd_rt_alloc while kernels run, so that communication overlaps
   compute; elsewhere (NCCL, or the "cuda" backend, which queues every
   collective on its communication stream anyway) it runs as the forms
   above and the wait has nothing left to do. Fatal if `out` already has a
   collective in flight. spmd_rt_free of `out` and spmd_rt_finalize
   complete what was not waited for. */
void spmd_rt_all_reduce_start(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                              const int64_t *mesh_dims, int32_t reduce);
void spmd_rt_all_gather_start(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                              const int64_t *mesh_dims, int64_t gather_dim);
void spmd_rt_reduce_scatter_start(SpmdBuffer *out, const SpmdBuffer *in,
                                  int32_t n, const int64_t *mesh_dims,
                                  int64_t scatter_dim, int32_t reduce);
void spmd_rt_all_to_all_start(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                              const int64_t *mesh_dims, int64_t split_dim,
                              int64_t concat_dim);
void spmd_rt_broadcast_start(SpmdBuffer *out, const SpmdBuffer *in, int32_t n,
                             const int64_t *mesh_dims, int64_t root);
/* Completes the collective started on `out` (its input `in`), if it is
   still in flight: afterwards `out` holds its result and `in` may be
   freed. */
void spmd_rt_wait(SpmdBuffer *out, const SpmdBuffer *in);

#ifdef __cplusplus
}
#endif

#endif /* SPMD_RUNTIME_RUNTIME_H */
