//===- DataParallel.cpp - what the data-parallel modes share --------------===//

#include "spmd/Parallel/DataParallel.h"
#include "spmd/Propagate/Strategy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace spmd;

std::optional<std::vector<layout::Placement>>
DataParallelConfig::overrideFor(StringRef fqn) const {
  for (const auto &[pattern, placements] : overrides)
    if (matchFqn(pattern, fqn))
      return placements;
  return std::nullopt;
}

std::optional<std::vector<layout::Placement>>
DataParallelConfig::layoutOf(StringRef role, StringRef fqn,
                             RankedTensorType type,
                             ArrayRef<StringRef> shardedRoles) const {
  if (auto p = overrideFor(fqn))
    return p;
  if (llvm::is_contained(shardedRoles, role) && type.getRank() > 0)
    return std::vector<layout::Placement>{layout::Placement::shard(0)};
  return std::nullopt;
}

FailureOr<DataParallelConfig>
spmd::parseDataParallelConfig(ModuleOp module, const ParallelOptions &options,
                              StringRef mode, ArrayRef<StringRef> known) {
  SmallVector<StringRef> keys = {"placements", "bucket-cap-mb"};
  keys.append(known.begin(), known.end());
  FailureOr<ParallelOptions> checked =
      checkModeOptions(module, options, mode, {"dp"}, keys);
  if (failed(checked))
    return failure();
  DataParallelConfig config;
  config.options = std::move(*checked);
  auto it = options.options.find("placements");
  if (it == options.options.end())
    return config;
  SmallVector<StringRef> entries;
  StringRef(it->second).split(entries, ';', -1, /*KeepEmpty=*/false);
  for (StringRef entry : entries) {
    auto [pattern, text] = entry.split('=');
    std::string error;
    FailureOr<std::vector<layout::Placement>> placements =
        parsePlacements(module.getContext(), text.trim(), error);
    if (pattern.trim().empty() || text.size() == entry.size() ||
        failed(placements))
      return module.emitError() << mode << ": placements entry '" << entry
                                << "' is not fqn-glob=placements"
                                << (error.empty() ? "" : ": " + error);
    if (placements->size() != options.meshShape.size())
      return module.emitError()
             << mode << ": placements entry '" << entry << "' has "
             << placements->size() << " placements for a mesh of "
             << options.meshShape.size() << " dims";
    config.overrides.push_back({pattern.trim().str(), *placements});
  }
  return config;
}

namespace {

/// One bucket's all_reduces (in the order their gradients are computed)
/// become a flat one after the last gradient, which is returned.
AllReduceOp fuse(MutableArrayRef<AllReduceOp> bucket, unsigned index) {
  AllReduceOp first = bucket.front();
  Operation *last = bucket.back().getInput().getDefiningOp();
  int64_t total = 0, bytes = 0;
  for (AllReduceOp r : bucket) {
    total += cast<RankedTensorType>(r.getType()).getNumElements();
    bytes += tensorBytes(r.getInput().getType());
  }
  ProvenanceListener provenance(first);
  OpBuilder b(last->getContext(), &provenance);
  b.setInsertionPointAfter(last);
  Location loc = first.getLoc();
  auto elementType = cast<RankedTensorType>(first.getType()).getElementType();
  SmallVector<Value> flats;
  SmallVector<int64_t> sizes;
  for (AllReduceOp r : bucket) {
    int64_t n = cast<RankedTensorType>(r.getType()).getNumElements();
    sizes.push_back(n);
    flats.push_back(
        aten::ViewOp::create(b, loc, RankedTensorType::get({n}, elementType),
                             r.getInput(), b.getDenseI64ArrayAttr({n})));
  }
  auto flatType = RankedTensorType::get({total}, elementType);
  Value cat =
      aten::CatOp::create(b, loc, flatType, flats, b.getI64IntegerAttr(0));
  auto reduced =
      AllReduceOp::create(b, loc, flatType, cat, first.getMeshAttr(),
                          first.getMeshDimsAttr(), first.getReduceAttr());
  reduced->setAttr(
      "spmd.reason",
      b.getStringAttr("ddp gradient bucket " + std::to_string(index) + ": " +
                      std::to_string(bucket.size()) + " gradients, " +
                      std::to_string(bytes) + " bytes"));
  SmallVector<Type> pieceTypes;
  for (int64_t n : sizes)
    pieceTypes.push_back(RankedTensorType::get({n}, elementType));
  auto pieces = aten::SplitWithSizesOp::create(
      b, loc, pieceTypes, reduced.getResult(), b.getDenseI64ArrayAttr(sizes),
      b.getI64IntegerAttr(0));
  for (auto [r, piece] : llvm::zip(bucket, pieces.getResults())) {
    auto type = cast<RankedTensorType>(r.getType());
    Value whole = aten::ViewOp::create(b, loc, type, piece,
                                       b.getDenseI64ArrayAttr(type.getShape()));
    r.getResult().replaceAllUsesWith(whole);
    r->erase();
  }
  return reduced;
}

/// The bf16 communication hook on one gradient all_reduce: cast to bf16,
/// reduce, cast back.
void compressToBf16(AllReduceOp r) {
  auto type = cast<RankedTensorType>(r.getType());
  ProvenanceListener provenance(r);
  OpBuilder b(r, &provenance);
  Location loc = r.getLoc();
  Type bf16 = b.getBF16Type();
  auto narrow = RankedTensorType::get(type.getShape(), bf16);
  Value cast =
      aten::ToCopyOp::create(b, loc, narrow, r.getInput(), TypeAttr::get(bf16));
  auto reduced = AllReduceOp::create(b, loc, narrow, cast, r.getMeshAttr(),
                                     r.getMeshDimsAttr(), r.getReduceAttr());
  auto reason = r->getAttrOfType<StringAttr>("spmd.reason");
  reduced->setAttr("spmd.reason",
                   b.getStringAttr((reason ? reason.str() + " " : "") +
                                   "(bf16 compression hook)"));
  Value back = aten::ToCopyOp::create(b, loc, type, reduced.getResult(),
                                      TypeAttr::get(type.getElementType()));
  r.getResult().replaceAllUsesWith(back);
  r->erase();
}

} // namespace

LogicalResult spmd::bucketGradientAllReduces(ModuleOp module, int64_t capBytes,
                                             bool compressBf16) {
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    // Gradient reductions (of a value of backward that the update reads;
    // not the loss, which accumulated micro-steps also sum in backward), in
    // the order their gradients are computed.
    SmallVector<AllReduceOp> grads;
    fn.walk([&](AllReduceOp r) {
      Operation *def = r.getInput().getDefiningOp();
      if (def && def->getBlock() == r->getBlock() &&
          getPhase(def) == "backward" &&
          llvm::any_of(r->getUsers(), [](Operation *user) {
            return getPhase(user) == "optimizer";
          }))
        grads.push_back(r);
    });
    llvm::stable_sort(grads, [](AllReduceOp a, AllReduceOp b) {
      return a.getInput().getDefiningOp()->isBeforeInBlock(
          b.getInput().getDefiningOp());
    });
    SmallVector<SmallVector<AllReduceOp>> buckets;
    int64_t bytes = 0;
    // The earliest use of a result of the open bucket.
    Operation *firstUse = nullptr;
    for (AllReduceOp r : grads) {
      // The bucket is reduced after its last gradient, `def`: it holds one
      // kind of reduction, up to the cap, and may only grow while every
      // result it gives is used after `def`.
      Operation *def = r.getInput().getDefiningOp();
      Operation *use = nullptr;
      for (Operation *user : r->getUsers())
        if (!use || user->isBeforeInBlock(use))
          use = user;
      auto after = [&](Operation *u) { return !u || def->isBeforeInBlock(u); };
      SmallVector<AllReduceOp> *open =
          buckets.empty() ? nullptr : &buckets.back();
      // A cap of 0 disables bucketing: every gradient alone.
      bool fits =
          capBytes > 0 && open &&
          open->front().getMeshDims() == r.getMeshDims() &&
          open->front().getReduce() == r.getReduce() &&
          cast<RankedTensorType>(open->front().getType()).getElementType() ==
              cast<RankedTensorType>(r.getType()).getElementType() &&
          bytes + tensorBytes(r.getInput().getType()) <= capBytes &&
          after(firstUse) && after(use);
      if (!fits) {
        buckets.push_back({});
        bytes = 0;
        firstUse = nullptr;
      }
      buckets.back().push_back(r);
      bytes += tensorBytes(r.getInput().getType());
      if (use && (!firstUse || use->isBeforeInBlock(firstUse)))
        firstUse = use;
    }
    unsigned index = 0;
    for (auto &bucket : buckets) {
      AllReduceOp reduced =
          bucket.size() > 1 ? fuse(bucket, index++) : bucket.front();
      auto element = cast<RankedTensorType>(reduced.getType()).getElementType();
      if (compressBf16 && (element.isF32() || element.isF64()))
        compressToBf16(reduced);
    }
  }
  return success();
}

LogicalResult spmd::gatherShardedParameters(func::FuncOp fn, int64_t meshDim,
                                            StringRef mode) {
  DenseSet<Operation *> gathers;
  auto gather = [&](BlockArgument param, Operation *before) -> Value {
    auto layoutAttr =
        fn.getArgAttrOfType<LayoutAttr>(param.getArgNumber(), "spmd.layout");
    ProvenanceListener provenance(before);
    OpBuilder b(before, &provenance);
    std::vector<layout::Placement> whole = layoutAttr.getLayoutPlacements();
    whole[meshDim] = layout::Placement::replicate();
    auto r = RedistributeOp::create(b, before->getLoc(), param.getType(), param,
                                    layoutAttr,
                                    getLayoutAttr(layoutAttr.getMesh(), whole));
    r->setAttr("spmd.reason",
               b.getStringAttr(mode + ": gather parameter '" +
                               getArgFqn(fn, param.getArgNumber()).str() +
                               "' for " + getPhase(before).str()));
    gathers.insert(r);
    return r.getResult();
  };
  for (BlockArgument arg : fn.getArguments()) {
    auto layoutAttr =
        fn.getArgAttrOfType<LayoutAttr>(arg.getArgNumber(), "spmd.layout");
    if (getArgRole(fn, arg.getArgNumber()) != "param" || !layoutAttr ||
        !layoutAttr.getLayoutPlacements()[meshDim].isShardLike())
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
    if (!aten::isRearrangement(def) || getPhase(def) == "backward")
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
