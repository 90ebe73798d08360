//===- DDP.cpp - the ddp ParallelMode (DTensorExpandMode) -----------------===//
//
// Data parallelism as seed 003's DTensorExpandMode and seed 004's
// composable replicate: parameters, buffers and optimizer state Replicate,
// inputs and targets Shard(0) on the 1-D mesh `dp`, per-argument overrides
// by FQN pattern. The backward's gradients are Partial(sum) over the batch;
// the optimizer update runs replicated, so each gradient is all-reduced
// before it, and the step equals the single-device step for any batch size
// (uneven shards are padded and masked, docs/partition.md).
//
// transformAndCompile buckets the gradient all_reduces (bucket_cap_mb,
// default 25), in backward order, into few flat all_reduces.
//
//===----------------------------------------------------------------------===//

#include "spmd/Parallel/DataParallel.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace spmd;

namespace {

class DDPMode : public ParallelMode {
public:
  LogicalResult partition(ModuleOp module,
                          const ParallelOptions &options) override {
    FailureOr<DataParallelConfig> config =
        parseDataParallelConfig(module, options, "ddp", {"bucket-cap-mb"});
    if (failed(config))
      return failure();
    return annotateAndPartition(
        module, config->options,
        [&](StringRef role, StringRef fqn, RankedTensorType type)
            -> std::optional<std::vector<layout::Placement>> {
          if (auto p = config->overrideFor(fqn))
            return p;
          if ((role == "input" || role == "target") && type.getRank() > 0)
            return std::vector<layout::Placement>{layout::Placement::shard(0)};
          return std::nullopt;
        },
        [&](func::FuncOp fn) {
          reduceGradients(fn);
          // The update runs replicated on every rank (DTensorExpandMode):
          // each gradient is reduced whole before it, not reduce-scattered
          // into a sharded update. Updates of overridden (sharded)
          // arguments stay free.
          fn.walk([&](aten::ShardingRuleOpInterface op) {
            if (getPhase(op) != "optimizer")
              return;
            bool sharded = llvm::any_of(op->getOperands(), [&](Value v) {
              auto arg = dyn_cast<BlockArgument>(v);
              return arg && fn.getArgAttr(arg.getArgNumber(), "spmd.layout");
            });
            if (!sharded)
              op->setAttr(
                  "spmd.strategy",
                  IntegerAttr::get(IntegerType::get(op->getContext(), 64), 0));
          });
          return success();
        });
  }

  /// Each gradient (a value of backward that the optimizer reads) is
  /// Partial(sum) over the batch and all-reduced once, before its first
  /// use in the update: a fixed Partial -> Replicate redistribute.
  static void reduceGradients(func::FuncOp fn) {
    auto mesh = FlatSymbolRefAttr::get(fn.getContext(), "mesh");
    auto partial = getLayoutAttr(
        mesh, {layout::Placement::partial(layout::ReduceKind::Sum)});
    auto whole = getLayoutAttr(mesh, {layout::Placement::replicate()});
    SmallVector<Value> grads;
    fn.walk([&](Operation *op) {
      if (getPhase(op) != "backward")
        return;
      for (Value v : op->getResults())
        if (isa<RankedTensorType>(v.getType()) &&
            llvm::any_of(v.getUsers(), [](Operation *user) {
              return getPhase(user) == "optimizer";
            }))
          grads.push_back(v);
    });
    for (Value grad : grads) {
      Operation *first = nullptr;
      for (Operation *user : grad.getUsers())
        if (getPhase(user) == "optimizer" &&
            (!first || user->isBeforeInBlock(first)))
          first = user;
      OpBuilder b(first);
      auto r = RedistributeOp::create(b, first->getLoc(), grad.getType(), grad,
                                      partial, whole);
      r->setAttr("spmd.reason",
                 b.getStringAttr("ddp: gradient all_reduce before the update"));
      grad.replaceUsesWithIf(r.getResult(), [&](OpOperand &use) {
        return use.getOwner() != r && getPhase(use.getOwner()) == "optimizer";
      });
    }
  }

  LogicalResult transformAndCompile(ModuleOp module,
                                    const ParallelOptions &options) override {
    double capMb = 25;
    auto it = options.options.find("bucket-cap-mb");
    if (it != options.options.end() &&
        (llvm::StringRef(it->second).getAsDouble(capMb) || capMb < 0))
      return module.emitError("ddp: bucket-cap-mb must be a non-negative "
                              "number, got '")
             << it->second << "'";
    return bucketGradientAllReduces(module,
                                    static_cast<int64_t>(capMb * 1024 * 1024));
  }
};

} // namespace

void spmd::registerDDPMode() {
  registerParallelMode("ddp", [] { return std::make_unique<DDPMode>(); });
}
