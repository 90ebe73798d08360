//===- Strategy.cpp - op strategies on a device mesh, and their cost ------===//

#include "spmd/Propagate/Strategy.h"
#include "spmd/Dialect/Aten/Aten.h"

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
    int64_t ways = 1;
    for (size_t m = 0; m < placements.size(); ++m)
      if (placements[m].isShardLike() &&
          placements[m].dim == static_cast<int64_t>(d))
        ways *= meshShape[m];
    if (shape[d] % ways != 0)
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

void spmd::collectSplitFactors(Operation *op,
                               SmallVectorImpl<SplitFactor> &out) {
  auto ruleOp = dyn_cast<aten::ShardingRuleOpInterface>(op);
  if (!ruleOp)
    return;
  std::optional<layout::EinsumRule> rule = ruleOp.getShardingRule();
  if (!rule)
    return;
  auto add = [&](const std::vector<Placement> &placements, ValueRange values) {
    for (auto [p, v] : llvm::zip(placements, values))
      addSplitFactor(p, v.getType(), out);
  };
  for (const layout::OpStrategy &s : rule->extra) {
    add(s.operands, op->getOperands());
    add(s.results, op->getResults());
  }
}

/// Two 1-D strategies shard the same dim of some operand or result.
static bool shardsSameDims(const layout::OpStrategy &a,
                           const layout::OpStrategy &b) {
  auto clash = [](const std::vector<Placement> &x,
                  const std::vector<Placement> &y) {
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i].isShardLike() && y[i].isShardLike() && x[i].dim == y[i].dim)
        return true;
    return false;
  };
  return clash(a.operands, b.operands) || clash(a.results, b.results);
}

FailureOr<std::vector<MeshStrategy>>
spmd::enumerateStrategies(Operation *op, ArrayRef<int64_t> meshShape,
                          ArrayRef<SplitFactor> splitFactors) {
  std::optional<layout::EinsumRule> rule;
  auto constraint = dyn_cast<ShardingConstraintOp>(op);
  if (constraint)
    rule = layout::EinsumRule::identity(
        cast<RankedTensorType>(op->getResult(0).getType()).getRank());
  else if (auto ruleOp = dyn_cast<aten::ShardingRuleOpInterface>(op)) {
    rule = ruleOp.getShardingRule();
  }
  if (!rule)
    return failure();
  std::vector<layout::OpStrategy> oneDim = rule->strategies();
  const size_t base = oneDim.size();
  if (!isa<aten::BernoulliPOp, aten::NativeDropoutOp, aten::EmbeddingOp,
           aten::EmbeddingDenseBackwardOp>(op)) {
    for (auto [size, factor] : splitFactors)
      for (size_t i = 0; i < base; ++i) {
        layout::OpStrategy twin = oneDim[i];
        auto hasKind = [&](Placement::Kind kind) {
          auto is = [&](const Placement &p) { return p.kind == kind; };
          return llvm::any_of(twin.operands, is) ||
                 llvm::any_of(twin.results, is);
        };
        if (twin.evenShards || !hasKind(Placement::Kind::Shard) ||
            hasKind(Placement::Kind::StridedShard))
          continue;
        // Only where every shard falls on a dim of the StridedShard's size.
        auto onSize = [&, size = size](const std::vector<Placement> &list,
                                       ValueRange values) {
          for (auto [p, v] : llvm::zip(list, values))
            if (p.kind == Placement::Kind::Shard &&
                cast<RankedTensorType>(v.getType()).getDimSize(p.dim) != size)
              return false;
          return true;
        };
        if (!onSize(twin.operands, op->getOperands()) ||
            !onSize(twin.results, op->getResults()))
          continue;
        for (auto *list : {&twin.operands, &twin.results})
          for (Placement &p : *list)
            if (p.kind == Placement::Kind::Shard)
              p = Placement::stridedShard(p.dim, factor);
        oneDim.push_back(twin);
      }
  }
  std::vector<int64_t> mesh(meshShape.begin(), meshShape.end());

  std::vector<std::vector<int64_t>> operandShapes, resultShapes;
  for (Value v : op->getOperands())
    operandShapes.push_back(shapeOf(v.getType()));
  for (Value v : op->getResults())
    resultShapes.push_back(shapeOf(v.getType()));

  std::vector<MeshStrategy> out;
  // Combinations of the rule's own strategies come first and keep their
  // numbering whatever twins follow (spmd.strategy refers to it).
  std::vector<std::vector<size_t>> picks;
  for (size_t radix : {base, oneDim.size()}) {
    size_t total = 1;
    for (size_t m = 0; m < mesh.size(); ++m)
      total *= radix;
    for (size_t combo = 0; combo < total; ++combo) {
      // Mixed-radix digits, mesh dim 0 most significant.
      std::vector<size_t> pick(mesh.size());
      size_t rest = combo;
      for (size_t m = mesh.size(); m-- > 0;) {
        pick[m] = rest % radix;
        rest /= radix;
      }
      if (radix == base ||
          llvm::any_of(pick, [&](size_t p) { return p >= base; }))
        picks.push_back(std::move(pick));
    }
    if (base == oneDim.size())
      break;
  }
  for (const std::vector<size_t> &pick : picks) {
    MeshStrategy s;
    s.operands.assign(operandShapes.size(), Placements(mesh.size()));
    s.results.assign(resultShapes.size(), Placements(mesh.size()));
    bool even = false, ok = true;
    for (size_t m = 0; m < mesh.size(); ++m) {
      const layout::OpStrategy &one = oneDim[pick[m]];
      even |= one.evenShards;
      if (one.divides > 0) {
        // The mesh dim divides the atom, and the atom's shard does not nest
        // with other shards of its dims.
        ok = ok && one.divides % mesh[m] == 0;
        for (size_t other = 0; other < mesh.size() && ok; ++other)
          ok = other == m || !shardsSameDims(one, oneDim[pick[other]]);
      }
      for (size_t i = 0; i < operandShapes.size(); ++i)
        s.operands[i][m] = one.operands[i];
      for (size_t i = 0; i < resultShapes.size(); ++i)
        s.results[i][m] = one.results[i];
    }
    auto check = [&](const std::vector<int64_t> &shape, const Placements &p) {
      ok = ok && layout::validate(shape, mesh, p).empty() &&
           (!even || shardsEvenly(shape, p, mesh));
    };
    for (size_t i = 0; i < operandShapes.size(); ++i)
      check(operandShapes[i], s.operands[i]);
    for (size_t i = 0; i < resultShapes.size(); ++i)
      check(resultShapes[i], s.results[i]);
    if (ok)
      out.push_back(std::move(s));
  }
  if (constraint) {
    Placements pinned = constraint.getLayout().getLayoutPlacements();
    auto violates = [&](const MeshStrategy &s) {
      for (size_t m = 0; m < mesh.size(); ++m)
        if (!constraint.isFree(m) && s.results[0][m] != pinned[m])
          return true;
      return false;
    };
    llvm::erase_if(out, violates);
    if (out.empty()) {
      // A layout no strategy lists (a StridedShard not in flight): the
      // pinned one, Replicate on the free mesh dims.
      for (size_t m = 0; m < mesh.size(); ++m)
        if (constraint.isFree(m))
          pinned[m] = Placement::replicate();
      out.push_back(MeshStrategy{{pinned}, {pinned}});
    }
  }
  return out;
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

unsigned CostModel::intern(const Placements &placements) {
  std::string key;
  for (const Placement &p : placements) {
    int64_t fields[] = {static_cast<int64_t>(p.kind), p.dim, p.splitFactor,
                        static_cast<int64_t>(p.reduce)};
    key.append(reinterpret_cast<const char *>(fields), sizeof(fields));
  }
  auto [it, inserted] = ids.try_emplace(key, layouts.size());
  if (inserted)
    layouts.push_back(placements);
  return it->second;
}

double CostModel::redistribute(RankedTensorType type, unsigned from,
                               unsigned to) {
  if (from == to)
    return 0;
  auto key = std::make_tuple(type.getAsOpaquePointer(), from, to);
  auto it = cache.find(key);
  if (it != cache.end())
    return it->second;
  layout::RedistributePlan plan = layout::planRedistribute(
      shapeOf(type), elementBytes(type.getElementType()), meshShape,
      layouts[from], layouts[to], mesh);
  double seconds = plan.error.empty() ? plan.seconds
                                      : std::numeric_limits<double>::infinity();
  cache[key] = seconds;
  return seconds;
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
  if (isa<aten::MmOp, aten::AddmmOp, aten::BmmOp, aten::BaddbmmOp>(op)) {
    // The two matrix operands are the last two: [.., m, k] x [.., k, n].
    unsigned n = op->getNumOperands();
    std::vector<int64_t> a =
        local(op->getOperand(n - 2), strategy.operands[n - 2]);
    std::vector<int64_t> b =
        local(op->getOperand(n - 1), strategy.operands[n - 1]);
    return 2 * numel(a) * static_cast<double>(b.back()) / flopsPerSecond;
  }
  double bytes = 0;
  auto add = [&](ValueRange values, ArrayRef<Placements> layouts) {
    for (auto [v, p] : llvm::zip(values, layouts))
      bytes +=
          numel(local(v, p)) *
          elementBytes(cast<RankedTensorType>(v.getType()).getElementType());
  };
  add(op->getOperands(), strategy.operands);
  add(op->getResults(), strategy.results);
  return bytes / bytesPerSecond;
}
