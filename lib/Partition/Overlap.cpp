//===- Overlap.cpp - asynchronous collectives and their schedule ----------===//
//
// --spmd-overlap-collectives (Passes.td): waits at first use, a window per
// class of collectives, starts hoisted as early as the window allows.
//
//===----------------------------------------------------------------------===//

#include "spmd/Partition/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace spmd {
#define GEN_PASS_DEF_OVERLAPCOLLECTIVESPASS
#include "spmd/Partition/Passes.h.inc"
} // namespace spmd

using namespace mlir;
using namespace spmd;

namespace {

/// The window a collective counts against: reductions (1) or gathers (0),
/// as FSDP2 issues all-gathers and reduce-scatters on separate streams.
unsigned classOf(Operation *op) {
  return isa<AllReduceOp, ReduceScatterOp>(op) ? 1 : 0;
}

/// Whether `op` only unpacks a collective's result (views, permutes,
/// slices, splits, local_take).
bool isUnpacking(Operation *op) {
  return op->getNumRegions() == 0 && isMemoryEffectFree(op) &&
         (op->hasTrait<aten::OpTrait::Rearrangement>() ||
          op->hasTrait<aten::OpTrait::Split>() ||
          isa<aten::SliceTensorOp, LocalTakeOp>(op));
}

/// The first op after `op` in its block that reads one of `op`'s results
/// (directly or in a region), or null. Found by a scan: after a move the
/// block's order is stale, and recomputing it per query costs the block.
Operation *firstReader(Operation *op) {
  llvm::SmallPtrSet<Operation *, 8> readers;
  for (Operation *use : op->getUsers())
    readers.insert(op->getBlock()->findAncestorOpInBlock(*use));
  Operation *first = op->getNextNode();
  while (first && !readers.contains(first))
    first = first->getNextNode();
  return first;
}

/// Moves the unpacking ops that read `v`, and those that read theirs, down
/// to right before their first user, so that a wait goes where the data is
/// needed (a DDP bucket's split sits right after its all_reduce).
void sinkUnpacking(Value v) {
  for (Operation *user : v.getUsers()) {
    if (!isUnpacking(user))
      continue;
    for (Value result : user->getResults())
      sinkUnpacking(result);
    if (Operation *first = firstReader(user))
      user->moveBefore(first);
  }
}

/// Makes `op` asynchronous: one wait before its first user takes its uses
/// (but those of waits already there).
void insertWait(Operation *op) {
  Value result = op->getResult(0);
  OpBuilder b(firstReader(op));
  auto wait = WaitOp::create(b, op->getLoc(), result);
  // Waits that were there keep waiting for the collective itself.
  result.replaceUsesWithIf(wait.getResult(), [](OpOperand &use) {
    return !isa<WaitOp>(use.getOwner());
  });
}

/// Moves `collective` up to right after `anchor` (null: the block's start)
/// with the side-effect-free ops after `anchor` that it depends on, in
/// their order; an op it depends on that has effects stays, and the move
/// stops right after it.
void hoist(Operation *collective, Operation *anchor) {
  llvm::SmallPtrSet<Operation *, 16> needed = {collective};
  SmallVector<Operation *> slice;
  Operation *stop = anchor;
  for (Operation *op = collective->getPrevNode(); op != anchor;
       op = op->getPrevNode()) {
    bool feeds = llvm::any_of(op->getUsers(), [&](Operation *user) {
      return needed.contains(op->getBlock()->findAncestorOpInBlock(*user));
    });
    if (!feeds)
      continue;
    if (op->getNumRegions() != 0 || !isMemoryEffectFree(op)) {
      stop = op;
      break;
    }
    needed.insert(op);
    slice.push_back(op);
  }
  Block *block = collective->getBlock();
  auto place = [&](Operation *op, Operation *after) {
    if (after)
      op->moveAfter(after);
    else
      op->moveBefore(block, block->begin());
  };
  Operation *last = stop;
  for (Operation *op : llvm::reverse(slice)) {
    place(op, last);
    last = op;
  }
  place(collective, last);
}

struct OverlapCollectivesPass
    : spmd::impl::OverlapCollectivesPassBase<OverlapCollectivesPass> {
  using OverlapCollectivesPassBase::OverlapCollectivesPassBase;

  void runOnOperation() override {
    if (maxInFlight == 0) {
      getOperation().emitError("spmd-overlap-collectives: max-in-flight must "
                               "be at least 1");
      return signalPassFailure();
    }
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      if (!fn.getBody().hasOneBlock()) {
        fn.emitOpError("spmd-overlap-collectives: needs a single block");
        return signalPassFailure();
      }
      schedule(fn.getBody().front());
    }
  }

  void schedule(Block &block) {
    // The collectives that have uses, per class, in program order.
    SmallVector<CollectiveOpInterface> classes[2];
    for (auto op : block.getOps<CollectiveOpInterface>())
      if (!op->use_empty())
        classes[classOf(op)].push_back(op);
    for (auto &list : classes)
      for (CollectiveOpInterface op : list)
        if (!WaitOp::isAsync(op)) {
          sinkUnpacking(op->getResult(0));
          insertWait(op);
        }
    // The window: collective k is waited for before k + N starts.
    for (auto &list : classes)
      for (size_t k = 0; k + maxInFlight < list.size(); ++k) {
        WaitOp wait = WaitOp::getCompletingWait(list[k]);
        Operation *next = list[k + maxInFlight];
        if (next->isBeforeInBlock(wait))
          wait->moveBefore(next);
      }
    // Starts as early as the window and the class order allow.
    for (auto &list : classes)
      for (size_t k = 0; k < list.size(); ++k) {
        Operation *anchor = nullptr;
        if (k >= maxInFlight)
          anchor = WaitOp::getCompletingWait(list[k - maxInFlight]);
        if (k > 0 && (!anchor || anchor->isBeforeInBlock(list[k - 1])))
          anchor = list[k - 1];
        hoist(list[k], anchor);
      }
  }
};

} // namespace
