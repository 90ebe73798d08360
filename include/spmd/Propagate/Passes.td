//===- Passes.td - propagation stage passes ----------------*- tablegen -*-===//
//
// The "propagate" and "reshard" steps of the pipeline (DESIGN.md §1): decide
// a layout for every value of the global program and insert the
// `spmd.redistribute`s that reconcile producers with consumers. Rationale:
// docs/propagation.md.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_PROPAGATE_PASSES_TD
#define SPMD_PROPAGATE_PASSES_TD

include "mlir/Pass/PassBase.td"

def PropagatePass : Pass<"spmd-propagate", "mlir::ModuleOp"> {
  let summary = "Choose a sharding strategy for every op and insert "
                "redistributions";
  let description = [{
    Works on the global (single-device-shaped) program of every function
    with a body, on the module's one `spmd.mesh`.

    Fixed layouts, never changed: function arguments (`spmd.layout`;
    Replicate when absent), function results (`spmd.layout`; Replicate when
    absent), and existing `spmd.redistribute` ops (their operand must be
    `from`, their result is `to`). An op with the discardable attribute
    `spmd.strategy = k` runs its k-th strategy (the order of
    `--spmd-test-print-strategies`), for tests; one with the unit
    attribute `spmd.replicated` runs its strategy with every operand and
    result Replicate (it computes on whole values: Muon's Newton-Schulz
    iteration), its sharded operands redistributed to it.

    Every other aten op gets one of its strategies on the mesh (the product
    of its einsum rule's 1-D strategies, ShardingRuleOpInterface), chosen to
    minimize the estimated time of the whole step: the communication of
    every redistribution (the redistribute planner's alpha-beta cost, one
    redistribution per value and target layout however many consumers share
    it) plus every op's local compute. Partial results stay Partial until a
    consumer's strategy needs Replicate or a Shard. The search is
    deterministic (docs/propagation.md): a forward pass estimates the
    cheapest way to produce each layout of each value and a backward pass
    picks each op's strategy given its consumers; DTensor's greedy choice,
    and the greedy choice that keeps tensor parallelism's activations
    replicated (Megatron's backward), are two more starts; sweeps of
    single-op moves then lower the cheapest start's total until none
    helps.

    Output: each aten op carries `spmd.layouts` (one `#spmd.layout` per
    result); each argument and result of a function carries its
    `spmd.layout`; where a consumer needs another layout than its producer
    gives, one `spmd.redistribute` per (value, layout) is inserted before
    its first consumer, located at it, with `spmd.reason` naming the consumer
    and operand. An existing `spmd.redistribute` whose operand already has
    its `to` layout (a DDP gradient computed whole) is dropped: it keeps
    the global value, so nothing needs to move.

    Errors: no `spmd.mesh` or more than one, a function with more than one
    block, an op with tensors and no sharding rule, a `spmd.strategy` out of range or other than `spmd.replicated`'s, a layout that fits no
    plan, or a cost model whose lists do not match the mesh rank.
  }];
  let options = [
    ListOption<"latency", "latency", "double",
               "Per mesh dim latency of one message in seconds "
               "(default: 20e-6 for outer dims, 5e-6 for the last)">,
    ListOption<"bandwidth", "bandwidth", "double",
               "Per mesh dim link bandwidth in bytes per second "
               "(default: 25e9 for outer dims, 150e9 for the last)">,
    Option<"flops", "flops", "double", "100e12",
           "GEMM throughput of one rank in flop/s">,
    Option<"memoryBandwidth", "memory-bandwidth", "double", "2e12",
           "Memory bandwidth of one rank in bytes per second (non-GEMM ops)">,
    Option<"maxSweeps", "max-sweeps", "unsigned", "8",
           "Bound on the improvement sweeps after the first assignment">,
    Option<"search", "search", "std::string", "\"cost\"",
           "cost: the whole-graph search; greedy: DTensor's greedy choice "
           "alone (each op in program order takes its cheapest strategy "
           "given its operands); greedy-forward: the greedy choice for the "
           "forward phase (DTensor's eager semantics), the search for the "
           "rest">,
  ];
  let dependentDialects = ["spmd::SPMDDialect"];
}

#endif // SPMD_PROPAGATE_PASSES_TD
