//===- DataParallel.cpp - what the data-parallel modes share --------------===//

#include "spmd/Parallel/DataParallel.h"
#include "spmd/Propagate/Strategy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

using namespace mlir;
using namespace spmd;

std::optional<std::vector<layout::Placement>>
DataParallelConfig::overrideFor(StringRef fqn) const {
  for (const auto &[pattern, placements] : overrides)
    if (matchFqn(pattern, fqn))
      return placements;
  return std::nullopt;
}

std::optional<std::vector<layout::Placement>> DataParallelConfig::layoutOf(
    StringRef role, StringRef fqn, RankedTensorType type,
    ArrayRef<StringRef> shardedRoles, ArrayRef<StringRef> partialRoles) const {
  if (auto p = overrideFor(fqn))
    return p;
  if (llvm::is_contained(partialRoles, role))
    return std::vector<layout::Placement>{
        layout::Placement::partial(layout::ReduceKind::Sum)};
  if (llvm::is_contained(shardedRoles, role) && type.getRank() > 0)
    return std::vector<layout::Placement>{layout::Placement::shard(0)};
  return std::nullopt;
}

FailureOr<DataParallelConfig>
spmd::parseDataParallelConfig(ModuleOp module, const ParallelOptions &options,
                              StringRef mode, ArrayRef<StringRef> known) {
  SmallVector<StringRef> keys = {"placements", "bucket-cap-mb", "reduce-dtype"};
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

/// `v` with dim `dim` moved to the front (aten.permute; `v` itself for 0).
Value dimToFront(OpBuilder &b, Location loc, Value v, int64_t dim) {
  auto type = cast<RankedTensorType>(v.getType());
  if (dim == 0)
    return v;
  SmallVector<int64_t> perm = {dim}, shape = {type.getDimSize(dim)};
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d != dim) {
      perm.push_back(d);
      shape.push_back(type.getDimSize(d));
    }
  return aten::PermuteOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), v,
      b.getDenseI64ArrayAttr(perm));
}

/// The inverse of dimToFront: `v` (dim `dim` of `type` first) as `type`.
Value dimFromFront(OpBuilder &b, Location loc, Value v, int64_t dim,
                   RankedTensorType type) {
  if (dim == 0)
    return v;
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < type.getRank(); ++d)
    perm.push_back(d == dim ? 0 : d < dim ? d + 1 : d);
  return aten::PermuteOp::create(b, loc, type, v, b.getDenseI64ArrayAttr(perm));
}

/// The dim a collective gathers or scatters along (0 for an all_reduce).
int64_t collectiveDim(Operation *op) {
  if (auto g = dyn_cast<AllGatherOp>(op))
    return g.getGatherDim();
  if (auto r = dyn_cast<ReduceScatterOp>(op))
    return r.getScatterDim();
  return 0;
}

} // namespace

Operation *spmd::fuseCollectives(ArrayRef<Operation *> group, OpBuilder &b,
                                 StringRef reason) {
  Operation *first = group.front();
  Location loc = first->getLoc();
  auto elementType =
      cast<RankedTensorType>(first->getResult(0).getType()).getElementType();
  bool gather = isa<AllGatherOp>(first), scatter = isa<ReduceScatterOp>(first);
  // Per member: its data with the collective's dim first, as [c, rest...]
  // (the local piece's shape), and its element count k = c * prod(rest).
  // The flat operand concatenates the members' pieces: [K] for an
  // all_reduce and an all_gather (each rank its pieces), [R, K] for a
  // reduce_scatter (each destination rank's chunk of every member).
  SmallVector<Value> pieces;
  SmallVector<int64_t> counts;
  int64_t total = 0, ranks = 1;
  for (Operation *op : group) {
    int64_t dim = collectiveDim(op);
    Value front = dimToFront(b, loc, op->getOperand(0), dim);
    auto type = cast<RankedTensorType>(front.getType());
    auto result = cast<RankedTensorType>(op->getResult(0).getType());
    int64_t k = type.getNumElements();
    if (gather)
      ranks = result.getDimSize(dim) / type.getDimSize(0);
    if (scatter) {
      ranks = type.getDimSize(0) / result.getDimSize(dim);
      k /= ranks;
    }
    SmallVector<int64_t> shape =
        scatter ? SmallVector<int64_t>{ranks, k} : SmallVector<int64_t>{k};
    pieces.push_back(
        aten::ViewOp::create(b, loc, RankedTensorType::get(shape, elementType),
                             front, b.getDenseI64ArrayAttr(shape)));
    counts.push_back(k);
    total += k;
  }
  SmallVector<int64_t> catShape = scatter ? SmallVector<int64_t>{ranks, total}
                                          : SmallVector<int64_t>{total};
  Value cat =
      aten::CatOp::create(b, loc, RankedTensorType::get(catShape, elementType),
                          pieces, b.getI64IntegerAttr(scatter ? 1 : 0));
  auto flatType = [&](int64_t n) {
    return RankedTensorType::get({n}, elementType);
  };
  Operation *fused;
  if (auto g = dyn_cast<AllGatherOp>(first)) {
    fused = AllGatherOp::create(b, loc, flatType(ranks * total), cat,
                                g.getMeshAttr(), g.getMeshDimsAttr(),
                                b.getI64IntegerAttr(0));
  } else if (auto r = dyn_cast<ReduceScatterOp>(first)) {
    Value flat = aten::ViewOp::create(b, loc, flatType(ranks * total), cat,
                                      b.getDenseI64ArrayAttr({ranks * total}));
    fused = ReduceScatterOp::create(b, loc, flatType(total), flat,
                                    r.getMeshAttr(), r.getMeshDimsAttr(),
                                    b.getI64IntegerAttr(0), r.getReduceAttr());
  } else {
    auto a = cast<AllReduceOp>(first);
    fused = AllReduceOp::create(b, loc, flatType(total), cat, a.getMeshAttr(),
                                a.getMeshDimsAttr(), a.getReduceAttr());
  }
  fused->setAttr("spmd.reason", b.getStringAttr(reason));
  // Each member's result: its columns of [R, K] for an all_gather (rank r's
  // pieces are row r), its range of [K] otherwise.
  Value out = fused->getResult(0);
  SmallVector<Value> parts;
  if (gather) {
    Value rows = aten::ViewOp::create(
        b, loc, RankedTensorType::get({ranks, total}, elementType), out,
        b.getDenseI64ArrayAttr({ranks, total}));
    int64_t offset = 0;
    for (int64_t k : counts) {
      parts.push_back(aten::SliceTensorOp::create(
          b, loc, RankedTensorType::get({ranks, k}, elementType), rows,
          b.getI64IntegerAttr(1), b.getI64IntegerAttr(offset),
          b.getI64IntegerAttr(offset + k), b.getI64IntegerAttr(1)));
      offset += k;
    }
  } else {
    SmallVector<Type> types;
    for (int64_t k : counts)
      types.push_back(flatType(k));
    auto split = aten::SplitWithSizesOp::create(b, loc, types, out,
                                                b.getDenseI64ArrayAttr(counts),
                                                b.getI64IntegerAttr(0));
    llvm::append_range(parts, split.getResults());
  }
  for (auto [op, part] : llvm::zip(group, parts)) {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    if (type.getRank() == 0) {
      // A scalar's all_reduce (a 0-d parameter's gradient: a learned
      // temperature or gate): its one element back to 0-d.
      op->getResult(0).replaceAllUsesWith(
          aten::ViewOp::create(b, loc, type, part, b.getDenseI64ArrayAttr({})));
      continue;
    }
    int64_t dim = collectiveDim(op);
    // The result's shape with `dim` first.
    SmallVector<int64_t> front = {type.getDimSize(dim)};
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (d != dim)
        front.push_back(type.getDimSize(d));
    Value whole =
        aten::ViewOp::create(b, loc, RankedTensorType::get(front, elementType),
                             part, b.getDenseI64ArrayAttr(front));
    op->getResult(0).replaceAllUsesWith(dimFromFront(b, loc, whole, dim, type));
  }
  // Erased last: `b` may insert before a member.
  for (Operation *op : group)
    op->erase();
  return fused;
}

namespace {

/// Whether `r`, a collective of no phase, is the reduction of a gradient
/// that the step only returns, as the new value of a carried gradient
/// (role "grad": a call that accumulates and does not step).
bool reducesReturnedGradient(Operation *r) {
  auto fn = r->getParentOfType<func::FuncOp>();
  return getPhase(r).empty() && !r->use_empty() &&
         llvm::all_of(r->getUses(), [&](OpOperand &use) {
           if (!isa<func::ReturnOp>(use.getOwner()))
             return false;
           auto updates = fn.getResultAttrOfType<IntegerAttr>(
               use.getOperandNumber(), "spmd.updates");
           return updates && getArgRole(fn, updates.getInt()) == "grad";
         });
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

FailureOr<int64_t> spmd::parseBucketCapBytes(ModuleOp module,
                                             const ParallelOptions &options,
                                             StringRef mode, StringRef key,
                                             double defaultMb) {
  double mb = defaultMb;
  auto it = options.options.find(key.str());
  if (it != options.options.end() &&
      (StringRef(it->second).getAsDouble(mb) || mb < 0))
    return module.emitError()
           << mode << ": " << key << " must be a non-negative number, got '"
           << it->second << "'";
  return static_cast<int64_t>(mb * 1024 * 1024);
}

/// A gradient's reduction: of a value of backward that the update reads
/// (not the loss, which accumulated micro-steps also sum in backward), or
/// that the step returns (a gradient carried to the next call, reduced at
/// the return, which has no phase). The update may read it through mixed
/// precision's gradient cast.
static bool isGradientReduction(AllReduceOp r) {
  auto readByUpdate = [](Operation *user) {
    auto inUpdate = [](Operation *op) { return getPhase(op) == "optimizer"; };
    Operation *gradCast = getGradientCast(user);
    return inUpdate(user) ||
           (gradCast && llvm::any_of(gradCast->getUsers(), inUpdate));
  };
  Operation *def = r.getInput().getDefiningOp();
  return def && def->getBlock() == r->getBlock() &&
         getPhase(def) == "backward" &&
         (reducesReturnedGradient(r) ||
          llvm::any_of(r->getUsers(), readByUpdate));
}

LogicalResult spmd::bucketGradientAllReduces(ModuleOp module, StringRef mode,
                                             int64_t capBytes,
                                             int64_t firstCapBytes,
                                             bool compressBf16) {
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    // Gradient reductions in the order their gradients are computed.
    SmallVector<AllReduceOp> grads;
    fn.walk([&](AllReduceOp r) {
      if (isGradientReduction(r))
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
          bytes + tensorBytes(r.getInput().getType()) <=
              (buckets.size() == 1 && firstCapBytes > 0
                   ? std::min(capBytes, firstCapBytes)
                   : capBytes) &&
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
      AllReduceOp reduced = bucket.front();
      if (bucket.size() > 1) {
        // One flat all_reduce after the bucket's last gradient.
        int64_t bytes = 0;
        SmallVector<Operation *> ops;
        for (AllReduceOp r : bucket) {
          bytes += tensorBytes(r.getInput().getType());
          ops.push_back(r);
        }
        ProvenanceListener provenance(bucket.front());
        OpBuilder b(fn.getContext(), &provenance);
        b.setInsertionPointAfter(bucket.back().getInput().getDefiningOp());
        reduced = cast<AllReduceOp>(fuseCollectives(
            ops, b,
            mode.str() + " gradient bucket " + std::to_string(index++) + ": " +
                std::to_string(bucket.size()) + " gradients, " +
                std::to_string(bytes) + " bytes"));
      }
      auto element = cast<RankedTensorType>(reduced.getType()).getElementType();
      if (compressBf16 && (element.isF32() || element.isF64()))
        compressToBf16(reduced);
    }
  }
  return success();
}

void spmd::fuseIndependentAllReduces(ModuleOp module) {
  module.walk([](Block *block) {
    // Groups by origin, each with its last operand and the earliest use of
    // its results, found before any fusion (a fusion renumbers the block).
    // A member's uses follow it, and so every earlier member's operand:
    // it may join while its own operand precedes the group's first use.
    struct Group {
      SmallVector<Operation *> ops;
      Operation *lastDef = nullptr, *firstUse = nullptr;
    };
    using Key = std::tuple<Attribute, Attribute, Attribute, Attribute, Type>;
    llvm::MapVector<Key, SmallVector<Group>> open;
    for (auto r : block->getOps<AllReduceOp>()) {
      auto reason = r->getAttrOfType<StringAttr>("spmd.reason");
      // Gradients are the mode's to bucket (bucket-cap-mb); an
      // asynchronous one (a mode's own spmd.wait) keeps its schedule.
      if (!reason || isGradientReduction(r) || WaitOp::getCompletingWait(r))
        continue;
      Key key{reason, r.getMeshAttr(), r.getMeshDimsAttr(), r.getReduceAttr(),
              r.getType().getElementType()};
      Operation *def = r.getInput().getDefiningOp();
      if (def && def->getBlock() != block)
        def = nullptr;
      SmallVector<Group> &list = open[key];
      if (list.empty() || (def && list.back().firstUse &&
                           !def->isBeforeInBlock(list.back().firstUse)))
        list.emplace_back();
      Group &group = list.back();
      group.ops.push_back(r);
      if (def && (!group.lastDef || group.lastDef->isBeforeInBlock(def)))
        group.lastDef = def;
      for (Operation *user : r->getUsers()) {
        user = block->findAncestorOpInBlock(*user);
        if (user && (!group.firstUse || user->isBeforeInBlock(group.firstUse)))
          group.firstUse = user;
      }
    }
    for (auto &[key, list] : open)
      for (Group &group : list) {
        if (group.ops.size() < 2)
          continue;
        ProvenanceListener provenance(group.ops.front());
        OpBuilder b(block->getParent()->getContext(), &provenance);
        if (group.lastDef)
          b.setInsertionPointAfter(group.lastDef);
        else
          b.setInsertionPointToStart(block);
        fuseCollectives(group.ops, b,
                        (cast<StringAttr>(std::get<0>(key)).getValue() + ", " +
                         Twine(group.ops.size()) + " all_reduces fused")
                            .str());
      }
  });
}

/// Mixed precision's cast of `param` (spmd-capture --param-dtype): an
/// `aten._to_copy` of the parameter itself, or null.
static aten::ToCopyOp castOfParameter(Operation *op, Value param) {
  auto c = dyn_cast<aten::ToCopyOp>(op);
  return c && c.getSelf() == param ? c : nullptr;
}

LogicalResult
spmd::gatherShardedParameters(func::FuncOp fn, int64_t meshDim, StringRef mode,
                              function_ref<bool(StringRef)> keepGathered) {
  // Each gather, with the parameter and the dtype cast (or null) it gathers.
  DenseMap<Operation *, std::pair<BlockArgument, aten::ToCopyOp>> gathers;
  DenseSet<Operation *> kept;
  // A gather of `param` for `before`. Read through a dtype cast (mixed
  // precision), the cast is repeated on the shard right before it, so the
  // gather moves the narrow dtype (FSDP2 gathers in param_dtype) and no
  // cast copy lives longer than its gather.
  auto gather = [&](BlockArgument param, aten::ToCopyOp dtypeCast,
                    Operation *before) -> Value {
    auto layoutAttr =
        fn.getArgAttrOfType<LayoutAttr>(param.getArgNumber(), "spmd.layout");
    ProvenanceListener provenance(before);
    OpBuilder b(before, &provenance);
    Value source = param;
    if (dtypeCast)
      source = b.clone(*dtypeCast)->getResult(0);
    std::vector<layout::Placement> whole = layoutAttr.getLayoutPlacements();
    whole[meshDim] = layout::Placement::replicate();
    auto r = RedistributeOp::create(b, before->getLoc(), source.getType(),
                                    source, layoutAttr,
                                    getLayoutAttr(layoutAttr.getMesh(), whole));
    r->setAttr("spmd.reason",
               b.getStringAttr(mode + ": gather parameter '" +
                               getArgFqn(fn, param.getArgNumber()).str() +
                               "' for " + getPhase(before).str()));
    gathers[r] = {param, dtypeCast};
    return r.getResult();
  };
  SmallVector<Operation *> replacedCasts;
  auto computes = [](Operation *op) {
    StringRef phase = getPhase(op);
    return phase == "forward" || phase == "loss" || phase == "backward";
  };
  for (BlockArgument arg : fn.getArguments()) {
    auto layoutAttr =
        fn.getArgAttrOfType<LayoutAttr>(arg.getArgNumber(), "spmd.layout");
    if (getArgRole(fn, arg.getArgNumber()) != "param" || !layoutAttr ||
        !layoutAttr.getLayoutPlacements()[meshDim].isShardLike())
      continue;
    // The reads to gather, each with the dtype cast it is read through.
    SmallVector<std::pair<OpOperand *, aten::ToCopyOp>> uses;
    for (OpOperand &use : arg.getUses()) {
      if (!computes(use.getOwner()))
        continue;
      aten::ToCopyOp dtypeCast = castOfParameter(use.getOwner(), arg);
      if (!dtypeCast) {
        uses.push_back({&use, nullptr});
        continue;
      }
      replacedCasts.push_back(dtypeCast);
      for (OpOperand &read : dtypeCast.getResult().getUses())
        uses.push_back({&read, dtypeCast});
    }
    if (uses.empty())
      continue;
    if (keepGathered && keepGathered(getArgFqn(fn, arg.getArgNumber()))) {
      // Not resharded after forward: one gather (per dtype), before the
      // first use, serves every use through backward.
      DenseMap<Operation *, Value> wholes;
      for (auto [use, dtypeCast] : uses) {
        Value &whole = wholes[dtypeCast];
        if (whole)
          continue;
        Operation *first = use->getOwner();
        for (auto [other, otherCast] : uses)
          if (otherCast == dtypeCast &&
              other->getOwner()->isBeforeInBlock(first))
            first = other->getOwner();
        whole = gather(arg, dtypeCast, first);
        kept.insert(whole.getDefiningOp());
      }
      for (auto [use, dtypeCast] : uses)
        use->set(wholes[dtypeCast]);
      continue;
    }
    for (auto [use, dtypeCast] : uses)
      use->set(gather(arg, dtypeCast, use->getOwner()));
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
    if (auto it = gathers.find(def); it != gathers.end())
      return nested && !kept.contains(def)
                 ? gather(it->second.first, it->second.second, before)
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
  for (Operation *dtypeCast : replacedCasts)
    if (dtypeCast->use_empty())
      dtypeCast->erase();
  return success();
}

Operation *spmd::getGradientCast(Operation *op) {
  auto c = dyn_cast_or_null<aten::ToCopyOp>(op);
  return c && aten::isWideningFloatCast(
                  getElementTypeOrSelf(c.getSelf().getType()), c.getDtype())
             ? c.getOperation()
             : nullptr;
}

SmallVector<Value> spmd::findGradients(func::FuncOp fn) {
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
  return grads;
}

SmallVector<unsigned> spmd::argumentsUpdatedBy(func::FuncOp fn, Value grad) {
  SmallVector<unsigned> updated;
  SmallVector<Value> work = {grad};
  DenseSet<Value> seen = {grad};
  for (size_t next = 0; next < work.size(); ++next)
    for (OpOperand &use : work[next].getUses()) {
      Operation *user = use.getOwner();
      if (isa<func::ReturnOp>(user)) {
        if (auto updates = fn.getResultAttrOfType<IntegerAttr>(
                use.getOperandNumber(), "spmd.updates"))
          updated.push_back(updates.getInt());
        continue;
      }
      if (getPhase(user) == "optimizer")
        for (Value v : user->getResults())
          if (seen.insert(v).second)
            work.push_back(v);
    }
  return updated;
}

/// The parts `grad` sums: `grad` itself, or, through the aten.add ops
/// that sum it, the gradients of each micro-batch's backward (a loop of
/// backward()s) without the gradient an earlier call left (an argument of
/// role "grad": accumulation across calls).
static SmallVector<Value> gradientParts(func::FuncOp fn, Value grad) {
  auto carried = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == &fn.getBody().front() &&
           getArgRole(fn, arg.getArgNumber()) == "grad";
  };
  SmallVector<Value> parts, work = {grad};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    auto add = v.getDefiningOp<aten::AddTensorOp>();
    if (!add || getPhase(add) != "backward") {
      parts.push_back(v);
      continue;
    }
    for (Value operand : {add.getSelf(), add.getOther()})
      if (!carried(operand))
        work.push_back(operand);
  }
  return parts;
}

FailureOr<SmallVector<Operation *>>
spmd::applyReduceDtype(func::FuncOp fn, const ParallelOptions &options,
                       StringRef mode, std::optional<int64_t> constrainDim) {
  SmallVector<Operation *> before;
  auto it = options.options.find("reduce-dtype");
  Builder b(fn.getContext());
  Type reduce;
  if (it != options.options.end()) {
    reduce = llvm::StringSwitch<Type>(it->second)
                 .Case("bf16", b.getBF16Type())
                 .Case("f16", b.getF16Type())
                 .Case("f32", b.getF32Type())
                 .Case("f64", b.getF64Type())
                 .Default(nullptr);
    if (!reduce)
      return fn->getParentOfType<ModuleOp>().emitError()
             << mode << ": reduce-dtype must be bf16, f16, f32 "
             << "or f64, got '" << it->second << "'";
  }
  auto elementOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType();
  };
  SmallVector<std::pair<Value, Value>> parts; // (part, the gradient)
  for (Value total : findGradients(fn))
    for (Value part : gradientParts(fn, total))
      parts.push_back({part, total});
  // The reduce dtype applies to each backward's gradient as autograd casts
  // it back, before the sums of micro-batches and calls.
  for (auto [grad, total] : parts) {
    auto gradCast =
        cast_or_null<aten::ToCopyOp>(getGradientCast(grad.getDefiningOp()));
    if (!gradCast) {
      if (reduce && isa<FloatType>(elementOf(grad)) &&
          elementOf(grad) != reduce)
        return grad.getDefiningOp()->emitError()
               << mode << ": reduce-dtype " << reduce
               << " differs from the dtype " << elementOf(grad)
               << " the gradient is computed in; a "
               << "gradient reduces in another dtype only under mixed "
               << "precision (spmd-capture --param-dtype)";
      continue;
    }
    // Autograd casts every gradient back at the end of backward (the
    // parameters' casts ran first); right after the gradient, its reduction
    // joins its unit's and the narrow gradient is freed early.
    if (Operation *def = gradCast.getSelf().getDefiningOp();
        def && def->getBlock() == gradCast->getBlock())
      gradCast->moveAfter(def);
    Type narrow = elementOf(gradCast.getSelf()), wide = gradCast.getDtype();
    if (!reduce || reduce == narrow) {
      before.push_back(gradCast);
      continue;
    }
    if (reduce != wide)
      return gradCast.emitError()
             << mode << ": reduce-dtype " << reduce << " is neither the "
             << "gradient's computed dtype " << narrow
             << " nor its parameter's " << wide;
    if (!constrainDim)
      continue;
    OpBuilder at(gradCast->getContext());
    at.setInsertionPointAfter(gradCast);
    // The other mesh dims as the parameter's (a gradient and its
    // parameter share a shape).
    std::vector<layout::Placement> placements(options.meshShape.size(),
                                              layout::Placement::replicate());
    bool found = false;
    for (unsigned i : argumentsUpdatedBy(fn, total)) {
      auto layoutAttr = fn.getArgAttrOfType<LayoutAttr>(i, "spmd.layout");
      if (getArgRole(fn, i) == "param" && layoutAttr &&
          fn.getArgument(i).getType() == grad.getType()) {
        placements = layoutAttr.getLayoutPlacements();
        found = true;
        break;
      }
    }
    placements[*constrainDim] =
        layout::Placement::partial(layout::ReduceKind::Sum);
    SmallVector<int64_t> free;
    for (int64_t m = 0; m < static_cast<int64_t>(placements.size()); ++m)
      if (m != *constrainDim && !found)
        free.push_back(m);
    auto c = ShardingConstraintOp::create(
        at, gradCast.getLoc(), grad.getType(), grad,
        getLayoutAttr(FlatSymbolRefAttr::get(fn.getContext(), "mesh"),
                      placements),
        free.empty() ? DenseI64ArrayAttr() : at.getDenseI64ArrayAttr(free));
    copyProvenance(gradCast, c);
    c->setAttr("spmd.reason",
               at.getStringAttr(mode + ": gradient reduced in reduce-dtype " +
                                it->second));
    grad.replaceAllUsesExcept(c.getResult(), c);
  }
  return before;
}

/// The FQN of the module that holds parameter `fqn` ("" for the root).
static StringRef ownerModule(StringRef fqn) {
  auto [owner, name] = fqn.rsplit('.');
  return name.empty() ? StringRef() : owner;
}

std::string FsdpUnits::unitOf(StringRef module) const {
  SmallVector<StringRef> parts;
  if (!module.empty())
    module.split(parts, '.');
  if (patterns.empty()) {
    // The first element of a module list: `layers.0`, `h.3`, `block.1`.
    for (size_t i = 0; i < parts.size(); ++i)
      if (llvm::all_of(parts[i], llvm::isDigit))
        return llvm::join(ArrayRef<StringRef>(parts).take_front(i + 1), ".");
    return "";
  }
  // The deepest enclosing module a pattern names.
  for (size_t n = parts.size(); n > 0; --n) {
    std::string prefix =
        llvm::join(ArrayRef<StringRef>(parts).take_front(n), ".");
    if (llvm::any_of(patterns,
                     [&](const std::string &p) { return matchFqn(p, prefix); }))
      return prefix;
  }
  return "";
}

bool FsdpUnits::keepsGathered(StringRef param) const {
  if (!reshardAfterForward)
    return true;
  return !perParameter && unitOf(ownerModule(param)).empty();
}

FailureOr<FsdpUnits> spmd::parseFsdpUnits(ModuleOp module,
                                          const ParallelOptions &options,
                                          int64_t meshDim, StringRef mode) {
  FsdpUnits units;
  auto reshard = options.options.find("reshard-after-forward");
  if (reshard != options.options.end()) {
    // FSDP2's int form: 1 is false, the whole dim is true.
    int64_t size = options.meshShape[meshDim], n = 0;
    StringRef value = reshard->second;
    if (value == "true" || value == "false")
      units.reshardAfterForward = value == "true";
    else if (!value.getAsInteger(10, n) && n >= 1 && size % n == 0)
      units.reshardAfterForward = n > 1;
    else
      return module.emitError()
             << mode
             << ": reshard-after-forward must be true, false or a group "
                "size that divides "
             << size << " (the size of mesh dim " << meshDim << "), got '"
             << value << "'";
    if (n > 1 && n < size)
      units.postForwardGroup = n;
  }
  if (auto carried = options.options.find("carried-grads");
      carried != options.options.end()) {
    if (carried->second != "sharded" && carried->second != "unsharded")
      return module.emitError()
             << mode << ": carried-grads must be sharded or unsharded, got '"
             << carried->second << "'";
    units.unshardedCarriedGrads = carried->second == "unsharded";
  }
  auto it = options.options.find("units");
  if (it == options.options.end() || it->second == "auto")
    return units;
  if (it->second == "none") {
    units.perParameter = true;
    return units;
  }
  SmallVector<StringRef> patterns;
  StringRef(it->second).split(patterns, ',', -1, false);
  for (StringRef p : patterns) {
    if (p.trim().empty())
      return module.emitError()
             << mode << ": units '" << it->second << "' has an empty pattern";
    units.patterns.push_back(p.trim().str());
  }
  return units;
}

/// The module whose backward computed a gradient `def` produces: its own,
/// or, for the root's ops that only combine gradients (gradient
/// accumulation's sum of the micro-steps'), the first module found among
/// the backward ops it combines.
static StringRef gradientModule(Operation *def) {
  for (int depth = 0; depth < 8 && def; ++depth) {
    if (!getModuleFqn(def).empty() || getPhase(def) == "optimizer")
      return getModuleFqn(def);
    Operation *next = nullptr;
    for (Value operand : def->getOperands())
      if (Operation *d = operand.getDefiningOp();
          d && getPhase(d) == "backward" && !next)
        next = d;
    def = next;
  }
  return "";
}

/// The `spmd.reason` of a unit's fused collective: "<mode>: unit 'U': <verb>
/// N <what>, B bytes", B the members' bytes (results of a gather, operands
/// of a reduce_scatter: the full tensors either way).
static std::string unitReason(StringRef mode, StringRef unit,
                              ArrayRef<Operation *> group, StringRef verb,
                              StringRef what) {
  int64_t bytes = 0;
  for (Operation *op : group)
    bytes += tensorBytes(isa<AllGatherOp>(op) ? op->getResult(0).getType()
                                              : op->getOperand(0).getType());
  return (mode + ": unit " + (unit.empty() ? "(root)" : "'" + unit + "'") +
          ": " + verb + " " + std::to_string(group.size()) + " " + what + ", " +
          std::to_string(bytes) + " bytes")
      .str();
}

namespace {

/// The gather of `param` in `group`, or null.
Operation *findGatherOf(ArrayRef<Operation *> group, Value param) {
  for (Operation *g : group)
    if (getCastArgument(g->getOperand(0)) == param)
      return g;
  return nullptr;
}

/// Whether every forward or backward op from `from` to `to` (same block)
/// belongs to `unit` or to the root: the two are in one pass of `unit`.
bool onlyUnitOpsBetween(Operation *from, Operation *to, StringRef unit,
                        const FsdpUnits &units) {
  for (Operation *op = from->getNextNode(); op && op != to;
       op = op->getNextNode()) {
    StringRef phase = getPhase(op);
    if (phase != "forward" && phase != "backward")
      continue;
    std::string other = units.unitOf(getModuleFqn(op));
    if (!other.empty() && other != unit)
      return false;
  }
  return true;
}

/// FSDP2's post-forward mesh for reshard-after-forward=N (the program's
/// mesh with mesh dim `meshDim` split into (D / N, N)), and each rank's
/// position in its group of N on it, by rank.
struct PostForwardMesh {
  FlatSymbolRefAttr view;
  int64_t meshDim, n;
  SmallVector<int64_t> positions;
};

PostForwardMesh createPostForwardMesh(ModuleOp module, int64_t meshDim,
                                      int64_t n) {
  MeshOp mesh = *module.getOps<MeshOp>().begin();
  SmallVector<int64_t> shape;
  SmallVector<Attribute> names;
  Builder b(module.getContext());
  for (auto [d, size] : llvm::enumerate(mesh.getShape())) {
    StringRef name = cast<StringAttr>(mesh.getNames()[d]).getValue();
    if (static_cast<int64_t>(d) != meshDim) {
      shape.push_back(size);
      names.push_back(b.getStringAttr(name));
      continue;
    }
    shape.append({size / n, n});
    names.append({b.getStringAttr(name + "_replicate"),
                  b.getStringAttr(name + "_shard")});
  }
  OpBuilder after(mesh);
  after.setInsertionPointAfter(mesh);
  auto view = MeshOp::create(after, mesh.getLoc(), "post_forward",
                             after.getDenseI64ArrayAttr(shape),
                             after.getArrayAttr(names));
  SymbolTable(module).insert(view);
  PostForwardMesh result{
      FlatSymbolRefAttr::get(view.getSymNameAttr()), meshDim, n, {}};
  std::vector<int64_t> program(mesh.getShape().begin(), mesh.getShape().end());
  for (int64_t r = 0, ranks = mesh.getNumRanks(); r < ranks; ++r)
    result.positions.push_back(layout::rankToCoords(r, program)[meshDim] % n);
  return result;
}

/// Whether backward's gather `g` gives what forward's gather `f` gave: the
/// same parameter (the caller's match), shapes, dtype and gathered dim.
bool repeatsForwardGather(AllGatherOp f, AllGatherOp g) {
  return g.getType() == f.getType() &&
         g.getInput().getType() == f.getInput().getType() &&
         g.getGatherDim() == f.getGatherDim();
}

/// Backward's gather `g` of a parameter that forward gathered with `f`
/// (repeatsForwardGather), under reshard-after-forward=N: this rank keeps
/// its 1/N of `f`'s result from forward (spmd.local_take right after `f`,
/// one per `f`, in `kept`) and gathers the N parts over its group
/// (`post`'s split dim), giving `g`'s padded result. Returns the new
/// gather.
Operation *gatherPostForward(AllGatherOp f, AllGatherOp g,
                             const PostForwardMesh &post,
                             DenseMap<Operation *, Value> &kept) {
  auto type = cast<RankedTensorType>(f.getType());
  int64_t dim = f.getGatherDim();
  int64_t part = type.getDimSize(dim) / post.n;
  Value &piece = kept[f];
  if (!piece) {
    SmallVector<int64_t> starts, counts(post.positions.size(), part);
    for (int64_t position : post.positions)
      starts.push_back(position * part);
    SmallVector<int64_t> partShape(type.getShape());
    partShape[dim] = part;
    ProvenanceListener provenance(f);
    OpBuilder b(f->getContext(), &provenance);
    b.setInsertionPointAfter(f);
    piece = LocalTakeOp::create(
        b, f.getLoc(), type.clone(partShape), f.getResult(), f.getMeshAttr(),
        b.getI64IntegerAttr(dim), nullptr, b.getDenseI64ArrayAttr(starts),
        b.getDenseI64ArrayAttr(counts), /*uniform=*/UnitAttr(),
        b.getF64FloatAttr(0.0));
  }
  OpBuilder b(g);
  auto gathered = AllGatherOp::create(
      b, g.getLoc(), type, piece, post.view,
      b.getDenseI64ArrayAttr({post.meshDim + 1}), b.getI64IntegerAttr(dim));
  for (NamedAttribute attr : g->getDiscardableAttrs())
    gathered->setAttr(attr.getName(), attr.getValue());
  g.replaceAllUsesWith(gathered.getResult());
  Operation *dtypeCast = g.getInput().getDefiningOp();
  g.erase();
  if (dtypeCast && dtypeCast->use_empty())
    dtypeCast->erase();
  return gathered;
}

/// Moves the concatenation that feeds `gather`, a unit's fused backward
/// gather of the parts kept from forward (gatherPostForward), up to right
/// after the last part is taken, with that part's provenance: the parts
/// die there, so that backward does not hold them and their concatenation
/// at once (FSDP2 keeps the post-forward shards in the gather's input).
void concatenatePartsInForward(Operation *gather) {
  SmallVector<Operation *> chain, work = {gather};
  Operation *last = nullptr;
  while (!work.empty())
    for (Value operand : work.pop_back_val()->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (isa_and_nonnull<LocalTakeOp>(def)) {
        if (!last || last->isBeforeInBlock(def))
          last = def;
      } else if (def && !llvm::is_contained(chain, def)) {
        chain.push_back(def);
        work.push_back(def);
      }
    }
  if (!last)
    return;
  llvm::sort(chain,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  Operation *part = last;
  for (Operation *op : chain) {
    op->moveAfter(last);
    copyProvenance(part, op);
    last = op;
  }
}

} // namespace

LogicalResult spmd::fuseUnitCollectives(ModuleOp module,
                                        const ParallelOptions &options,
                                        int64_t meshDim, StringRef mode) {
  FailureOr<FsdpUnits> parsed = parseFsdpUnits(module, options, meshDim, mode);
  if (failed(parsed))
    return failure();
  const FsdpUnits &units = *parsed;
  if (units.perParameter && units.postForwardGroup == 0)
    return success();
  auto onDim = [&](ArrayRef<int64_t> dims) {
    return dims.size() == 1 && dims[0] == meshDim;
  };
  std::optional<PostForwardMesh> postForward;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    // Parameter gathers by (unit, phase, element type), in program order:
    // each group's one all_gather goes before the first use of any of its
    // results (its operands are arguments). A parameter gathered again
    // (the next micro-step of gradient accumulation, a second use) starts
    // the unit's next group: what was resharded stays so until then.
    // (Types are keyed by their uniqued pointer.)
    // A parameter gathered again while only its own unit's ops ran since
    // the group's gather (a recomputed forward op and the backward op that
    // read it, --spmd-remat) reads that gather instead.
    std::map<std::tuple<std::string, std::string, const void *>,
             SmallVector<SmallVector<Operation *>>>
        gathers;
    SmallVector<std::pair<Operation *, Operation *>> repeats;
    // With reshard-after-forward=N: the forward gather that each backward
    // gather repeats (the last one of its parameter and dtype before it).
    DenseMap<std::pair<Value, const void *>, Operation *> lastForward;
    DenseMap<Operation *, Operation *> forwardOf;
    fn.walk([&](AllGatherOp g) {
      BlockArgument arg = getCastArgument(g.getInput());
      if (!arg || arg.getOwner() != &fn.getBody().front() ||
          !onDim(g.getMeshDims()) ||
          getArgRole(fn, arg.getArgNumber()) != "param")
        return;
      StringRef fqn = getArgFqn(fn, arg.getArgNumber());
      std::string unit = units.unitOf(ownerModule(fqn));
      StringRef phase = getPhase(g);
      const void *element = g.getType().getElementType().getAsOpaquePointer();
      auto &groups = gathers[{unit, phase.str(), element}];
      Operation *earlier =
          groups.empty() ? nullptr : findGatherOf(groups.back(), arg);
      bool repeat = earlier && !unit.empty() && !units.perParameter &&
                    onlyUnitOpsBetween(earlier, g, unit, units);
      if (phase == "forward" || phase == "loss")
        lastForward[{arg, element}] = repeat ? earlier : g.getOperation();
      else if (phase == "backward" && !repeat)
        if (Operation *f = lastForward.lookup({arg, element}))
          forwardOf[g] = f;
      if (repeat) {
        repeats.push_back({g, earlier});
        return;
      }
      if (groups.empty() || earlier)
        groups.push_back({});
      groups.back().push_back(g);
    });
    for (auto [repeat, earlier] : repeats) {
      repeat->replaceAllUsesWith(earlier);
      Operation *dtypeCast = repeat->getOperand(0).getDefiningOp();
      repeat->erase();
      if (dtypeCast && dtypeCast->use_empty())
        dtypeCast->erase();
    }
    DenseMap<Operation *, Value> kept;
    if (units.postForwardGroup > 1)
      for (auto &[key, groups] : gathers)
        for (auto &group : groups) {
          // The whole group or none of it: its fused gather runs on one
          // mesh. (Forward's groups have no forward gather to repeat.)
          if (!llvm::all_of(group, [&](Operation *g) {
                Operation *f = forwardOf.lookup(g);
                return f && repeatsForwardGather(cast<AllGatherOp>(f),
                                                 cast<AllGatherOp>(g));
              }))
            continue;
          if (!postForward)
            postForward =
                createPostForwardMesh(module, meshDim, units.postForwardGroup);
          for (Operation *&g : group)
            g = gatherPostForward(cast<AllGatherOp>(forwardOf.lookup(g)),
                                  cast<AllGatherOp>(g), *postForward, kept);
        }
    if (units.perParameter)
      continue;
    // Each group's first use and the member dtype casts (of an argument)
    // that come after it, found before any fusion: a fusion changes the
    // block, whose order each later query would recompute (quadratic in
    // the step's size). A fusion leaves the other groups' ops in place.
    struct GatherFusion {
      ArrayRef<Operation *> group;
      Operation *firstUse;
      SmallVector<Operation *> lateCasts;
      std::string reason;
    };
    SmallVector<GatherFusion> fusions;
    for (auto &[key, groups] : gathers)
      for (auto &group : groups) {
        if (group.size() < 2)
          continue;
        Operation *firstUse = nullptr;
        for (Operation *g : group)
          for (Operation *user : g->getUsers())
            if (!firstUse || user->isBeforeInBlock(firstUse))
              firstUse = user;
        if (!firstUse)
          continue;
        const auto &[unit, phase, element] = key;
        GatherFusion &fusion = fusions.emplace_back(
            GatherFusion{group,
                         firstUse,
                         {},
                         unitReason(mode, unit, group, "gather",
                                    "parameters for " + phase)});
        for (Operation *g : group)
          if (Operation *dtypeCast = g->getOperand(0).getDefiningOp();
              dtypeCast && !dtypeCast->isBeforeInBlock(firstUse))
            fusion.lateCasts.push_back(dtypeCast);
      }
    for (GatherFusion &fusion : fusions) {
      // A late cast moves up to the fused gather.
      for (Operation *dtypeCast : fusion.lateCasts)
        dtypeCast->moveBefore(fusion.firstUse);
      ProvenanceListener provenance(fusion.group.front());
      OpBuilder b(fusion.firstUse, &provenance);
      Operation *fused = fuseCollectives(fusion.group, b, fusion.reason);
      if (postForward &&
          cast<AllGatherOp>(fused).getMeshAttr() == postForward->view)
        concatenatePartsInForward(fused);
    }

    // Gradient reduce_scatters (of a value backward computed) by (unit of
    // the module whose backward computed it, reduction, element type; not
    // where the reduce_scatter sits, e.g. at gradient clipping), in the order
    // the gradients are computed; as DDP's buckets, a group goes after its
    // last gradient and grows while every result it gives is used after
    // that. The view ops that rearrange a result (a weight gradient's
    // transpose) move down with the group, so they do not count as uses.
    struct Bucket {
      SmallVector<Operation *> ops;
      // The rearrangements of the results (transitively), and the first
      // other use of any result.
      SmallVector<Operation *> moved;
      Operation *firstUse = nullptr;
    };
    std::map<std::tuple<std::string, int64_t, const void *>,
             SmallVector<Bucket>>
        scatters;
    SmallVector<ReduceScatterOp> grads;
    fn.walk([&](ReduceScatterOp r) {
      Operation *def = r.getInput().getDefiningOp();
      auto late = [](StringRef p) {
        return p == "backward" || p == "optimizer";
      };
      // A gradient that is only returned (a call that accumulates and does
      // not step) is reduced at the return, which has no phase.
      if (def && def->getBlock() == r->getBlock() && onDim(r.getMeshDims()) &&
          late(getPhase(def)) &&
          (late(getPhase(r)) || reducesReturnedGradient(r)))
        grads.push_back(r);
    });
    // A reduce_scatter sits at its first consumer (the update), its input's
    // reordering (a local_take for a strided shard or an uneven pad) with
    // it: both move up to the gradient of backward they read and take its
    // module and phase, so that the gradient joins its unit's group.
    for (ReduceScatterOp r : grads) {
      SmallVector<Operation *> chain;
      Operation *def = r.getInput().getDefiningOp();
      while (isa<LocalTakeOp>(def) && getPhase(def) == "optimizer" &&
             def->getOperand(0).getDefiningOp() &&
             def->getOperand(0).getDefiningOp()->getBlock() ==
                 def->getBlock()) {
        chain.push_back(def);
        def = def->getOperand(0).getDefiningOp();
      }
      if (chain.empty() || getPhase(def) != "backward")
        continue;
      Operation *after = def;
      for (Operation *op : llvm::reverse(chain)) {
        op->moveAfter(after);
        copyProvenance(def, op);
        after = op;
      }
      r->moveAfter(after);
      copyProvenance(def, r);
    }
    llvm::stable_sort(grads, [](ReduceScatterOp a, ReduceScatterOp b) {
      return a.getInput().getDefiningOp()->isBeforeInBlock(
          b.getInput().getDefiningOp());
    });
    for (ReduceScatterOp r : grads) {
      Operation *def = r.getInput().getDefiningOp();
      auto &buckets =
          scatters[{units.unitOf(gradientModule(def)),
                    static_cast<int64_t>(r.getReduce()),
                    r.getType().getElementType().getAsOpaquePointer()}];
      if (buckets.empty() || (buckets.back().firstUse &&
                              !def->isBeforeInBlock(buckets.back().firstUse)))
        buckets.emplace_back();
      Bucket &bucket = buckets.back();
      bucket.ops.push_back(r);
      // Rearrangements and casts of a result (mixed precision's gradient
      // cast back) follow the group down, as does the add of a result into
      // a carried gradient (an argument: AccumulateGrad's, right after the
      // gradient).
      auto followsDown = [&](Operation *user, Operation *from) {
        if (getPhase(user) != "backward")
          return false;
        if (aten::isRearrangement(user) || isa<aten::ToCopyOp>(user))
          return user->getNumOperands() == 1;
        return isa<aten::AddTensorOp>(user) &&
               llvm::all_of(user->getOperands(), [&](Value v) {
                 return v.getDefiningOp() == from || isa<BlockArgument>(v);
               });
      };
      SmallVector<Operation *> work = {r};
      while (!work.empty()) {
        Operation *from = work.pop_back_val();
        for (Operation *user : from->getUsers()) {
          if (followsDown(user, from)) {
            bucket.moved.push_back(user);
            work.push_back(user);
          } else if (!bucket.firstUse ||
                     user->isBeforeInBlock(bucket.firstUse)) {
            bucket.firstUse = user;
          }
        }
      }
    }
    // Each bucket's rearrangements in program order, sorted before any
    // moves: a move invalidates the block's order, which each sort would
    // then recompute (quadratic in the step's size).
    for (auto &[key, buckets] : scatters)
      for (Bucket &bucket : buckets)
        llvm::sort(bucket.moved, [](Operation *a, Operation *b) {
          return a->isBeforeInBlock(b);
        });
    for (auto &[key, buckets] : scatters)
      for (Bucket &bucket : buckets) {
        if (bucket.ops.size() < 2)
          continue;
        // The rearrangements of the results go right after the last
        // gradient, in their order, and the fused collective before them.
        Operation *last = bucket.ops.back()->getOperand(0).getDefiningOp();
        for (Operation *op : llvm::reverse(bucket.moved))
          op->moveAfter(last);
        // Built where the last gradient is: its module and phase.
        ProvenanceListener provenance(last);
        OpBuilder b(fn.getContext(), &provenance);
        b.setInsertionPointAfter(last);
        fuseCollectives(bucket.ops, b,
                        unitReason(mode, std::get<0>(key), bucket.ops,
                                   "reduce_scatter", "gradients"));
      }
  }
  return success();
}
