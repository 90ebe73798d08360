//===- Remat.cpp - activation recomputation -------------------------------===//
//
// --spmd-remat (Passes.td): each unit's forward is recomputed right before
// its backward reads it, so that its activations die in forward.
//
//===----------------------------------------------------------------------===//

#include "spmd/Parallel/DataParallel.h"
#include "spmd/Parallel/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

#include <map>

namespace spmd {
#define GEN_PASS_DEF_REMATPASS
#include "spmd/Parallel/Passes.h.inc"
} // namespace spmd

using namespace mlir;
using namespace spmd;

namespace {

/// Whether the selective policy keeps `op`'s results instead of recomputing
/// them: matrix products and attention (torchtitan's selective-op policy).
bool isSaved(Operation *op) {
  return op->hasTrait<aten::OpTrait::MatrixProduct>() ||
         isa<aten::ScaledDotProductFlashAttentionForCpuOp>(op);
}

struct RematPass : spmd::impl::RematPassBase<RematPass> {
  using RematPassBase::RematPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (policy != "full" && policy != "selective") {
      module.emitError("spmd-remat: policy must be full or selective, got '")
          << policy << "'";
      return signalPassFailure();
    }
    ParallelOptions options;
    options.options["units"] = units;
    FailureOr<FsdpUnits> parsed =
        parseFsdpUnits(module, options, /*meshDim=*/0, "spmd-remat");
    if (failed(parsed))
      return signalPassFailure();
    if (parsed->perParameter) {
      module.emitError("spmd-remat: units must be auto or FQN globs");
      return signalPassFailure();
    }
    // Every random op keeps the id the lowering would give it, and its
    // clones copy it, so that they draw what the original does.
    Builder b(module.getContext());
    aten::forEachRandomId(module, [&](Operation *op, int64_t id) {
      op->setAttr("spmd.random_id", b.getI64IntegerAttr(id));
    });
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (!fn.getBody().hasOneBlock()) {
        fn.emitOpError("spmd-remat: needs a single block");
        return signalPassFailure();
      }
      recompute(fn.getBody().front(), *parsed);
    }
  }

  void recompute(Block &block, const FsdpUnits &units) {
    // Each unit's forward ops, in program order, per forward pass: a
    // backward between two forward ops starts the next pass (gradient
    // accumulation's micro-steps), whose ops are recomputed before their
    // own backward.
    std::map<std::pair<std::string, int>, size_t> index;
    SmallVector<SmallVector<Operation *>> forward;
    int pass = 0;
    bool sawBackward = false;
    for (Operation &op : block) {
      if (getPhase(&op) == "backward")
        sawBackward = true;
      if (getPhase(&op) != "forward")
        continue;
      if (sawBackward) {
        ++pass;
        sawBackward = false;
      }
      std::string unit = units.unitOf(getModuleFqn(&op));
      if (unit.empty())
        continue;
      auto [it, added] = index.try_emplace({unit, pass}, forward.size());
      if (added)
        forward.emplace_back();
      forward[it->second].push_back(&op);
    }
    for (ArrayRef<Operation *> ops : forward) {
      llvm::SmallPtrSet<Operation *, 32> inUnit(ops.begin(), ops.end());
      // Kept: what the policy saves, and the unit's outputs (another
      // unit's or the root's forward reads them: checkpoints).
      auto keep = [&](Operation *op) {
        if (policy == "selective" && isSaved(op))
          return true;
        return llvm::any_of(op->getUsers(), [&](Operation *user) {
          return !inUnit.contains(user) && getPhase(user) != "backward";
        });
      };
      // Recomputed: the unit's ops that produce a value the backward
      // reads, and (transitively) the unit's ops they read, but the kept.
      llvm::SmallPtrSet<Operation *, 32> needed;
      SmallVector<Operation *> work;
      Operation *firstRead = nullptr;
      for (Operation *op : ops)
        if (!keep(op))
          for (Operation *user : op->getUsers())
            if (getPhase(user) == "backward") {
              if (!firstRead || user->isBeforeInBlock(firstRead))
                firstRead = user;
              work.push_back(op);
            }
      while (!work.empty()) {
        Operation *op = work.pop_back_val();
        if (keep(op) || !needed.insert(op).second)
          continue;
        for (Value operand : op->getOperands())
          if (Operation *def = operand.getDefiningOp();
              def && inUnit.count(def))
            work.push_back(def);
      }
      if (needed.empty())
        continue;
      // Clones in program order before the first backward read; the
      // backward reads them.
      OpBuilder b(firstRead);
      IRMapping map;
      for (Operation *op : ops) {
        if (!needed.contains(op))
          continue;
        Operation *clone = b.clone(*op, map);
        clone->setAttr("spmd.phase", b.getStringAttr("backward"));
      }
      for (Operation *op : ops) {
        if (!needed.contains(op))
          continue;
        for (Value result : op->getResults())
          result.replaceUsesWithIf(map.lookup(result), [](OpOperand &use) {
            return getPhase(use.getOwner()) == "backward";
          });
      }
    }
  }
};

} // namespace
