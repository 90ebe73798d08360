//===- AtenSharding.cpp - einsum sharding rules of aten ops ---------------===//
//
// The spmd dialect's ShardingRuleOpInterface for aten ops, in einsum form
// (ShardingRules.h): the rules families share (namespace rules, used by the
// families of AtenOps.td) and the ops' own rules.
// Labels a, b, c, ... name the result's dims; an operand dim broadcast from
// size 1 is '1'. Linear groups follow the op's algebra (a Partial(sum)
// operand gives a Partial(sum) result exactly when the op is linear in it).
// Ops that are not einsums in the usual sense are written as one: views map
// groups of dims (DTensor's view rules), layer norm and the softmax family
// keep their normalized dims whole, the losses and embeddings contract the
// batch, factories shard their result freely.
//
//===----------------------------------------------------------------------===//

#include "spmd/Dialect/Aten/Aten.h"

#include <numeric>

#include "spmd/Dialect/Aten/AtenInterfaces.cpp.inc"

using namespace mlir;
using spmd::layout::EinsumRule;
using spmd::layout::OpStrategy;
using spmd::layout::Placement;
namespace aten = spmd::aten;
using namespace spmd::aten;

namespace {

int64_t rankOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}

/// `rank` labels starting at `first`: "abc...".
std::string labelsFrom(char first, int64_t rank) {
  std::string labels;
  for (int64_t i = 0; i < rank; ++i)
    labels += static_cast<char>(first + i);
  return labels;
}

/// Labels of the result of rank `rank`: "abc...".
std::string resultLabels(int64_t rank) { return labelsFrom('a', rank); }

/// The labels of `operand` broadcast to a result of `result` type labelled
/// `labels`: right-aligned; a dim of size 1 against a larger result dim is
/// '1'.
std::string broadcastLabels(Value operand, Type result, StringRef labels) {
  auto type = cast<RankedTensorType>(operand.getType());
  auto resultType = cast<RankedTensorType>(result);
  std::string out;
  int64_t offset = resultType.getRank() - type.getRank();
  for (int64_t d = 0; d < type.getRank(); ++d)
    out += type.getDimSize(d) == 1 && resultType.getDimSize(d + offset) != 1
               ? '1'
               : labels[d + offset];
  return out;
}

} // namespace

/// Every result has the shape of the first.
EinsumRule aten::rules::pointwise(Operation *op,
                                  std::vector<std::vector<int>> linear,
                                  layout::ReduceKind reduce) {
  Type result = op->getResult(0).getType();
  EinsumRule rule;
  std::string labels = resultLabels(cast<RankedTensorType>(result).getRank());
  rule.results.assign(op->getNumResults(), labels);
  for (Value operand : op->getOperands())
    rule.operands.push_back(broadcastLabels(operand, result, labels));
  rule.linearGroups = std::move(linear);
  rule.reduce = reduce;
  return rule;
}

EinsumRule aten::rules::factory(Operation *op) {
  EinsumRule rule = pointwise(op, {});
  if (op->getNumOperands() != 1)
    return rule;
  for (layout::ReduceKind kind :
       {layout::ReduceKind::Sum, layout::ReduceKind::Avg,
        layout::ReduceKind::Max, layout::ReduceKind::Min})
    rule.extra.push_back(
        {{layout::Placement::partial(kind)},
         std::vector<layout::Placement>(op->getNumResults(),
                                        layout::Placement::replicate())});
  return rule;
}

EinsumRule aten::rules::reduction(Operation *op, ArrayRef<int64_t> dims,
                                  bool keepdim, layout::ReduceKind reduce) {
  int64_t rank = rankOf(op->getOperand(0));
  EinsumRule rule;
  std::string in = resultLabels(rank);
  rule.operands = {in};
  std::string result;
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = llvm::any_of(
        dims, [&](int64_t r) { return aten::normalizeDim(r, rank) == d; });
    if (!reduced)
      result += in[d];
    else if (keepdim)
      result += '1';
    // A mean of unequal shards' means is not the mean.
    if (reduced && reduce == layout::ReduceKind::Avg)
      rule.evenOnly += in[d];
  }
  rule.results = {result};
  rule.linearGroups = {{0}};
  rule.reduce = reduce;
  return rule;
}

/// DTensor's strategy for `_scaled_dot_product_flash_attention`
/// (torch/distributed/tensor/_ops/_matrix_ops.py) shards the batch or the
/// heads of every operand and result alike: each (batch, head) is an
/// independent attention. The query's length l, the keys' s and the head
/// sizes e (query, key) and v (value, output) stay whole: the softmax runs
/// along s, the products contract e and s.
EinsumRule aten::rules::attention(Operation *op, Value attnMask,
                                  bool backward) {
  const std::string query = "bhle", key = "bhse", value = "bhsv",
                    output = "bhlv", stats = "bhl";
  EinsumRule rule;
  if (backward) {
    rule.operands = {output, query, key, value, output, stats};
    rule.results = {query, key, value};
  } else {
    rule.operands = {query, key, value};
    rule.results = {output, stats};
  }
  if (attnMask) {
    // The mask broadcasts to the scores [B, H, L, S].
    auto q = cast<RankedTensorType>(op->getOperand(backward ? 1 : 0).getType());
    auto k = cast<RankedTensorType>(op->getOperand(backward ? 2 : 1).getType());
    auto scores = RankedTensorType::get(
        {q.getDimSize(0), q.getDimSize(1), q.getDimSize(2), k.getDimSize(2)},
        q.getElementType());
    rule.operands.push_back(broadcastLabels(attnMask, scores, "bhls"));
  }
  rule.unshardable = "lsev";
  return rule;
}

namespace {

/// The size along `dim` of `values` when there are at least two and all
/// have the same, non-zero, size there.
std::optional<int64_t> equalPieces(ArrayRef<Value> values, int64_t dim) {
  if (values.size() < 2)
    return std::nullopt;
  int64_t size = cast<RankedTensorType>(values[0].getType()).getDimSize(dim);
  for (Value v : values)
    if (cast<RankedTensorType>(v.getType()).getDimSize(dim) != size)
      return std::nullopt;
  if (size == 0)
    return std::nullopt;
  return size;
}

/// StridedShard(dim, k) of the packed value <-> Shard(dim) of each of its
/// k pieces of `piece` elements: a split (packed operand, pieces as
/// results) or a cat (pieces as operands, packed result).
OpStrategy packedPieces(int64_t dim, size_t k, int64_t piece, bool split) {
  std::vector<Placement> packed = {
      Placement::stridedShard(dim, static_cast<int64_t>(k))};
  std::vector<Placement> pieces(k, Placement::shard(dim));
  OpStrategy s;
  s.operands = split ? packed : pieces;
  s.results = split ? pieces : packed;
  s.divides = piece;
  return s;
}

} // namespace

EinsumRule aten::rules::keepWhole(EinsumRule rule, int64_t dim) {
  int64_t rank = rule.results[0].size();
  rule.unshardable += rule.results[0][aten::normalizeDim(dim, rank)];
  return rule;
}

EinsumRule aten::rules::matmul(Operation *op, bool batched, bool withSelf) {
  EinsumRule rule;
  std::string b = batched ? "b" : "";
  rule.results = {b + "mn"};
  rule.operands = {b + "mk", b + "kn"};
  rule.linearGroups = {{0}, {1}};
  if (withSelf) {
    // `self` broadcasts to the result; it is added, not multiplied.
    rule.operands.insert(rule.operands.begin(), rule.results[0]);
    rule.linearGroups = {{0, 1}, {0, 2}};
    rule.additive = {0};
    rule.operands[0] = broadcastLabels(
        op->getOperand(0), op->getResult(0).getType(), rule.results[0]);
  }
  return rule;
}

EinsumRule aten::rules::permute(ArrayRef<int64_t> perm) {
  std::string in = resultLabels(perm.size()), out;
  for (int64_t d : perm)
    out += in[d];
  EinsumRule rule{{in}, {out}, "", {{0}}};
  rule.movesElements = true;
  return rule;
}

namespace {

/// The strategies of a view group [i0, i) -> [j0, j) (equal element
/// counts) beyond its outer dims: the group's dims are products of atoms
/// (the common refinement of both sides' cumulative sizes, when it exists),
/// and an atom sharded evenly stays sharded wherever the view puts it. An
/// atom that starts a dim is a Shard of it; one after outer atoms of
/// product p is a StridedShard(dim, p) (DTensor's `_StridedShard`: the dim
/// cut into p pieces, each chunked). So the heads-merging view of
/// attention, [S, B*H, hd] -> [S*B, H*hd] with B sharded, is Shard(1) ->
/// StridedShard(0, S).
void appendAtomStrategies(ArrayRef<int64_t> from, ArrayRef<int64_t> to,
                          size_t i0, size_t i, size_t j0, size_t j,
                          std::vector<OpStrategy> &out) {
  // Cumulative products, outer dims first, and the dim each starts.
  auto cumulative = [](ArrayRef<int64_t> sizes, size_t first, size_t last) {
    SmallVector<std::pair<int64_t, size_t>> c = {{1, first}};
    for (size_t k = first; k < last; ++k)
      c.push_back({c.back().first * sizes[k], k + 1});
    return c;
  };
  auto cin = cumulative(from, i0, i), cout = cumulative(to, j0, j);
  SmallVector<int64_t> chain;
  for (auto &[c, k] : cin)
    chain.push_back(c);
  for (auto &[c, k] : cout)
    chain.push_back(c);
  llvm::sort(chain);
  chain.erase(std::unique(chain.begin(), chain.end()), chain.end());
  for (size_t t = 0; t + 1 < chain.size(); ++t)
    if (chain[t] == 0 || chain[t + 1] % chain[t] != 0)
      return; // no common refinement
  // The dim that holds the atom starting at `c` and the product of the
  // atoms before it in that dim.
  auto locate = [](ArrayRef<std::pair<int64_t, size_t>> cum, int64_t c) {
    size_t k = 0;
    while (k + 2 < cum.size() && cum[k + 1].first <= c)
      ++k;
    return std::make_pair(cum[k].second, c / cum[k].first);
  };
  auto placement = [](size_t dim, int64_t prefix) {
    return prefix == 1
               ? Placement::shard(static_cast<int64_t>(dim))
               : Placement::stridedShard(static_cast<int64_t>(dim), prefix);
  };
  for (size_t t = 0; t + 1 < chain.size(); ++t) {
    int64_t atom = chain[t + 1] / chain[t];
    auto [k, pk] = locate(cin, chain[t]);
    auto [d, pd] = locate(cout, chain[t]);
    // The group's outer dims have their label already.
    if (atom == 1 || (k == i0 && d == j0 && pk == 1 && pd == 1))
      continue;
    OpStrategy s{{placement(k, pk)}, {placement(d, pd)}, true};
    s.divides = atom;
    out.push_back(s);
  }
}

/// DTensor's view rule. The dims of `from` and `to` (sizes-1 dims aside)
/// fall into groups of equal element count, matched in order. A group of
/// one dim on each side keeps its label. In a group that merges or splits
/// dims only the outer dim of each side may be sharded, and only evenly:
/// the first chunk of [a*b] is the first chunk of [a] times b exactly when
/// the shard count divides a. Every other dim stays whole.
EinsumRule viewRule(ArrayRef<int64_t> from, ArrayRef<int64_t> to) {
  std::string in(from.size(), ' '), out(to.size(), ' ');
  EinsumRule rule;
  char next = 'a';
  auto whole = [&]() {
    rule.unshardable += next;
    return next++;
  };
  size_t i = 0, j = 0;
  while (i < from.size() || j < to.size()) {
    if (i < from.size() && from[i] == 1) {
      in[i++] = whole();
      continue;
    }
    if (j < to.size() && to[j] == 1) {
      out[j++] = whole();
      continue;
    }
    // Verified views have equal element counts, so both sides are left.
    if (i == from.size() || j == to.size()) {
      // Only zero-element views get here: nothing to shard.
      for (; i < from.size(); ++i)
        in[i] = whole();
      for (; j < to.size(); ++j)
        out[j] = whole();
      break;
    }
    size_t i0 = i++, j0 = j++;
    int64_t a = from[i0], b = to[j0];
    while (a != b && (a < b ? i < from.size() : j < to.size())) {
      if (a < b)
        a *= from[i++];
      else
        b *= to[j++];
    }
    char label = next++;
    in[i0] = out[j0] = label;
    if (i - i0 > 1 || j - j0 > 1) {
      rule.evenOnly += label;
      appendAtomStrategies(from, to, i0, i, j0, j, rule.extra);
    }
    for (size_t k = i0 + 1; k < i; ++k)
      in[k] = whole();
    for (size_t k = j0 + 1; k < j; ++k)
      out[k] = whole();
  }
  rule.operands = {in};
  rule.results = {out};
  rule.linearGroups = {{0}};
  rule.movesElements = true;
  return rule;
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

} // namespace

EinsumRule aten::rules::view(Operation *op) {
  return viewRule(shapeOf(op->getOperand(0)), shapeOf(op->getResult(0)));
}

namespace {

/// Layer norm over the trailing `normalized` dims of `input`: batch labels
/// may be sharded, normalized ones stay whole. Weight and bias carry the
/// normalized labels, mean and rstd the batch labels and '1's.
struct LayerNormLabels {
  std::string full, stats, normalized;
  LayerNormLabels(int64_t rank, int64_t normalizedRank) {
    std::string batch = resultLabels(rank - normalizedRank);
    normalized = labelsFrom('t', normalizedRank);
    full = batch + normalized;
    stats = batch + std::string(normalizedRank, '1');
  }
};

/// nll_loss: self [N, C] or [C], target [N] or []; the class dim stays
/// whole.
std::string nllBatch(Value self) { return rankOf(self) == 2 ? "n" : ""; }

/// The inputs of a concatenation or the pieces of a split, each labelled
/// `labels` except along `dim`, which stays whole (but for one piece, the
/// whole); with k equal pieces
/// also StridedShard(dim, k) of the packed value <-> Shard(dim) of each
/// piece (a packed q|k|v projection, head-parallel).
EinsumRule piecesRule(Value packed, ValueRange pieces, int64_t dim,
                      bool split) {
  std::string labels = resultLabels(rankOf(packed));
  EinsumRule rule;
  std::vector<std::string> &packedSide = split ? rule.operands : rule.results;
  std::vector<std::string> &piecesSide = split ? rule.results : rule.operands;
  packedSide = {labels};
  piecesSide.assign(pieces.size(), labels);
  std::vector<int> all;
  for (int i = 0, e = rule.operands.size(); i < e; ++i)
    all.push_back(i);
  rule.linearGroups = {all};
  rule.movesElements = true;
  dim = aten::normalizeDim(dim, rankOf(packed));
  // One piece is the whole: any layout passes through (x.chunk(1)).
  if (pieces.size() == 1)
    return rule;
  rule = rules::keepWhole(rule, dim);
  std::vector<Value> values(pieces.begin(), pieces.end());
  if (auto piece = equalPieces(values, dim))
    rule.extra.push_back(packedPieces(dim, values.size(), *piece, split));
  return rule;
}

} // namespace

//===----------------------------------------------------------------------===//
// The ops' own rules
//===----------------------------------------------------------------------===//

/// Which elements are zeroed depends on their global position in the last
/// two dims.
std::optional<EinsumRule> TriuOp::getShardingRule() {
  EinsumRule rule = rules::pointwise(*this, {});
  rule.unshardable = rule.results[0].substr(rule.results[0].size() - 2);
  return rule;
}

/// Widening a float is exact on each rank, so the ranks' widened values sum
/// to the Partial's value, summed in the wider type.
std::optional<EinsumRule> ToCopyOp::getShardingRule() {
  bool widening = isWideningFloatCast(
      cast<RankedTensorType>(getSelf().getType()).getElementType(), getDtype());
  return rules::pointwise(*this, widening ? std::vector<std::vector<int>>{{0}}
                                          : std::vector<std::vector<int>>{});
}

/// Values are global positions.
std::optional<EinsumRule> ArangeOp::getShardingRule() {
  return rules::keepWhole(rules::pointwise(*this, {}), 0);
}

std::optional<EinsumRule> ArangeStartStepOp::getShardingRule() {
  return rules::keepWhole(rules::pointwise(*this, {}), 0);
}

EinsumRule aten::rules::select(Operation *op, int64_t dim) {
  std::string in = resultLabels(rankOf(op->getOperand(0)));
  EinsumRule rule;
  rule.operands = {in};
  rule.results = {in.substr(0, dim) + in.substr(dim + 1)};
  rule.unshardable = std::string(1, in[dim]);
  rule.linearGroups = {{0}};
  rule.movesElements = true;
  return rule;
}

/// A rearrangement of `self` along `dim`, which stays whole; the other dims
/// shard through (DTensor's slice, slice_scatter and pad rules). `operands`
/// more operands are labelled like `self`.
static EinsumRule alongWholeDim(Value self, int64_t dim, size_t operands) {
  std::string labels = resultLabels(rankOf(self));
  EinsumRule rule;
  rule.operands.assign(operands, labels);
  rule.results = {labels};
  rule.unshardable = std::string(1, labels[dim]);
  std::vector<int> all(operands);
  std::iota(all.begin(), all.end(), 0);
  rule.linearGroups = {all};
  rule.movesElements = true;
  return rule;
}

std::optional<EinsumRule> SliceTensorOp::getShardingRule() {
  return alongWholeDim(getSelf(), normalizeDim(getDim(), rankOf(getSelf())), 1);
}

/// Linear in `self` and `src` together: each rank's share of a Partial sum
/// of both is the scatter of the shares.
std::optional<EinsumRule> SliceScatterOp::getShardingRule() {
  return alongWholeDim(getSelf(), normalizeDim(getDim(), rankOf(getSelf())), 2);
}

/// The padded dims stay whole; padding with 0 is linear.
std::optional<EinsumRule> ConstantPadNdOp::getShardingRule() {
  int64_t rank = rankOf(getSelf());
  std::string labels = resultLabels(rank);
  EinsumRule rule;
  rule.operands = {labels};
  rule.results = {labels};
  for (size_t k = 0; 2 * k < getPad().size(); ++k)
    rule.unshardable += labels[rank - 1 - k];
  auto value = dyn_cast<FloatAttr>(getValue());
  auto intValue = dyn_cast<IntegerAttr>(getValue());
  if ((value && value.getValueAsDouble() == 0.0) ||
      (intValue && intValue.getInt() == 0)) {
    rule.linearGroups = {{0}};
    rule.movesElements = true;
  }
  return rule;
}

/// The scanned dim stays whole; a running sum is linear (Partial(sum)
/// only).
std::optional<EinsumRule> CumsumOp::getShardingRule() {
  std::string labels = resultLabels(rankOf(getSelf()));
  EinsumRule rule;
  rule.operands = {labels};
  rule.results = {labels};
  rule.unshardable =
      std::string(1, labels[normalizeDim(getDim(), rankOf(getSelf()))]);
  rule.linearGroups = {{0}};
  return rule;
}

/// The result is labelled like `index`; `self` shares a label where its size
/// is `index`'s, and `dim` (whose values `index` holds) stays whole, as does
/// any dim `index` takes only a part of.
std::optional<EinsumRule> GatherOp::getShardingRule() {
  auto self = cast<RankedTensorType>(getSelf().getType());
  auto index = cast<RankedTensorType>(getIndex().getType());
  int64_t rank = self.getRank(), dim = normalizeDim(getDim(), rank);
  std::string indexLabels = resultLabels(rank);
  std::string selfLabels = labelsFrom('A', rank);
  EinsumRule rule;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != dim && self.getDimSize(d) == index.getDimSize(d)) {
      selfLabels[d] = indexLabels[d];
      continue;
    }
    rule.unshardable += selfLabels[d];
    rule.unshardable += indexLabels[d];
  }
  rule.operands = {selfLabels, indexLabels};
  rule.results = {indexLabels};
  rule.linearGroups = {{0}};
  rule.movesElements = true;
  return rule;
}

/// scatter.src and scatter_add: the result is labelled like `self`; `index`
/// and `src` share a label where all three have one size outside `dim`,
/// which stays whole like any dim `index` covers only a part of. Linear in
/// `self` and `src` together: each result element is one of theirs (or, for
/// scatter_add, a sum of them), at positions every rank agrees on.
static EinsumRule scatterRule(Value selfValue, int64_t dimValue,
                              Value indexValue, Value srcValue) {
  auto self = cast<RankedTensorType>(selfValue.getType());
  auto index = cast<RankedTensorType>(indexValue.getType());
  auto src = cast<RankedTensorType>(srcValue.getType());
  int64_t rank = self.getRank(), dim = normalizeDim(dimValue, rank);
  std::string selfLabels = resultLabels(rank);
  std::string indexLabels = labelsFrom('A', rank);
  std::string srcLabels = indexLabels;
  EinsumRule rule;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = self.getDimSize(d);
    if (d != dim && index.getDimSize(d) == size && src.getDimSize(d) == size) {
      indexLabels[d] = srcLabels[d] = selfLabels[d];
      continue;
    }
    rule.unshardable += selfLabels[d];
    rule.unshardable += indexLabels[d];
  }
  rule.operands = {selfLabels, indexLabels, srcLabels};
  rule.results = {selfLabels};
  rule.linearGroups = {{0, 2}};
  rule.movesElements = true;
  return rule;
}

std::optional<EinsumRule> ScatterSrcOp::getShardingRule() {
  return scatterRule(getSelf(), getDim(), getIndex(), getSrc());
}

/// A sum of elements, not a copy: Partial(sum) passes through, other
/// Partial kinds do not.
std::optional<EinsumRule> ScatterAddOp::getShardingRule() {
  EinsumRule rule = scatterRule(getSelf(), getDim(), getIndex(), getSrc());
  rule.movesElements = false;
  return rule;
}

/// topk and sort: `dim` stays whole in `self` and both results; the other
/// dims shard through.
static EinsumRule selectionRule(Value selfValue, int64_t dimValue) {
  auto self = cast<RankedTensorType>(selfValue.getType());
  int64_t rank = self.getRank(), dim = normalizeDim(dimValue, rank);
  std::string labels = resultLabels(rank);
  std::string selfLabels = labels;
  selfLabels[dim] = 'A';
  EinsumRule rule;
  rule.operands = {selfLabels};
  rule.results = {labels, labels};
  rule.unshardable = {'A', labels[dim]};
  return rule;
}

std::optional<EinsumRule> TopkOp::getShardingRule() {
  return selectionRule(getSelf(), getDim());
}

std::optional<EinsumRule> SortStableOp::getShardingRule() {
  return selectionRule(getSelf(), getDim());
}

/// The indexed dims of `self` stay whole; the indices' broadcast dims (the
/// result's leading ones) and `self`'s trailing dims shard through.
std::optional<EinsumRule> IndexTensorOp::getShardingRule() {
  auto self = cast<RankedTensorType>(getSelf().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  int64_t n = getIndices().size();
  int64_t batch = result.getRank() - (self.getRank() - n);
  std::string labels = resultLabels(result.getRank());
  std::string indexed = labelsFrom('A', n);
  auto batchType = RankedTensorType::get(result.getShape().take_front(batch),
                                         result.getElementType());
  EinsumRule rule;
  rule.operands = {indexed + labels.substr(batch)};
  for (Value index : getIndices())
    rule.operands.push_back(
        broadcastLabels(index, batchType, StringRef(labels).take_front(batch)));
  rule.results = {labels};
  rule.unshardable = indexed;
  rule.linearGroups = {{0}};
  rule.movesElements = true;
  return rule;
}

std::optional<EinsumRule> CatOp::getShardingRule() {
  return piecesRule(getResult(), getTensors(), getDim(), /*split=*/false);
}

EinsumRule aten::rules::split(Value self, ValueRange pieces, int64_t dim) {
  return piecesRule(self, pieces, dim, /*split=*/true);
}

std::optional<EinsumRule> NativeLayerNormOp::getShardingRule() {
  LayerNormLabels l(rankOf(getInput()), getNormalizedShape().size());
  EinsumRule rule;
  rule.operands = {l.full};
  for (Value v : {getWeight(), getBias()})
    if (v)
      rule.operands.push_back(l.normalized);
  rule.results = {l.full, l.stats, l.stats};
  rule.unshardable = l.normalized;
  return rule;
}

/// Linear in grad_out; the weight and bias gradients sum over the batch.
std::optional<EinsumRule> NativeLayerNormBackwardOp::getShardingRule() {
  LayerNormLabels l(rankOf(getInput()), getNormalizedShape().size());
  EinsumRule rule;
  rule.operands = {l.full, l.full, l.stats, l.stats};
  for (Value v : {getWeight(), getBias()})
    if (v)
      rule.operands.push_back(l.normalized);
  rule.results = {l.full, l.normalized, l.normalized};
  rule.unshardable = l.normalized;
  rule.linearGroups = {{0}};
  return rule;
}

/// A vocabulary-sharded table (v) gives a masked Partial: each rank looks
/// up the rows it holds and zeroes the others (spmd-partition passes the
/// rows). Linear in the table.
std::optional<EinsumRule> EmbeddingOp::getShardingRule() {
  std::string indices = resultLabels(rankOf(getIndices()));
  return EinsumRule{{"vz", indices}, {indices + "z"}, "", {{0}}};
}

/// The gradient of a vocabulary shard keeps the rows it holds. Scaling by
/// frequency counts each index over the whole batch: the batch then stays
/// whole.
std::optional<EinsumRule> EmbeddingDenseBackwardOp::getShardingRule() {
  std::string indices = resultLabels(rankOf(getIndices()));
  std::string whole = getScaleGradByFreq() ? indices : "";
  return EinsumRule{{indices + "z", indices}, {"vz"}, whole, {{0}}};
}

/// The labels of a convolution: batch `n`, channels, and the spatial dims
/// of the input (`HWD`), the kernel (`KLM`) and the result (`PQR`), which
/// stay whole (a shard would need its neighbours' halo). Ungrouped: input
/// channels `c` (contracted: a Partial(sum) result) and output channels
/// `o`. Grouped: one label `g` for the input and output channels, sharded
/// only in whole groups (the weight's per-group input channels `x` stay
/// whole), so each rank convolves its own groups.
namespace {
struct ConvLabels {
  std::string input, weight, result, bias;
  EinsumRule rule;

  ConvLabels(int64_t spatial, int64_t groups) {
    std::string in = std::string("HWD").substr(0, spatial);
    std::string k = std::string("KLM").substr(0, spatial);
    std::string out = std::string("PQR").substr(0, spatial);
    char cin = groups == 1 ? 'c' : 'g', cout = groups == 1 ? 'o' : 'g';
    input = std::string("n") + cin + in;
    weight = std::string(1, cout) + (groups == 1 ? 'c' : 'x') + k;
    result = std::string("n") + cout + out;
    bias = std::string(1, cout);
    rule.unshardable = in + k + out;
    if (groups > 1) {
      rule.unshardable += 'x';
      rule.groupedLabels = {{'g', groups}};
    }
  }
};
} // namespace

/// Bilinear in input and weight; the bias is added (Partial with a
/// contraction over input channels).
std::optional<EinsumRule> ConvolutionOp::getShardingRule() {
  ConvLabels l(rankOf(getInput()) - 2, getGroups());
  EinsumRule rule = l.rule;
  rule.operands = {l.input, l.weight};
  rule.results = {l.result};
  rule.linearGroups = {{0}, {1}};
  if (getBias()) {
    // Partial with the input or the weight, or every rank would add it.
    rule.operands.push_back(l.bias);
    rule.additive = {2};
    rule.linearGroups = {{0, 2}, {1, 2}};
  }
  return rule;
}

/// Linear in grad_output: the input gradient contracts the output
/// channels, the weight gradient the batch and the positions.
std::optional<EinsumRule> ConvolutionBackwardOp::getShardingRule() {
  ConvLabels l(rankOf(getInput()) - 2, getGroups());
  EinsumRule rule = l.rule;
  rule.operands = {l.result, l.input, l.weight};
  rule.results = {l.input, l.weight};
  rule.linearGroups = {{0}};
  return rule;
}

/// A pooling of the last two dims: they stay whole (`HW` in, `PQ` pooled);
/// the leading ones shard through. `operandsPooled[i]` (`resultsPooled[i]`)
/// says whether operand (result) i has the pooled shape (a gradient, max
/// pooling's indices) rather than the input's. Linear in operand `linear`
/// (-1: not linear).
static EinsumRule poolRule(Value self, ArrayRef<bool> operandsPooled,
                           ArrayRef<bool> resultsPooled, int linear) {
  std::string lead = resultLabels(rankOf(self) - 2);
  EinsumRule rule;
  for (bool pooled : operandsPooled)
    rule.operands.push_back(lead + (pooled ? "PQ" : "HW"));
  for (bool pooled : resultsPooled)
    rule.results.push_back(lead + (pooled ? "PQ" : "HW"));
  rule.unshardable = "HWPQ";
  if (linear >= 0)
    rule.linearGroups = {{linear}};
  return rule;
}

/// The indices are positions within a plane.
std::optional<EinsumRule> MaxPool2dWithIndicesOp::getShardingRule() {
  return poolRule(getSelf(), {false}, {true, true}, -1);
}

std::optional<EinsumRule> MaxPool2dWithIndicesBackwardOp::getShardingRule() {
  return poolRule(getSelf(), {true, false, true}, {false}, 0);
}

std::optional<EinsumRule> AvgPool2dOp::getShardingRule() {
  return poolRule(getSelf(), {false}, {true}, 0);
}

std::optional<EinsumRule> AvgPool2dBackwardOp::getShardingRule() {
  return poolRule(getSelf(), {true, false}, {false}, 0);
}

std::optional<EinsumRule> AdaptiveAvgPool2dOp::getShardingRule() {
  return poolRule(getSelf(), {false}, {true}, 0);
}

std::optional<EinsumRule> AdaptiveAvgPool2dBackwardOp::getShardingRule() {
  return poolRule(getSelf(), {true, false}, {false}, 0);
}

/// Batch results (reduction none) keep the batch label. The mean's
/// total_weight is all-reduced by the partitioner, which turns the op into
/// a sum divided by that global total (spmd-partition).
std::optional<EinsumRule> NllLossForwardOp::getShardingRule() {
  std::string n = nllBatch(getSelf());
  EinsumRule rule;
  rule.operands = {n + "c", n};
  if (getWeight())
    rule.operands.push_back("c");
  // Sharded classes (loss_parallel): a rank sums the targets it holds
  // (spmd.class_rows), a Partial(sum) of the loss and of total_weight.
  rule.results = {getReduction() == 0 ? n : "", ""};
  if (getReduction() == 1)
    rule.selfReduced = {1};
  return rule;
}

std::optional<EinsumRule> NllLossBackwardOp::getShardingRule() {
  std::string n = nllBatch(getSelf());
  EinsumRule rule;
  rule.operands = {getReduction() == 0 ? n : "", n + "c", n};
  if (getWeight())
    rule.operands.push_back("c");
  rule.operands.push_back("");
  rule.results = {n + "c"};
  rule.linearGroups = {{0}};
  return rule;
}
