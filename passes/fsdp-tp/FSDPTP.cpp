//===- FSDPTP.cpp - the fsdp-tp ParallelMode (2-D: FSDP x TP) -------------===//
//
// FSDP on the dp mesh dim composed with TP on the tp mesh dim of a 2-D mesh
// (dp, tp), seed 001's "shard to parent mesh": the plan's TP placements
// first (as the tp mode), then each parameter is sharded again on dp over
// its TP-local shard, innermost mesh dim first. Where TP left dim 0 whole
// that is Shard(0) on dp; where TP sharded dim 0 the dp shard must be
// taken inside each tp piece, which left-to-right nesting writes as
// StridedShard(0, tp) on dp (Shard(0) on tp) or StridedShard(0, k * tp)
// (StridedShard(0, k) on tp, e.g. a packed in_proj). Optimizer state
// follows its parameter; inputs and targets are Shard(0) on dp and
// Replicate on tp. Every forward and backward use of a parameter gathers
// it on dp; gradients are reduce-scattered on dp; the TP collectives run
// on tp. transformAndCompile makes the dp gathers and reduce_scatters one
// per FSDP unit (`units=`, as the fsdp mode); `carried-grads=unsharded`
// keeps a gradient carried from call to call Partial(sum) on dp (as the
// fsdp mode).
//
//===----------------------------------------------------------------------===//

#include "spmd/Parallel/DataParallel.h"
#include "spmd/Parallel/TensorParallel.h"

using namespace mlir;
using namespace spmd;
using layout::Placement;

namespace {

/// The dp placement that shards the TP-local shard of a tensor laid out as
/// `tp` on a tp mesh dim of `tpSize` ranks (seed 001).
Placement dpPlacementOver(const Placement &tp, int64_t tpSize) {
  if (tp.kind == Placement::Kind::Shard && tp.dim == 0)
    return Placement::stridedShard(0, tpSize);
  if (tp.kind == Placement::Kind::StridedShard && tp.dim == 0)
    return Placement::stridedShard(0, tp.splitFactor * tpSize);
  return Placement::shard(0);
}

class FSDPTPMode : public ParallelMode {
public:
  LogicalResult partition(ModuleOp module,
                          const ParallelOptions &options) override {
    FailureOr<std::unique_ptr<TPConfig>> config = parseTPConfig(
        module, options, "fsdp-tp", {"dp", "tp"},
        {"units", "reshard-after-forward", "reduce-dtype", "carried-grads"});
    if (failed(config))
      return failure();
    FailureOr<FsdpUnits> units =
        parseFsdpUnits(module, options, /*meshDim=*/0, "fsdp-tp");
    if (failed(units))
      return failure();
    const TPResolution &resolution = (*config)->resolution;
    int64_t tpSize = options.meshShape[1];
    return annotateAndPartition(
        module, (*config)->options,
        [&](StringRef role, StringRef fqn,
            RankedTensorType type) -> std::optional<std::vector<Placement>> {
          if (type.getRank() == 0)
            return std::nullopt;
          if (role == "input" || role == "target")
            return std::vector<Placement>{Placement::shard(0),
                                          Placement::replicate()};
          if (role != "param" && role != "optim_state" && role != "grad")
            return std::nullopt;
          auto it = resolution.placements.find(fqn);
          Placement tp = it == resolution.placements.end()
                             ? Placement::replicate()
                             : it->second;
          // An unsharded carried gradient is each dp rank's summand.
          if (role == "grad" && units->unshardedCarriedGrads)
            return std::vector<Placement>{
                Placement::partial(layout::ReduceKind::Sum), tp};
          return std::vector<Placement>{dpPlacementOver(tp, tpSize), tp};
        },
        [&](func::FuncOp fn) {
          if (failed(constrainTPBoundaries(fn, resolution)) ||
              failed(applyReduceDtype(fn, (*config)->options, "fsdp-tp",
                                      /*constrainDim=*/0)))
            return failure();
          return gatherShardedParameters(
              fn, /*meshDim=*/0, "fsdp-tp",
              [&](StringRef fqn) { return units->keepsGathered(fqn); });
        });
  }

  LogicalResult transformAndCompile(ModuleOp module,
                                    const ParallelOptions &options) override {
    // The gradient all_reduces on tp in buckets, as the tp mode.
    FailureOr<int64_t> cap =
        parseBucketCapBytes(module, options, "fsdp-tp", "bucket-cap-mb", 25);
    if (failed(cap) ||
        failed(fuseUnitCollectives(module, options, /*meshDim=*/0, "fsdp-tp")))
      return failure();
    return bucketGradientAllReduces(module, "fsdp-tp", *cap,
                                    /*firstCapBytes=*/0);
  }
};

} // namespace

void spmd::registerFSDPTPMode() {
  registerParallelMode("fsdp-tp",
                       [] { return std::make_unique<FSDPTPMode>(); });
}
