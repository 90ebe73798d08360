//===- FSDP.cpp - the fsdp ParallelMode (ZeRO-3) --------------------------===//
//
// Fully sharded data parallelism (`_spmd` DataParallel FULLY_SHARD):
// parameters and optimizer state Shard(0) on the 1-D mesh `dp`, inputs and
// targets Shard(0). Every use of a parameter in forward gathers it first,
// and the backward gathers it again (the gathered copy of forward is not
// kept alive for backward: the view chains the backward reads are
// recomputed from a fresh gather); gradients are reduce-scattered onto the
// parameter's shards and the optimizer updates the local shard, so
// parameters stay sharded between steps. Uneven dim-0 sizes are padded
// (docs/partition.md).
//
// transformAndCompile communicates per FSDP unit, as FSDP2 (`fully_shard`
// on each transformer block and on the root): one all_gather of a unit's
// parameters in forward, one in backward, one reduce_scatter of its
// gradients (fuseUnitCollectives). `units=` picks the unit modules by FQN
// pattern (default: each module list element, `layers.0`; `none`: one
// collective per parameter). The root unit is not resharded after forward
// (FSDP2's root): its parameters are gathered once for forward and
// backward; `reshard-after-forward=false` keeps every unit so, and
// `reshard-after-forward=N` keeps 1/N of each unit gathered over groups of
// N ranks (FSDP2's post-forward mesh), so that backward gathers over N.
// `carried-grads=unsharded` keeps a gradient carried from call to call
// Partial(sum), each rank's whole summand (FSDP2's
// `set_requires_gradient_sync(False)`): it is reduce-scattered once, in the
// call that steps.
//
//===----------------------------------------------------------------------===//

#include "spmd/Parallel/DataParallel.h"

using namespace mlir;
using namespace spmd;

namespace {

class FSDPMode : public ParallelMode {
public:
  LogicalResult partition(ModuleOp module,
                          const ParallelOptions &options) override {
    FailureOr<DataParallelConfig> config = parseDataParallelConfig(
        module, options, "fsdp",
        {"units", "reshard-after-forward", "carried-grads"});
    if (failed(config))
      return failure();
    FailureOr<FsdpUnits> units =
        parseFsdpUnits(module, options, /*meshDim=*/0, "fsdp");
    if (failed(units))
      return failure();
    return annotateAndPartition(
        module, config->options,
        [&](StringRef role, StringRef fqn, RankedTensorType type) {
          return config->layoutOf(
              role, fqn, type,
              {"input", "target", "param", "optim_state", "grad"},
              units->unshardedCarriedGrads ? ArrayRef<StringRef>{"grad"}
                                           : ArrayRef<StringRef>{});
        },
        [&](func::FuncOp fn) {
          if (failed(applyReduceDtype(fn, config->options, "fsdp",
                                      /*constrainDim=*/0)))
            return failure();
          return gatherShardedParameters(
              fn, /*meshDim=*/0, "fsdp",
              [&](StringRef fqn) { return units->keepsGathered(fqn); });
        });
  }

  LogicalResult transformAndCompile(ModuleOp module,
                                    const ParallelOptions &options) override {
    return fuseUnitCollectives(module, options, /*meshDim=*/0, "fsdp");
  }
};

} // namespace

void spmd::registerFSDPMode() {
  registerParallelMode("fsdp", [] { return std::make_unique<FSDPMode>(); });
}
