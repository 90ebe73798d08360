//===- Passes.td - partition stage passes ------------------*- tablegen -*-===//
//
// The "expand" step of the pipeline (DESIGN.md §1): the propagated global
// program becomes the per-rank program, and the report of what it
// communicates. Rationale: docs/partition.md.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_PARTITION_PASSES_TD
#define SPMD_PARTITION_PASSES_TD

include "mlir/Pass/PassBase.td"

def PartitionPass : Pass<"spmd-partition", "mlir::ModuleOp"> {
  let summary = "Expand the global program into the per-rank program";
  let description = [{
    Input: the output of `--spmd-propagate` (every aten op carries
    `spmd.layouts`, every function argument and result `spmd.layout`).

    - Every tensor gets its per-rank type: the padded local shape
      (`layout::maxLocalShape`). Uneven shards are padded to the largest
      piece; the valid elements of a rank are a prefix along each dim and
      the padding holds unspecified values (docs/partition.md).
    - Attributes that encode shapes are rewritten to local values: the
      `size` of view, _unsafe_view, _reshape_alias (and its contiguous
      `stride`), expand and full.
    - Each `spmd.redistribute` becomes the redistribute planner's steps:
      `spmd.all_gather`, `all_reduce`, `reduce_scatter`, `all_to_all`, and
      `spmd.local_take` for the local parts (this rank's chunk, padding
      dropped after a gather or added before a scatter, StridedShard
      reordering, zeroing for Replicate -> Partial). Each collective keeps
      the redistribute's `spmd.reason` and the step it implements.
    - An operand sharded on a mesh dim where a result is Partial is summed
      over by the op: where its shards are uneven, its padding is set to
      the reduction's identity (`spmd.local_take`; the ignore_index for
      nll_loss targets).
    - nll_loss_forward with reduction mean over a sharded batch becomes a
      sum divided by the all-reduced total weight (its `spmd.reason` says
      so), so every rank computes the global mean's share exactly.
    - Random ops on a sharded result get `spmd.global_shape` and a per-rank
      `spmd.global_offsets` table, so each element draws the number of the
      unsharded op.
    - An embedding whose table is sharded on the vocabulary (and its
      backward, whose gradient is) gets `spmd.vocab_rows`, per rank {first
      row, row count, vocabulary}: the forward looks up only the rows it
      holds and gives a masked Partial(sum), the backward writes only them.
    - nll_loss_forward and nll_loss_backward whose classes are sharded
      (loss_parallel: the logits of a colwise head stay vocabulary-sharded)
      get `spmd.class_rows`, per rank {first class, class count, classes}:
      the forward sums (and counts) only the targets a rank holds, a
      Partial(sum) of the loss and of the mean's total weight, the backward
      writes only them.
    - Argument and result types become local; their `spmd.layout` stays,
      so a runner knows what each rank holds.

    Errors: no `spmd.mesh` or more than one, a function with more than one
    block, an op without `spmd.layouts`
    (propagation did not run), a random op whose result is StridedShard or
    an embedding table sharded as StridedShard on the vocabulary,
    a redistribution with no plan, or an op that does not verify with its
    local types (a bug): a diagnostic at the op, and the pass fails.
  }];
  let dependentDialects = ["spmd::SPMDDialect", "spmd::aten::AtenDialect"];
}

def OverlapCollectivesPass
    : Pass<"spmd-overlap-collectives", "mlir::ModuleOp"> {
  let summary = "Make collectives asynchronous and overlap them with compute";
  let description = [{
    Schedules the per-rank program's collectives (the output of
    `--spmd-partition` or `--spmd-parallelize`) so that communication runs
    while independent compute does, as FSDP2's prefetching and DDP's
    bucket overlap do:

    - the ops that only unpack a collective's result (views, permutes,
      slices, splits, `spmd.local_take`: a DDP bucket's split, an FSDP
      unit's slices) move down to right before their first user; then
      every collective that has uses gets a `spmd.wait` before its first
      user (it becomes asynchronous);
    - collectives form two classes, each with its own window, as FSDP2's
      all-gather and reduce-scatter streams: gathers (`all_gather`,
      `all_to_all`, `broadcast`) and reductions (`all_reduce`,
      `reduce_scatter`). Within a class at most `max-in-flight`
      collectives are started and not yet waited for: the wait of
      collective k moves up to before collective k + `max-in-flight` of
      its class where it came later;
    - each collective then starts as early as it can: right after the wait
      of collective k - `max-in-flight` of its class and after the
      previous collective of its class (a class keeps its order), moving
      up with it the side-effect-free ops after that point that it
      depends on (its input's concat, padding, views). Ops with effects
      (random ops, collectives, waits) stay where they are and bound the
      move.

    So with `max-in-flight=1`, an FSDP unit's all_gather starts when the
    previous unit's first op needs its own gather (prefetch of one unit),
    a reduce_scatter or a DDP bucket's all_reduce runs until the next one
    of its class starts, and no more than one unit per class is in flight
    (memory stays predictable: `--spmd-report` counts it). Every rank runs
    the same program, so the changed order of collectives is the same on
    every rank. A collective with no uses stays synchronous; collectives
    that are already asynchronous keep their waits (the pass is
    idempotent).

    Errors: `max-in-flight` of 0, or a function of more than one block: a
    diagnostic, and the pass fails.
  }];
  let options = [
    Option<"maxInFlight", "max-in-flight", "unsigned", "1",
           "Collectives of one class (gathers, reductions) started and not "
           "yet waited for, at most">,
  ];
  let dependentDialects = ["spmd::SPMDDialect"];
}

def ReportPass : Pass<"spmd-report", "mlir::ModuleOp"> {
  let summary = "Print the collectives of the per-rank program and its "
                "peak memory";
  let description = [{
    For every function of a partitioned module, prints to stdout one row
    per collective: kind, mesh dims, bytes per rank (the larger of its
    local input and result: what a ring algorithm moves, up to the
    (n-1)/n factor), estimated seconds under the alpha-beta mesh model
    (the redistribute planner's `collectiveCost`: ceil(log2 n)·α plus the
    ring's (n-1)/n·B·β⁻¹ bytes, twice the bytes for all_reduce) and the
    reason (`spmd.reason`); a collective on a view of the program's mesh
    (fsdp's post-forward mesh) names the view's dims and is costed with
    the links of the ranks it spans; then totals per
    kind and per step; then the estimated peak memory per rank: the
    arguments plus the largest live set of op results, each freed after its
    last use, views sharing their source's memory, which lives as long as
    its views (the lowering's buffer discipline, docs/lowering.md; an
    asynchronous collective's input lives until its wait, and its result
    is the wait's), and what is live at that peak: the arguments by their
    `spmd.role` (parameters, optimizer state, carried gradients: role
    `grad`, accumulation across calls; other); the gathered
    parameters (op results that only move parameters: fsdp's gathers, the
    parts `reshard-after-forward=N` keeps, and the casts, concatenations,
    slices and rearrangements between them), the memory a reshard policy
    costs; and the other op results by their `spmd.phase` (forward and
    loss: activations; backward: gradients and their temporaries;
    optimizer: the updates; other).

    Where the program has asynchronous collectives (`spmd.wait`,
    `--spmd-overlap-collectives`), an overlap table follows the totals:
    per asynchronous collective, the microseconds of it hidden behind
    compute and exposed at its wait, and what runs while it is in flight
    (the number of ops and the first and last module, `spmd.module`).
    Last, the estimated step: compute (each aten op under the propagation
    cost model: GEMMs and convolutions by flops at `flops`, other ops by
    the bytes they read and write at `memory-bandwidth`) in program order,
    with the collectives one after another on one link, each starting
    when issued and the link is free; a synchronous collective, or a wait
    whose collective has not finished, stalls compute: that is the
    exposed communication.

    `machine=FILE` takes the cost model's numbers from a machine file
    (JSON, docs/performance.md "Machine files"; bench/machines/ has an
    H100 one) instead of `flops`, `memory-bandwidth`, `latency` and
    `bandwidth`: GEMM throughput by element type, memory bandwidth, and
    the links within a host and across hosts. The innermost mesh dims
    stay within a host while the product of their sizes is at most the
    devices per host; the others cross hosts. Errors: a file that cannot
    be read, malformed JSON, a missing or non-positive number (each names
    the file and the key).
  }];
  let options = [
    ListOption<"latency", "latency", "double",
               "Per mesh dim latency in seconds (default as spmd-propagate)">,
    ListOption<"bandwidth", "bandwidth", "double",
               "Per mesh dim bandwidth in bytes per second (default as "
               "spmd-propagate)">,
    Option<"flops", "flops", "double", "100e12",
           "GEMM throughput of one rank in flop/s (as spmd-propagate)">,
    Option<"memoryBandwidth", "memory-bandwidth", "double", "2e12",
           "Memory bandwidth of one rank in bytes per second, for the other "
           "ops (as spmd-propagate)">,
    Option<"machine", "machine", "std::string", "\"\"",
           "A machine file (JSON) whose numbers replace flops, "
           "memory-bandwidth, latency and bandwidth">,
  ];
}

#endif // SPMD_PARTITION_PASSES_TD
