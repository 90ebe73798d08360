//===- Passes.td - lowering stage passes -------------------*- tablegen -*-===//
//
// The "lower" stage of the pipeline (DESIGN.md §1): the per-rank program in
// `aten` + `spmd` ops becomes calls into the runtime (runtime/include/spmd/
// Runtime/Runtime.h) and then LLVM dialect. Rationale: docs/lowering.md.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_CONVERSION_PASSES_TD
#define SPMD_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertToRuntimeCallsPass
    : Pass<"spmd-convert-to-runtime-calls", "mlir::ModuleOp"> {
  let summary = "Turn aten ops and spmd collectives into runtime calls";
  let description = [{
    Every ranked tensor becomes an `!llvm.ptr` to a runtime `SpmdBuffer`:

    - each op result is allocated with `spmd_rt_alloc(dtype, rank, shape)`
      (the static shape of its type) and written by the op's kernel,
      `spmd_rt_<kernel>(results..., operands..., attributes...)`; ATen
      Scalars are passed as f64, integers as i64, integer lists as
      (i32 count, pointer to a constant i64 array);
    - `arith.constant` tensors are copied from a constant global with
      `spmd_rt_constant`;
    - `spmd.all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all` and
      `broadcast` become the runtime's collectives over the listed mesh
      dims, `spmd.local_take` the rank-indexed `spmd_rt_local_take`;
      `spmd.mesh` is removed (the runner sets the mesh of the job). With
      several meshes (views of the first, such as fsdp's post-forward
      mesh), the runner's mesh is their common refinement
      (`spmd::refineMeshes`) and each collective's mesh dims become the
      refined dims they span;
    - a collective whose every use is a `spmd.wait` (asynchronous) calls
      its `_start` form, and its first wait `spmd_rt_wait(out, in)`: the
      wait is the last use of the collective's input, which is freed
      after it; later waits, and the waits of synchronous collectives,
      cost nothing (the result is the collective's buffer);
    - every buffer the function allocates is freed right after its last use,
      except the ones it returns. Arguments stay owned by the caller; every
      result is a buffer of its own (a returned argument, or a value
      returned twice, is copied), owned by the caller.

    Random ops draw with the key (op id, global element index), op ids
    numbering the function's random ops in order. A random op that
    spmd-partition sharded carries `spmd.global_shape` and a per-rank
    `spmd.global_offsets` table; otherwise the local buffer is the whole
    global tensor (offset 0).

    Errors: `spmd.redistribute` (global view: run the partitioner first),
    an op with no runtime kernel, an unsupported element type, meshes that
    are not views of one mesh (another number of ranks, no common
    refinement), or a function whose body is not a single block each get a
    diagnostic at the op and fail the pass.
  }];
  // aten: returned arguments are cloned with aten.clone before conversion,
  // also in a function that holds no aten op.
  let dependentDialects = ["mlir::LLVM::LLVMDialect", "mlir::func::FuncDialect",
                           "mlir::arith::ArithDialect",
                           "spmd::aten::AtenDialect"];
}

def PackEntryFunctionsPass
    : Pass<"spmd-pack-entry-functions", "mlir::ModuleOp"> {
  let summary = "Pass an entry function's buffers through two pointer arrays";
  let description = [{
    Runs after `spmd-convert-to-runtime-calls`. Each public function with a
    body that no op of the module calls (the step a runner invokes) gets
    the C signature

        void f(SpmdBuffer *const *arguments, SpmdBuffer **results);

    argument `i` is loaded from `arguments[i]` on entry and result `j` is
    stored to `results[j]` on return, in the order of the original
    signature (its `spmd.layout` / `spmd.updates` slots, which a runner
    reads before lowering).

    Why: a training step takes and returns one buffer per parameter,
    gradient and optimizer state, thousands of them for a model zoo's
    step or the per-op matrix. Passed one by one, they become a call and
    an aggregate return with thousands of operands, which LLVM's
    instruction selection schedules in time quadratic in their number (a
    JIT compile of minutes). Two pointers keep it linear.

    Errors: an entry function with an argument or result that is not a
    buffer (`!llvm.ptr`), or whose body is not a single block, gets a
    diagnostic at the function and fails the pass.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif // SPMD_CONVERSION_PASSES_TD
