//===- Passes.td - the parallelize entry point -------------*- tablegen -*-===//
//
// `--spmd-parallelize`: a ParallelMode's partition and transformAndCompile
// (DESIGN.md §1). Rationale and the built-in modes: docs/parallel-modes.md.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_PARALLEL_PASSES_TD
#define SPMD_PARALLEL_PASSES_TD

include "mlir/Pass/PassBase.td"

def ParallelizePass : Pass<"spmd-parallelize", "mlir::ModuleOp"> {
  let summary = "Run a ParallelMode: the per-rank program of a training step";
  let description = [{
    Runs the mode named by `mode` (ddp, fsdp, tp, fsdp-tp, or one registered by a pass
    plugin) on a captured module: its `partition` (layouts of the
    arguments, `--spmd-propagate` as a nested pass, then what
    `--spmd-partition`, `canonicalize` and `cse` do, in place, verified
    once with the result) and then its
    `transformAndCompile` (e.g. ddp's gradient bucketing). The output is
    the finished per-rank program on a mesh of shape `mesh` ("4", "2x2").

    Mode options: `bucket-cap-mb` (ddp; tp and fsdp-tp bucket their tp
    gradient all_reduces with it too), `plan` (tp, fsdp-tp: the TP
    plan file, docs/parallel-modes.md), `placements` (per-argument layout
    overrides, `fqn-glob=placements` separated by `;`, e.g.
    `placements=fc1.*=shard<0>`), and `options` for further mode options
    and modes from plugins (`key=value` pairs separated by `;`; ddp takes
    `ignored=glob,glob`, `comm-hook=bf16|none` and `first-bucket-cap-mb`,
    default 1; fsdp and fsdp-tp `units=` and
    `reshard-after-forward=true|false|N`, N a group size that divides the
    dp mesh dim: backward gathers over groups of N ranks, on a view of the
    mesh the mode adds, `spmd.mesh @post_forward`, and
    `carried-grads=sharded|unsharded`: a gradient carried from call to call
    Shard(0) on dp (default) or Partial(sum), each rank's whole summand,
    reduce-scattered only in the call that steps (FSDP2's
    `set_requires_gradient_sync(False)`);
    ddp, fsdp and fsdp-tp `reduce-dtype=bf16|f32`, mixed precision's
    gradient reduction dtype, docs/parallel-modes.md). `overlap=N` (N >= 1)
    ends with `--spmd-overlap-collectives{max-in-flight=N}`: collectives
    become asynchronous, prefetched and overlapped with compute, at most N
    per class in flight. `remat=full|selective` begins with
    `--spmd-remat{policy=...}`: each layer's forward is recomputed in its
    backward. `remat=auto budget=SIZE` (bytes, or with KiB, MiB, GiB, TiB)
    takes the least recomputation whose predicted peak memory per rank
    (`--spmd-report`'s) fits: none, else selective on the first k layers
    for the least k, else full on the first k; a remark names the choice,
    an error the least peak when nothing fits.

    Errors: no mode or an unknown one (the message lists the registered
    modes), a malformed mesh or option, and whatever the mode reports.
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"\"",
           "The ParallelMode to run (ddp, fsdp, tp, fsdp-tp, or a plugin's)">,
    Option<"mesh", "mesh", "std::string", "\"\"",
           "Mesh shape: N for a 1-D mesh, DPxTP for a 2-D one">,
    Option<"bucketCapMb", "bucket-cap-mb", "double", "25",
           "ddp, tp, fsdp-tp: the size of a gradient all_reduce bucket, "
           "in MiB">,
    Option<"placements", "placements", "std::string", "\"\"",
           "Per-argument layouts: fqn-glob=placements;...">,
    Option<"plan", "plan", "std::string", "\"\"",
           "tp, fsdp-tp: the TP plan, a JSON file (DESIGN.md 4)">,
    Option<"modeOptions", "options", "std::string", "\"\"",
           "Further mode options: key=value;...">,
    Option<"remat", "remat", "std::string", "\"none\"",
           "Activation recomputation first (--spmd-remat): none, full, "
           "selective, or auto (the least that fits `budget`)">,
    Option<"budget", "budget", "std::string", "\"\"",
           "remat=auto: peak memory per rank to fit, e.g. 70GiB">,
    Option<"overlap", "overlap", "unsigned", "0",
           "Run --spmd-overlap-collectives last with this max-in-flight "
           "(collectives per class in flight); 0 keeps every collective "
           "synchronous">,
  ];
  let dependentDialects = ["spmd::SPMDDialect", "spmd::aten::AtenDialect"];
}

def RematPass : Pass<"spmd-remat", "mlir::ModuleOp"> {
  let summary = "Activation recomputation: recompute each layer's forward "
                "in its backward";
  let description = [{
    On a captured (global) training step, before `--spmd-parallelize`
    (whose `remat=` option runs it): for each unit, the forward ops of
    its modules (`spmd.module`, phase `forward`) whose results the backward
    reads are cloned right before the first backward op that reads one,
    and the backward reads the clones. The forward's values then die in
    forward. What a unit keeps from forward is what it reads from outside
    (its input activation and its parameters), as
    `torch.utils.checkpoint` on each transformer block.

    - Units: as fsdp's (`units=auto`: each module-list element such as
      `layers.3`; or FQN globs). The root (embeddings, head) is not
      recomputed.
    - `policy=full`: every forward op of the unit is recomputed.
      `policy=selective`: the results of matrix products and attention are
      kept, the rest (norms, activations, softmax, dropout, views) is
      recomputed: torchtitan's selective-op policy.
    - The clones take phase `backward`, so that fsdp gathers their
      parameters with the unit's backward gather.
    - Each forward pass is its own: with gradient accumulation a unit's
      forward ops after a backward belong to the next micro-step, and are
      recomputed before that micro-step's backward.
    - A recomputed random op draws the same numbers as the original:
      every random op gets `spmd.random_id` (the id the lowering would
      give it: its number among the module's random ops, in order), which
      the lowering keys Philox with, and its clone keeps it.

    Errors: an unknown policy, or a function of more than one block.
  }];
  let options = [
    Option<"policy", "policy", "std::string", "\"full\"",
           "full: recompute every forward op of a unit; selective: keep "
           "matrix products and attention">,
    Option<"units", "units", "std::string", "\"auto\"",
           "auto (each module-list element) or FQN globs, comma-separated">,
  ];
  let dependentDialects = ["spmd::SPMDDialect", "spmd::aten::AtenDialect"];
}

#endif // SPMD_PARALLEL_PASSES_TD
