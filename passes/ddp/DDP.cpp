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
// Ignored parameters (`ignored=glob,glob`, seed 004's ignored modules and
// states) keep their local gradients: no all_reduce, each rank updates with
// its own, as torch.distributed's ignored states do.
//
// transformAndCompile buckets the gradient all_reduces (bucket_cap_mb,
// default 25), in backward order, into few flat all_reduces, and with
// `comm-hook=bf16` (seed 004's communication hook, PyTorch's
// bf16_compress_hook) runs them in bf16.
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
    FailureOr<DataParallelConfig> config = parseDataParallelConfig(
        module, options, "ddp",
        {"ignored", "comm-hook", "first-bucket-cap-mb"});
    if (failed(config))
      return failure();
    return annotateAndPartition(
        module, config->options,
        [&](StringRef role, StringRef fqn, RankedTensorType type) {
          // A gradient carried into the next call stays each rank's own
          // summand (DDP's no_sync): reduced in the call that steps.
          return config->layoutOf(role, fqn, type, {"input", "target"},
                                  {"grad"});
        },
        [&](func::FuncOp fn) {
          SmallVector<std::string> ignored;
          auto it = options.options.find("ignored");
          if (it != options.options.end()) {
            SmallVector<StringRef> patterns;
            StringRef(it->second).split(patterns, ',', -1, false);
            for (StringRef p : patterns)
              ignored.push_back(p.trim().str());
          }
          FailureOr<SmallVector<Operation *>> beforeCasts =
              applyReduceDtype(fn, config->options, "ddp", std::nullopt);
          if (failed(beforeCasts))
            return failure();
          reduceGradients(fn, ignored, *beforeCasts);
          // The update runs replicated on every rank (DTensorExpandMode):
          // each gradient is reduced whole before it, not reduce-scattered
          // into a sharded update. Updates of overridden (sharded)
          // arguments stay free.
          fn.walk([&](ShardingRuleOpInterface op) {
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
  /// use in the update: a fixed Partial -> Replicate redistribute. The
  /// gradients of ignored parameters (seed 004's ignored modules/states:
  /// every parameter they update matches an `ignored` pattern) are not
  /// synchronized: each rank updates with its own (spmd.keep_local). A
  /// gradient cast of `beforeCasts` (mixed precision, applyReduceDtype)
  /// reads its gradient reduced, in the computed dtype.
  static void reduceGradients(func::FuncOp fn, ArrayRef<std::string> ignored,
                              ArrayRef<Operation *> beforeCasts) {
    auto mesh = FlatSymbolRefAttr::get(fn.getContext(), "mesh");
    auto partial = getLayoutAttr(
        mesh, {layout::Placement::partial(layout::ReduceKind::Sum)});
    auto whole = getLayoutAttr(mesh, {layout::Placement::replicate()});
    for (Value grad : findGradients(fn)) {
      Operation *first = nullptr;
      for (Operation *user : grad.getUsers())
        if (getPhase(user) == "optimizer" &&
            (!first || user->isBeforeInBlock(first)))
          first = user;
      SmallVector<StringRef> params;
      for (unsigned i : argumentsUpdatedBy(fn, grad))
        if (!getArgFqn(fn, i).empty())
          params.push_back(getArgFqn(fn, i));
      bool skip = !ignored.empty() && !params.empty() &&
                  llvm::all_of(params, [&](StringRef fqn) {
                    return llvm::any_of(ignored, [&](const std::string &p) {
                      return matchFqn(p, fqn);
                    });
                  });
      Operation *gradCast = grad.getDefiningOp();
      bool beforeCast = llvm::is_contained(beforeCasts, gradCast);
      // The cast waits for the update, so that the reduction can join a
      // bucket.
      if (beforeCast)
        gradCast->moveBefore(first);
      Operation *at = beforeCast ? gradCast : first;
      Value reduced = beforeCast ? gradCast->getOperand(0) : grad;
      OpBuilder b(at);
      Operation *r =
          skip ? KeepLocalOp::create(b, at->getLoc(), reduced.getType(),
                                     reduced, partial, whole)
                     .getOperation()
               : RedistributeOp::create(b, at->getLoc(), reduced.getType(),
                                        reduced, partial, whole)
                     .getOperation();
      copyProvenance(at, r);
      r->setAttr("spmd.reason",
                 b.getStringAttr(skip ? "ddp: ignored parameter, gradient "
                                        "not synchronized"
                                      : "ddp: gradient all_reduce before "
                                        "the update"));
      if (beforeCast) {
        gradCast->setOperand(0, r->getResult(0));
        continue;
      }
      grad.replaceUsesWithIf(r->getResult(0), [&](OpOperand &use) {
        return use.getOwner() != r && getPhase(use.getOwner()) == "optimizer";
      });
    }
  }

  LogicalResult transformAndCompile(ModuleOp module,
                                    const ParallelOptions &options) override {
    // PyTorch DDP's defaults: 25 MiB buckets, the first one (the last
    // gradients of the model, computed first) of 1 MiB so that its
    // all_reduce starts early in backward.
    FailureOr<int64_t> cap =
        parseBucketCapBytes(module, options, "ddp", "bucket-cap-mb", 25);
    FailureOr<int64_t> firstCap =
        parseBucketCapBytes(module, options, "ddp", "first-bucket-cap-mb", 1);
    if (failed(cap) || failed(firstCap))
      return failure();
    bool bf16 = false;
    auto hook = options.options.find("comm-hook");
    if (hook != options.options.end()) {
      if (hook->second != "bf16" && hook->second != "none")
        return module.emitError("ddp: comm-hook must be bf16 or none, got '")
               << hook->second << "'";
      bf16 = hook->second == "bf16";
    }
    return bucketGradientAllReduces(module, "ddp", *cap, *firstCap, bf16);
  }
};

} // namespace

void spmd::registerDDPMode() {
  registerParallelMode("ddp", [] { return std::make_unique<DDPMode>(); });
}
