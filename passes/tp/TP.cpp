//===- TP.cpp - the tp ParallelMode (tensor and sequence parallel) --------===//
//
// Tensor parallelism from a plan of ParallelStyles (seeds 000 and 002,
// DESIGN.md §4) on the 1-D mesh `tp`: the styles give the parameters their
// placements (colwise Linear Shard(0), rowwise Shard(1), embedding rowwise
// Shard(0), explicit placements such as in_proj_weight's StridedShard(0, 3))
// and pin the styled modules' boundaries with sharding constraints (colwise
// input Replicate, output Shard(-1); rowwise input Shard(-1), output
// Replicate; sequence_parallel Shard(1) both ways); inputs, targets and
// every other argument are Replicate, and optimizer state follows its
// parameter. Propagation then fills in the rest: Megatron's two all_reduces
// per transformer layer in forward, head-parallel attention.
//
//===----------------------------------------------------------------------===//

#include "spmd/Parallel/DataParallel.h"
#include "spmd/Parallel/TensorParallel.h"

using namespace mlir;
using namespace spmd;

namespace {

class TPMode : public ParallelMode {
public:
  LogicalResult partition(ModuleOp module,
                          const ParallelOptions &options) override {
    FailureOr<std::unique_ptr<TPConfig>> config =
        parseTPConfig(module, options, "tp", {"tp"});
    if (failed(config))
      return failure();
    const TPResolution &resolution = (*config)->resolution;
    return annotateAndPartition(
        module, (*config)->options,
        [&](StringRef, StringRef fqn,
            RankedTensorType) -> std::optional<std::vector<layout::Placement>> {
          auto it = resolution.placements.find(fqn);
          if (it == resolution.placements.end())
            return std::nullopt;
          return std::vector<layout::Placement>{it->second};
        },
        [&](func::FuncOp fn) { return constrainTPBoundaries(fn, resolution); });
  }

  /// The gradients tp reduces (those of parameters replicated on tp whose
  /// inputs are sharded: sequence-parallel norms, rowwise biases) go in
  /// buckets of bucket-cap-mb, as Megatron-SP all-reduces the layer norms'
  /// gradients coalesced.
  LogicalResult transformAndCompile(ModuleOp module,
                                    const ParallelOptions &options) override {
    FailureOr<int64_t> cap =
        parseBucketCapBytes(module, options, "tp", "bucket-cap-mb", 25);
    if (failed(cap))
      return failure();
    return bucketGradientAllReduces(module, "tp", *cap, /*firstCapBytes=*/0);
  }
};

} // namespace

void spmd::registerTPMode() {
  registerParallelMode("tp", [] { return std::make_unique<TPMode>(); });
}
