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
//===----------------------------------------------------------------------===//

#include "spmd/Parallel/DataParallel.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace spmd;

namespace {

/// Ops that only rearrange their first operand: the backward recomputes
/// them from a fresh gather rather than keeping forward's result alive.
bool isViewLike(Operation *op) {
  return aten::isSameElementsView(op) ||
         isa<aten::TOp, aten::TransposeIntOp, aten::PermuteOp, aten::ExpandOp>(
             op);
}

class FSDPMode : public ParallelMode {
public:
  LogicalResult partition(ModuleOp module,
                          const ParallelOptions &options) override {
    FailureOr<DataParallelConfig> config =
        parseDataParallelConfig(module, options, "fsdp", {});
    if (failed(config))
      return failure();
    return annotateAndPartition(
        module, config->options,
        [&](StringRef role, StringRef fqn, RankedTensorType type) {
          return config->layoutOf(role, fqn, type,
                                  {"input", "target", "param", "optim_state"});
        },
        [&](func::FuncOp fn) { return gatherParameters(fn); });
  }

  LogicalResult transformAndCompile(ModuleOp,
                                    const ParallelOptions &) override {
    return success();
  }

private:
  /// Inserts an all-gather (a fixed Shard(0) -> Replicate redistribute)
  /// before every forward and backward use of a sharded parameter.
  LogicalResult gatherParameters(func::FuncOp fn) {
    DenseSet<Operation *> gathers;
    auto gather = [&](BlockArgument param, Operation *before) -> Value {
      auto layoutAttr =
          fn.getArgAttrOfType<LayoutAttr>(param.getArgNumber(), "spmd.layout");
      OpBuilder b(before);
      std::vector<layout::Placement> whole(layoutAttr.getPlacements().size(),
                                           layout::Placement::replicate());
      auto r = RedistributeOp::create(
          b, before->getLoc(), param.getType(), param, layoutAttr,
          getLayoutAttr(layoutAttr.getMesh(), whole));
      r->setAttr("spmd.reason",
                 b.getStringAttr("fsdp: gather parameter '" + fqnOf(fn, param) +
                                 "' for " + getPhase(before).str()));
      gathers.insert(r);
      return r.getResult();
    };
    for (BlockArgument arg : fn.getArguments()) {
      auto role =
          fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "spmd.role");
      if (!role || role.getValue() != "param" ||
          !fn.getArgAttr(arg.getArgNumber(), "spmd.layout"))
        continue;
      for (OpOperand &use : llvm::make_early_inc_range(arg.getUses())) {
        StringRef phase = getPhase(use.getOwner());
        if (phase == "forward" || phase == "loss" || phase == "backward")
          use.set(gather(arg, use.getOwner()));
      }
    }
    // The backward gathers again: what it reads of a gathered parameter
    // through forward's view ops is recomputed next to it.
    // `nested`: v is read through a view chain (a gather met there belongs
    // to forward and is repeated; one met directly is this op's own).
    std::function<Value(Value, Operation *, bool)> recompute =
        [&](Value v, Operation *before, bool nested) -> Value {
      Operation *def = v.getDefiningOp();
      if (!def)
        return v;
      if (gathers.contains(def))
        return nested ? gather(cast<BlockArgument>(def->getOperand(0)), before)
                      : v;
      if (!isViewLike(def) || getPhase(def) == "backward")
        return v;
      Value source = recompute(def->getOperand(0), before, true);
      if (source == def->getOperand(0))
        return v;
      OpBuilder b(before);
      IRMapping map;
      map.map(def->getOperand(0), source);
      return b.clone(*def, map)->getResult(cast<OpResult>(v).getResultNumber());
    };
    fn.walk([&](Operation *op) {
      if (getPhase(op) != "backward" || gathers.contains(op))
        return;
      for (OpOperand &operand : op->getOpOperands())
        operand.set(recompute(operand.get(), op, false));
    });
    return success();
  }

  static std::string fqnOf(func::FuncOp fn, BlockArgument arg) {
    auto fqn = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "spmd.fqn");
    return fqn ? fqn.getValue().str() : "?";
  }
};

} // namespace

void spmd::registerFSDPMode() {
  registerParallelMode("fsdp", [] { return std::make_unique<FSDPMode>(); });
}
