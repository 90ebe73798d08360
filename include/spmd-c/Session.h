/*===- spmd-c/Session.h - compile and run a training step, C API -*- C -*-===*\
|*                                                                            *|
|* The C ABI behind the Python package `spmd` (python/spmd, loaded with      *|
|* ctypes): one process is one rank of an MPI job. A session compiles a      *|
|* captured training step (the `aten` module spmd-capture's tracer writes)   *|
|* with a pass pipeline (`spmd-parallelize{...}`) into a per-rank program,   *|
|* JIT-compiles it, and keeps the program's arguments (parameters, buffers,  *|
|* optimizer state: this rank's pieces) between steps, each step's updated   *|
|* values replacing them as spmd-run does.                                   *|
|*                                                                            *|
|* Arrays cross as host memory, row-major, of an SpmdDType                   *|
|* (spmd/Runtime/Runtime.h: SPMD_F32, SPMD_I64, ...; bf16 values cross as    *|
|* f32). Shapes are global (the single-device step's) unless a name says     *|
|* local. Calls marked collective must be made by every rank, in the same    *|
|* order. Errors a caller can make (a shape that does not fit, an index out  *|
|* of range) return nonzero with a message in `error` (NUL-terminated,       *|
|* truncated to `error_size` bytes); errors of the job (a collective or a    *|
|* kernel failing) end every rank as spmd-run's do.                          *|
\*===----------------------------------------------------------------------===*/

#ifndef SPMD_C_SESSION_H
#define SPMD_C_SESSION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct SpmdSession SpmdSession;

/* Starts the runtime on `backend` ("cpu" or "cuda"): MPI_Init, or the
   world of one process outside mpirun. Once per process; later calls are
   no-ops. Returns 0, nonzero with `error` for an unknown backend. */
int32_t spmd_session_init(const char *backend, char *error, int64_t error_size);
/* The name of every operation the session's dialects register, one per
   line (what spmd-capture's emitter may write; owned by the library). */
const char *spmd_session_op_names(void);
int32_t spmd_session_rank(void);
int32_t spmd_session_world_size(void);
/* Collective. Waits for every rank (MPI_Barrier). */
void spmd_session_barrier(void);
/* Collective. 1 when `flag` is nonzero on any rank: the ranks' agreement
   on a choice each makes alone (whether a call recompiles). */
int32_t spmd_session_any(int32_t flag);
/* Collective. 1 when every rank passed the same `value`: the ranks'
   agreement on which compiled program a call runs. */
int32_t spmd_session_same(int64_t value);
/* Ends the runtime (MPI_Finalize); no session may be used afterwards. */
void spmd_session_finalize(void);

/* Collective. Compiles `module` (`size` bytes of MLIR text with an
   @train_step) on rank 0 with the pass pipeline `pipeline` (MLIR's textual
   form, e.g. "builtin.module(spmd-parallelize{mode=ddp mesh=4})"), sends
   the per-rank program to every rank, lowers it and JIT-compiles it against
   `runtime_lib` (the path of libspmd_runtime.so). Returns NULL on every
   rank, with rank 0's diagnostics in `error`, when the module does not
   parse or verify or a pass fails (a plan that does not fit, an op without
   a sharding rule, a mesh of the wrong size). */
SpmdSession *spmd_session_create(const char *module, int64_t size,
                                 const char *pipeline, const char *runtime_lib,
                                 char *error, int64_t error_size);
void spmd_session_destroy(SpmdSession *session);

/* The per-rank program as MLIR text, before lowering (NUL-terminated,
   owned by the session). */
const char *spmd_session_program(const SpmdSession *session);
int32_t spmd_session_num_args(const SpmdSession *session);
int32_t spmd_session_num_results(const SpmdSession *session);
/* The argument result `i` updates (its `spmd.updates`), or -1. */
int64_t spmd_session_result_updates(const SpmdSession *session, int32_t i);
/* The layout of argument (`which` 0) or result (1) `i`, as placements
   text ("[S(0)]", "[R, S(1)]"; NUL-terminated, owned by the session). */
const char *spmd_session_layout(SpmdSession *session, int32_t which, int32_t i);

/* Collective when `root` >= 0. Sets argument `i` from a global array of
   `rank` dims `shape`; this rank keeps its piece. With `root` >= 0 every
   rank takes rank `root`'s array (broadcast; the others' `data` is not
   read, but their `shape` must agree), as DDP starts from rank 0's
   parameters. `dtype` must be the argument's (f32 for a bf16 one).
   With `borrow` nonzero, `root` < 0 and the "cpu" backend, a piece that is
   one contiguous run of `data` needing no padding (the rows of a batch
   that the mesh divides, a replicated input) is used in place, not
   copied: `data` must then stay alive and unchanged until the next
   spmd_session_run returns, after which the argument is unset (a batch
   input is set before each run). Errors: an index out of range, a dtype or
   shape that is not the program's (the piece of `shape` under the layout
   is not the local type), a root outside the world. */
int32_t spmd_session_set_arg(SpmdSession *session, int32_t i, const void *data,
                             int32_t dtype, int32_t rank, const int64_t *shape,
                             int32_t root, int32_t borrow, char *error,
                             int64_t error_size);
/* Collective when the layouts differ. Moves argument `j` of `from` into
   argument `i` of `to` (two compiled programs of one step, e.g. for two
   batch shapes: the state goes to the program that runs next). When both
   have the same local type and placements on the same mesh, this rank's
   piece changes hands without a copy; otherwise it is gathered to the
   global shape and `to` keeps its own piece. `from`'s argument is unset
   afterwards. Errors: an index out of range, a `from` argument that is
   unset or borrowed, a global shape or dtype that `to`'s argument cannot
   take (as spmd_session_set_arg). */
int32_t spmd_session_move_arg(SpmdSession *to, int32_t i, SpmdSession *from,
                              int32_t j, char *error, int64_t error_size);
/* Unsets argument `i` and frees this rank's piece of it (a program kept
   for later gives its state back). An index out of range is ignored. */
void spmd_session_unset_arg(SpmdSession *session, int32_t i);
/* The global shape of result `i` (a result that updates an argument has
   that argument's). Errors as spmd_session_set_arg. */
int32_t spmd_session_set_result_shape(SpmdSession *session, int32_t i,
                                      int32_t rank, const int64_t *shape,
                                      char *error, int64_t error_size);
/* Collective. Runs one step (`step` keys the random draws, as spmd-run's
   step number); each result that updates an argument becomes that
   argument, the others are kept until the next step. The ranks first agree
   that every one of them has all its arguments and result shapes set (a
   failed spmd_session_set_arg unsets its argument): if one has not, no
   rank runs and each returns an error, the rank's own reason or "another
   rank's arguments are not set". */
int32_t spmd_session_run(SpmdSession *session, int64_t step, char *error,
                         int64_t error_size);
/* Collective. Gathers argument (`which` 0) or result (1) `i` to its global
   shape on every rank into `out` (numel * element-size bytes of the dtype;
   f32 for bf16). Errors: an index out of range, a value not yet there. */
int32_t spmd_session_gather(SpmdSession *session, int32_t which, int32_t i,
                            void *out, char *error, int64_t error_size);
/* This rank's piece of argument `i` without padding: its shape into
   `shape` (the argument's rank of entries) and, with `data` and `indices`
   non-NULL, its values into `data` and per dim the global index of each
   position into `indices` (the dims' lists one after the other:
   sum(shape) entries). What a sharded checkpoint saves. */
int32_t spmd_session_piece(SpmdSession *session, int32_t i, int64_t *shape,
                           void *data, int64_t *indices, char *error,
                           int64_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* SPMD_C_SESSION_H */
