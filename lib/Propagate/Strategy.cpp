//===- Strategy.cpp - op strategies on a device mesh, and their cost ------===//

#include "spmd/Propagate/Strategy.h"
#include "spmd/Dialect/Aten/Aten.h"

#include "mlir/IR/TypeUtilities.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace spmd;
using layout::Placement;

Placements spmd::replicated(size_t meshRank) {
  return Placements(meshRank, Placement::replicate());
}

Placements spmd::placementsOf(DictionaryAttr attrs, size_t meshRank) {
  if (attrs)
    if (auto layout = attrs.getAs<LayoutAttr>("spmd.layout"))
      return layout.getLayoutPlacements();
  return replicated(meshRank);
}

/// Each of `count` attribute dictionaries from `get(i)` with `spmd.layout`
/// set to `layouts[i]` where non-null.
template <typename GetFn>
static SmallVector<DictionaryAttr>
withLayouts(MLIRContext *ctx, ArrayRef<Attribute> layouts, GetFn get) {
  SmallVector<DictionaryAttr> out;
  for (auto [i, layout] : llvm::enumerate(layouts)) {
    NamedAttrList attrs(get(i));
    if (layout)
      attrs.set("spmd.layout", layout);
    out.push_back(attrs.getDictionary(ctx));
  }
  return out;
}

void spmd::setArgLayouts(FunctionOpInterface fn, ArrayRef<Attribute> layouts) {
  fn.setAllArgAttrs(withLayouts(fn.getContext(), layouts, [&](unsigned i) {
    return fn.getArgAttrDict(i);
  }));
}

void spmd::setResultLayouts(FunctionOpInterface fn,
                            ArrayRef<Attribute> layouts) {
  fn.setAllResultAttrs(withLayouts(fn.getContext(), layouts, [&](unsigned i) {
    return fn.getResultAttrDict(i);
  }));
}

std::vector<int64_t> spmd::shapeOf(Type type) {
  auto ranked = cast<RankedTensorType>(type);
  return {ranked.getShape().begin(), ranked.getShape().end()};
}

/// The product of the sizes of the mesh dims that shard tensor dim `d`
/// divides the dim's size.
static bool shardsEvenly(const std::vector<int64_t> &shape,
                         const Placements &placements,
                         ArrayRef<int64_t> meshShape) {
  for (size_t d = 0; d < shape.size(); ++d) {
    // A StridedShard's pieces split each of its chunks.
    int64_t ways = 1, chunks = 1;
    for (size_t m = 0; m < placements.size(); ++m)
      if (placements[m].isShardLike() &&
          placements[m].dim == static_cast<int64_t>(d)) {
        ways *= meshShape[m];
        if (placements[m].kind == Placement::Kind::StridedShard)
          chunks = std::max(chunks, placements[m].splitFactor);
      }
    if (shape[d] % (ways * chunks) != 0)
      return false;
  }
  return true;
}

void spmd::addSplitFactor(const Placement &p, Type type,
                          SmallVectorImpl<SplitFactor> &out) {
  if (p.kind != Placement::Kind::StridedShard || p.splitFactor <= 1)
    return;
  SplitFactor f{cast<RankedTensorType>(type).getDimSize(p.dim), p.splitFactor};
  if (!llvm::is_contained(out, f))
    out.push_back(f);
}

/// Nests the atom shards of one operand's or result's `placements` (one per
/// mesh dim, each from a 1-D strategy; `divides` the atom size of each, 0
/// where the strategy shards no atom). A view's 1-D strategy names an atom
/// by its global position: StridedShard(d, P) with P the product of the
/// atoms before it (Shard(d) for P = 1). Mesh dims nest left to right on the
/// already-local size (DESIGN.md 2), so a later mesh dim's P shrinks by the
/// size of every earlier mesh dim that shards an atom before it: dp on the
/// batch and tp on the heads of attention's [T, B*H, hd] is
/// [Shard(1), StridedShard(1, B/dp)]. Mesh dims sharding the same atom must
/// together divide it. Returns false when they do not.
static bool nestAtoms(Placements &placements, ArrayRef<int64_t> divides,
                      ArrayRef<int64_t> mesh) {
  auto prefix = [](const Placement &p) {
    return p.kind == Placement::Kind::StridedShard ? p.splitFactor : 1;
  };
  Placements global = placements;
  for (size_t m = 0; m < global.size(); ++m) {
    if (!global[m].isShardLike())
      continue;
    int64_t local = prefix(global[m]), sameAtom = 1;
    for (size_t e = 0; e < global.size(); ++e) {
      if (e == m || !global[e].isShardLike() || global[e].dim != global[m].dim)
        continue;
      if (prefix(global[e]) == prefix(global[m]))
        sameAtom *= mesh[e];
      else if (e < m && prefix(global[e]) < prefix(global[m]))
        local /= mesh[e];
    }
    if (divides[m] > 0 && divides[m] % (sameAtom * mesh[m]) != 0)
      return false;
    placements[m] = local == 1 ? Placement::shard(global[m].dim)
                               : Placement::stridedShard(global[m].dim, local);
  }
  return true;
}

/// Whether a tensor of `type` can hold placement `p`: ranks' integers have
/// no exact average, and the collectives reduce bools by max and min only
/// (rules that pass a Partial of every kind through, such as views and
/// gathers, offer the others on any element type).
static bool placementFits(const Placement &p, Type type) {
  if (p.kind != Placement::Kind::Partial)
    return true;
  Type elem = cast<RankedTensorType>(type).getElementType();
  if (elem.isInteger(1))
    return p.reduce == layout::ReduceKind::Max ||
           p.reduce == layout::ReduceKind::Min;
  return !isa<IntegerType>(elem) || p.reduce != layout::ReduceKind::Avg;
}

FailureOr<std::vector<MeshStrategy>>
spmd::enumerateStrategies(Operation *op, ArrayRef<int64_t> meshShape,
                          ArrayRef<SplitFactor> splitFactors,
                          ArrayRef<int64_t> packedFactors) {
  std::vector<MeshStrategy> out;
  if (failed(forEachStrategy(op, meshShape, splitFactors, packedFactors,
                             [&](const MeshStrategy &s) { out.push_back(s); })))
    return failure();
  return out;
}

LogicalResult
spmd::forEachStrategy(Operation *op, ArrayRef<int64_t> meshShape,
                      ArrayRef<SplitFactor> splitFactors,
                      ArrayRef<int64_t> packedFactors,
                      function_ref<void(const MeshStrategy &)> fn) {
  std::optional<layout::EinsumRule> rule;
  auto constraint = dyn_cast<ShardingConstraintOp>(op);
  if (constraint)
    rule = layout::EinsumRule::identity(
        cast<RankedTensorType>(op->getResult(0).getType()).getRank());
  else if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op)) {
    rule = ruleOp.getShardingRule();
  }
  if (!rule)
    return failure();
  std::vector<layout::OpStrategy> oneDim = rule->strategies();
  llvm::erase_if(oneDim, [&](const layout::OpStrategy &one) {
    auto fits = [](const std::vector<Placement> &list, TypeRange types) {
      for (auto [p, t] : llvm::zip(list, types))
        if (!placementFits(p, t))
          return false;
      return true;
    };
    return !fits(one.operands, op->getOperandTypes()) ||
           !fits(one.results, op->getResultTypes());
  });
  const size_t base = oneDim.size();
  // An embedding's table rows stay in contiguous shards: its masked lookup
  // (and the gradient's) takes a range of rows. Its other dims twin.
  auto rowsSharded = [&](const layout::OpStrategy &one) {
    if (isa<aten::EmbeddingOp>(op))
      return one.operands[0].isShardLike() && one.operands[0].dim == 0;
    if (isa<aten::EmbeddingDenseBackwardOp>(op))
      return one.results[0].isShardLike() && one.results[0].dim == 0;
    return false;
  };
  for (auto [size, factor] : splitFactors)
    for (size_t i = 0; i < base; ++i) {
      if (rowsSharded(oneDim[i]))
        continue;
      layout::OpStrategy twin = oneDim[i];
      auto hasKind = [&](Placement::Kind kind) {
        auto is = [&](const Placement &p) { return p.kind == kind; };
        return llvm::any_of(twin.operands, is) ||
               llvm::any_of(twin.results, is);
      };
      if (!hasKind(Placement::Kind::Shard) ||
          hasKind(Placement::Kind::StridedShard))
        continue;
      // Only where every shard falls on a dim of the StridedShard's size;
      // a view that merges or splits the sharded dim with others
      // (evenShards) only for a packed parameter's factor and where its
      // result's chunks hold whole outer atoms: the merged [a*b] of a
      // StridedShard(0, f) [a] is StridedShard(0, f), and so is the split
      // [a, b] of one on [a*b] when f divides a (a fused gate|up
      // projection's gradient flattened per expert).
      auto dims = [&](const std::vector<Placement> &list, ValueRange values,
                      llvm::function_ref<bool(int64_t)> pred) {
        for (auto [p, v] : llvm::zip(list, values))
          if (p.kind == Placement::Kind::Shard &&
              !pred(cast<RankedTensorType>(v.getType()).getDimSize(p.dim)))
            return false;
        return true;
      };
      auto onSize = [size = size](int64_t dim) { return dim == size; };
      auto wholeAtoms = [size = size, factor = factor](int64_t dim) {
        return dim != size &&
               (dim % size == 0 ||
                (size % dim == 0 && dim % factor == 0 && dim > factor));
      };
      auto sharded = [](const std::vector<Placement> &list) {
        return llvm::any_of(list, [](const Placement &p) {
          return p.kind == Placement::Kind::Shard;
        });
      };
      if (!dims(twin.operands, op->getOperands(), onSize) ||
          !(twin.evenShards
                ? llvm::is_contained(packedFactors, factor) &&
                      sharded(twin.results) &&
                      dims(twin.results, op->getResults(), wholeAtoms)
                : dims(twin.results, op->getResults(), onSize)))
        continue;
      for (auto *list : {&twin.operands, &twin.results})
        for (Placement &p : *list)
          if (p.kind == Placement::Kind::Shard)
            p = Placement::stridedShard(p.dim, factor);
      oneDim.push_back(twin);
    }
  std::vector<int64_t> mesh(meshShape.begin(), meshShape.end());

  std::vector<std::vector<int64_t>> operandShapes, resultShapes;
  for (Value v : op->getOperands())
    operandShapes.push_back(shapeOf(v.getType()));
  for (Value v : op->getResults())
    resultShapes.push_back(shapeOf(v.getType()));

  // The shapes and the mesh are checked once; each combination's
  // placements then.
  bool shapesFit = true;
  for (const auto *shapes : {&operandShapes, &resultShapes})
    for (const std::vector<int64_t> &shape : *shapes)
      shapesFit =
          shapesFit &&
          layout::validate(shape, mesh, replicated(mesh.size())).empty();
  // A constraint keeps the strategies that give the pinned placement on
  // each of its fixed mesh dims.
  Placements pinned;
  if (constraint)
    pinned = constraint.getLayout().getLayoutPlacements();
  auto violates = [&](const MeshStrategy &s) {
    for (size_t m = 0; m < meshShape.size(); ++m)
      if (!constraint.isFree(m) && s.results[0][m] != pinned[m])
        return true;
    return false;
  };
  size_t given = 0;
  // One strategy's buffers serve every combination; the valid ones are
  // passed on.
  MeshStrategy s;
  s.operands.assign(operandShapes.size(), Placements(mesh.size()));
  s.results.assign(resultShapes.size(), Placements(mesh.size()));
  std::vector<int64_t> divides(mesh.size(), 0);
  auto consider = [&](ArrayRef<size_t> pick) {
    bool even = false, ok = true;
    for (size_t m = 0; m < mesh.size(); ++m) {
      const layout::OpStrategy &one = oneDim[pick[m]];
      even |= one.evenShards;
      divides[m] = one.divides;
      for (size_t i = 0; i < operandShapes.size(); ++i)
        s.operands[i][m] = one.operands[i];
      for (size_t i = 0; i < resultShapes.size(); ++i)
        s.results[i][m] = one.results[i];
    }
    if (llvm::any_of(divides, [](int64_t d) { return d > 0; }))
      for (auto *list : {&s.operands, &s.results})
        for (Placements &p : *list)
          ok = ok && nestAtoms(p, divides, mesh);
    auto check = [&](const std::vector<int64_t> &shape, const Placements &p) {
      ok = ok && shapesFit &&
           layout::validatePlacements(shape.size(), mesh.size(), p).empty() &&
           (!even || shardsEvenly(shape, p, mesh));
    };
    for (size_t i = 0; i < operandShapes.size(); ++i)
      check(operandShapes[i], s.operands[i]);
    for (size_t i = 0; i < resultShapes.size(); ++i)
      check(resultShapes[i], s.results[i]);
    if (ok && !(constraint && violates(s))) {
      fn(s);
      ++given;
    }
  };
  // Combinations of the rule's own strategies come first and keep their
  // numbering whatever twins follow (spmd.strategy refers to it).
  SmallVector<size_t, 4> pick(mesh.size());
  for (size_t radix : {base, oneDim.size()}) {
    size_t total = 1;
    for (size_t m = 0; m < mesh.size(); ++m)
      total *= radix;
    for (size_t combo = 0; combo < total; ++combo) {
      // Mixed-radix digits, mesh dim 0 most significant.
      size_t rest = combo;
      for (size_t m = mesh.size(); m-- > 0;) {
        pick[m] = rest % radix;
        rest /= radix;
      }
      if (radix == base ||
          llvm::any_of(pick, [&](size_t p) { return p >= base; }))
        consider(pick);
    }
    if (base == oneDim.size())
      break;
  }
  if (constraint && given == 0) {
    // A layout no strategy lists (a StridedShard not in flight): the
    // pinned one, Replicate on the free mesh dims.
    for (size_t m = 0; m < mesh.size(); ++m)
      if (constraint.isFree(m))
        pinned[m] = Placement::replicate();
    fn(MeshStrategy{{pinned}, {pinned}});
  }
  return success();
}

FailureOr<layout::MeshCostModel>
spmd::getMeshCostModel(MeshOp mesh, ArrayRef<double> latency,
                       ArrayRef<double> bandwidth, StringRef pass) {
  layout::MeshCostModel model =
      layout::MeshCostModel::defaults(mesh.getShape().size());
  for (auto [name, values, field] :
       {std::make_tuple(StringRef("latency"), latency, &model.latency),
        std::make_tuple(StringRef("bandwidth"), bandwidth, &model.bandwidth)}) {
    if (values.empty())
      continue;
    if (values.size() != mesh.getShape().size())
      return mesh.emitOpError()
             << pass << ": '" << name << "' has " << values.size()
             << " values; the mesh has " << mesh.getShape().size() << " dims";
    field->assign(values.begin(), values.end());
  }
  return model;
}

int64_t spmd::elementBytes(Type elementType) {
  unsigned bits = elementType.getIntOrFloatBitWidth();
  return bits < 8 ? 1 : bits / 8;
}

int64_t spmd::tensorBytes(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  return ranked
             ? ranked.getNumElements() * elementBytes(ranked.getElementType())
             : 0;
}

CostModel::CostModel(std::vector<int64_t> meshShape, layout::MeshCostModel mesh,
                     double flopsPerSecond, double bytesPerSecond)
    : meshShape(std::move(meshShape)), mesh(std::move(mesh)),
      flopsPerSecond(flopsPerSecond), bytesPerSecond(bytesPerSecond) {}

std::vector<int64_t> CostModel::localShape(RankedTensorType type,
                                           const Placements &placements) const {
  return layout::maxLocalShape(shapeOf(type), meshShape, placements);
}

void spmd::appendLayoutKey(Type type, const Placements &placements,
                           SmallVectorImpl<char> &key) {
  if (type) {
    const void *opaque = type.getAsOpaquePointer();
    key.append(reinterpret_cast<const char *>(&opaque),
               reinterpret_cast<const char *>(&opaque + 1));
  }
  for (const Placement &p : placements) {
    int64_t fields[] = {static_cast<int64_t>(p.kind), p.dim, p.splitFactor,
                        static_cast<int64_t>(p.reduce)};
    key.append(reinterpret_cast<const char *>(fields),
               reinterpret_cast<const char *>(fields + 4));
  }
}

double CostModel::localElements(RankedTensorType type,
                                const Placements &placements) {
  SmallString<128> key;
  appendLayoutKey(type, placements, key);
  auto [it, inserted] = elements.try_emplace(key, 0);
  if (inserted) {
    double n = 1;
    for (int64_t d : localShape(type, placements))
      n *= static_cast<double>(d);
    it->second = n;
  }
  return it->second;
}

unsigned CostModel::intern(const Placements &placements) {
  SmallString<128> key;
  appendLayoutKey(Type(), placements, key);
  auto [it, inserted] = ids.try_emplace(key, layouts.size());
  if (inserted)
    layouts.push_back(placements);
  return it->second;
}

const layout::RedistributePlanner::Summary &
CostModel::plan(RankedTensorType type, unsigned from, unsigned to) {
  auto key = std::make_pair(type.getAsOpaquePointer(),
                            static_cast<uint64_t>(from) << 32 | to);
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  std::unique_ptr<layout::RedistributePlanner> &planner =
      planners[type.getAsOpaquePointer()];
  if (!planner)
    planner = std::make_unique<layout::RedistributePlanner>(
        shapeOf(type), elementBytes(type.getElementType()), meshShape, mesh);
  return cache[key] = planner->summarize(layouts[from], layouts[to]);
}

double CostModel::redistribute(RankedTensorType type, unsigned from,
                               unsigned to) {
  return from == to ? 0 : plan(type, from, to).seconds;
}

std::pair<int64_t, int64_t> CostModel::redistributeVolume(RankedTensorType type,
                                                          unsigned from,
                                                          unsigned to) {
  if (from == to)
    return {0, 0};
  const layout::RedistributePlanner::Summary &p = plan(type, from, to);
  return {p.bytesPerRank, p.collectives};
}

double CostModel::flopsFor(Type t) const {
  if (gemmFlops.empty())
    return flopsPerSecond;
  std::string name;
  llvm::raw_string_ostream os(name);
  t.print(os);
  auto it = gemmFlops.find(name);
  return it == gemmFlops.end() ? flopsPerSecond : it->second;
}

static double numel(const std::vector<int64_t> &shape) {
  double n = 1;
  for (int64_t d : shape)
    n *= static_cast<double>(d);
  return n;
}

double CostModel::compute(Operation *op, const MeshStrategy &strategy) {
  auto local = [&](Value v, const Placements &p) {
    return localShape(cast<RankedTensorType>(v.getType()), p);
  };
  if (isa<ShardingConstraintOp>(op))
    return 0;
  if (op->hasTrait<aten::OpTrait::MatrixProduct>()) {
    // The two matrix operands are the last two: [.., m, k] x [.., k, n].
    unsigned n = op->getNumOperands();
    std::vector<int64_t> a =
        local(op->getOperand(n - 2), strategy.operands[n - 2]);
    std::vector<int64_t> b =
        local(op->getOperand(n - 1), strategy.operands[n - 1]);
    return 2 * numel(a) * static_cast<double>(b.back()) /
           flopsFor(getElementTypeOrSelf(op->getResult(0).getType()));
  }
  // A convolution is a GEMM per position: 2 * output elements * (C /
  // groups) * kernel taps flop; its backward, two of them.
  auto convolution = [&](Value out, Value weight, const Placements &p,
                         double gemms) {
    auto w = cast<RankedTensorType>(weight.getType()).getShape();
    double taps = 1;
    for (int64_t k : w.drop_front())
      taps *= static_cast<double>(k);
    return gemms * 2 * numel(local(out, p)) * taps /
           flopsFor(getElementTypeOrSelf(out.getType()));
  };
  // Attention per (batch, head): scores [L, E] x [E, S] and output
  // [L, S] x [S, E], 4·L·S·E flop, half of it where causal (a fused kernel
  // skips the masked blocks); backward recomputes the scores and runs four
  // more products, 2.5 times forward (FlashAttention-2's count).
  auto attention = [&](unsigned query, unsigned key, bool causal,
                       double times) {
    std::vector<int64_t> q =
        local(op->getOperand(query), strategy.operands[query]);
    std::vector<int64_t> k = local(op->getOperand(key), strategy.operands[key]);
    double keys = k.size() >= 2 ? static_cast<double>(k[k.size() - 2]) : 1;
    return times * 4 * numel(q) * keys / (causal ? 2 : 1) /
           flopsFor(getElementTypeOrSelf(op->getOperand(query).getType()));
  };
  if (auto sdpa = dyn_cast<aten::ScaledDotProductFlashAttentionForCpuOp>(op))
    return attention(0, 1, sdpa.getIsCausal(), 1);
  if (auto sdpa =
          dyn_cast<aten::ScaledDotProductFlashAttentionForCpuBackwardOp>(op))
    return attention(1, 2, sdpa.getIsCausal(), 2.5);
  if (auto conv = dyn_cast<aten::ConvolutionOp>(op))
    return convolution(conv.getResult(), conv.getWeight(), strategy.results[0],
                       1);
  if (auto conv = dyn_cast<aten::ConvolutionBackwardOp>(op))
    return convolution(conv.getGradOutput(), conv.getWeight(),
                       strategy.operands[0], 2);
  double bytes = 0;
  auto add = [&](ValueRange values, ArrayRef<Placements> layouts) {
    for (auto [v, p] : llvm::zip(values, layouts)) {
      auto type = cast<RankedTensorType>(v.getType());
      bytes += localElements(type, p) * elementBytes(type.getElementType());
    }
  };
  add(op->getOperands(), strategy.operands);
  add(op->getResults(), strategy.results);
  return bytes / bytesPerSecond;
}
