//===- Propagate.cpp - whole-graph cost-based sharding propagation --------===//
//
// --spmd-propagate (Passes.td, docs/propagation.md).
//
//===----------------------------------------------------------------------===//

#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Propagate/Passes.h"
#include "spmd/Propagate/Strategy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>

namespace spmd {
#define GEN_PASS_DEF_PROPAGATEPASS
#include "spmd/Propagate/Passes.h.inc"
} // namespace spmd

using namespace mlir;
using namespace spmd;

namespace {
/// Bound on the ops one chain move changes.
constexpr unsigned kChainDepth = 6;

constexpr double kInf = std::numeric_limits<double>::infinity();

/// The strategy choice of one function.
class FunctionPropagation {
public:
  FunctionPropagation(func::FuncOp fn, CostModel &cost, unsigned maxSweeps,
                      StringRef search)
      : fn(fn), cost(cost), maxSweeps(maxSweeps), search(search),
        meshRank(cost.getMeshShape().size()) {}

  /// Enumerates strategies and chooses one per op.
  LogicalResult run();
  /// Writes the choice into the IR: layouts and redistributions.
  LogicalResult materialize(FlatSymbolRefAttr mesh);

private:
  /// The layout `v` has under the current choice.
  unsigned layoutOf(Value v) const;
  /// The layout that `use` needs under the current choice.
  unsigned required(OpOperand &use) const;
  /// A use of a value, found once: the user's index in `ops` (kNotOp for
  /// users outside them) and the operand number. The IR does not change
  /// until materialize().
  static constexpr unsigned kNotOp = ~0u;
  struct UseRef {
    OpOperand *use;
    unsigned user, operand;
  };
  /// The uses of `v`, in use order.
  ArrayRef<UseRef> usesOf(Value v) const {
    auto it = useRefs.find(v);
    return it == useRefs.end() ? ArrayRef<UseRef>() : ArrayRef(it->second);
  }
  /// required(*u.use), without looking the user up.
  unsigned required(const UseRef &u) const {
    return u.user == kNotOp ? required(*u.use) : requiredBy(u.user, u.operand);
  }
  /// The layout op `user`'s current strategy needs of its operand
  /// `operand`.
  unsigned requiredBy(unsigned user, unsigned operand) const {
    noteRead(user);
    return strategiesOf(user)[choice[user]].operands[operand];
  }
  /// Redistribution seconds of `v`, laid out as `from`, for the distinct
  /// layouts its uses need (uses of `skip` replaced by `extra`).
  double valueCost(Value v, unsigned from, Operation *skip = nullptr,
                   ArrayRef<unsigned> extra = {});
  /// Per operand (or result) of an op and each distinct layout its
  /// strategies give it (`Alike`'s slots): a cost that depends on that
  /// layout alone, weighed once per slot instead of once per strategy.
  using SlotCosts = SmallVector<SmallVector<double, 8>, 4>;
  /// The valueCost of each result of an op for each of its slots: the
  /// distinct layouts the result's uses need, and the seconds to them
  /// (NaN until a choice asks: most strategies are ruled out by their
  /// compute and operands alone, and each slot asked is a redistribute
  /// plan per target). Shared by alike ops whose results' uses need the
  /// same layouts.
  struct ResultCosts {
    SmallVector<SmallVector<unsigned, 4>, 2> targets;
    SlotCosts seconds;
  };
  /// The parts of localCost that one operand's or one result's layout
  /// decides: the valueCost of an operand value op i reads once (other
  /// operands: empty, weighed per strategy) and of each result.
  struct LocalCosts {
    SlotCosts operands;
    ResultCosts *results;
  };
  LocalCosts localCosts(unsigned i, const SlotCosts &operandSeconds);
  /// localCosts' results part alone (memoized by op i's alike entry and
  /// the layouts its results' uses need).
  ResultCosts &resultCosts(unsigned i);
  /// `total` plus strategy `s`'s results' costs (`results` of op i), added
  /// in result order.
  double addResultCosts(unsigned i, unsigned s, ResultCosts &results,
                        double total);
  /// The part of the objective that strategy `s` of op `i` changes, less
  /// its results' costs: compute and operands (a lower bound of
  /// localCost, as every cost is non-negative).
  double ownCost(unsigned i, unsigned s, const LocalCosts &parts);
  /// The part of the objective that strategy `s` of op `i` changes.
  double localCost(unsigned i, unsigned s, const LocalCosts &parts) {
    return addResultCosts(i, s, *parts.results, ownCost(i, s, parts));
  }
  /// Redistribution seconds of each operand of op `i`, laid out as
  /// `froms`, to each of its slots (memoized per alike op and `froms`).
  const SlotCosts &operandCosts(unsigned i, ArrayRef<unsigned> froms);
  /// The same with the operands' current layouts.
  const SlotCosts &operandCosts(unsigned i);
  /// Redistribution seconds of op `i`'s own operands under strategy `s`.
  double operandCost(unsigned i, unsigned s, const SlotCosts &costs);
  /// A key naming op i's alike entry and `layouts`: ops with equal keys
  /// make equal choices.
  StringRef alikeKey(unsigned i, ArrayRef<unsigned> layouts,
                     SmallVectorImpl<char> &buffer) const;
  /// Appends the count, then the distinct layouts (in use order, the order
  /// of the sums), that the uses of `v` outside `skip` need.
  void appendUseLayouts(Value v, Operation *skip,
                        SmallVectorImpl<unsigned> &out) const;
  /// Appends the distinct layouts that the uses of `v` outside `skip` need,
  /// in use order, to `out`, which holds none of them.
  void appendNeeds(Value v, Operation *skip,
                   SmallVectorImpl<unsigned> &out) const;
  /// What a value with many uses needs, by distinct layout in use order:
  /// the positions (in its use list) of the uses that need it. A sweep asks
  /// it of every user of such a value (the optimizer's step and learning
  /// rate, read by each parameter's update), which would make a sweep
  /// quadratic in the parameters; the uses' needs change only when a
  /// user's choice does (noteChange drops the entry).
  struct Needs {
    SmallVector<unsigned, 2> layouts;
    SmallVector<SmallVector<unsigned, 8>, 2> positions;
    DenseMap<OpOperand *, unsigned> positionOf;
  };
  static constexpr size_t kManyUses = 32;
  /// Kept while the sweeps run (choices change only through noteChange
  /// there) and no chain move records what it reads.
  mutable DenseMap<Value, Needs> needsOf;
  bool keepNeeds = false;
  /// What sweep() weighs of op i's neighbourhood, beside its current
  /// choice: each operand's layout and its other uses' layouts, and its
  /// results' uses' layouts (appendUseLayouts).
  SmallVector<unsigned, 32> neighbourhood(unsigned i) const;
  /// The strategy sweep() moves op i to (its current one when none is
  /// strictly better).
  unsigned sweepChoice(unsigned i);
  void estimateForward();
  void chooseBackward();
  /// DTensor's own choice, in program order: each op takes the strategy
  /// that is cheapest given its operands' layouts (compute plus the
  /// redistribution of its operands), ignoring its consumers.
  ///
  /// With `followShards`, strategies that move an operand's shard to
  /// another tensor dim come last, as DTensor's strategies follow their
  /// operands' shards or replicate them: a hidden-sharded activation
  /// meeting a layer norm is gathered, not all_to_all'ed to the sequence.
  /// So do strategies that reduce a Partial operand to a shard that no
  /// operand brings on that mesh dim: DTensor reduces it to Replicate
  /// (loss_parallel's sum-exp meeting `log` is all_reduced, not
  /// reduce-scattered and gathered again).
  ///
  /// With `keepReplicated`, on the mesh dims that do not split the batch
  /// (`replicatedDims`, tensor parallelism's) strategies come last that
  /// make a Replicate operand Partial, slice one where no operand arrives
  /// sharded (one that follows a sharded operand is free: a loss gradient
  /// meeting a vocab-sharded head), move a shard to another tensor dim,
  /// carry a Partial beside a Replicate operand, or shard a result where no
  /// operand is sharded. A Partial is then reduced where it meets a
  /// replicated value (Megatron's backward all_reduce at a colwise input's
  /// gradient, DTensor's from_local backward) instead of flowing on into
  /// the replicated parameters' gradients. A factory's zeros (isZeroFill)
  /// are Partial for free, and they and bool masks count as no replicated
  /// value.
  void chooseGreedy(bool followShards, bool keepReplicated);
  /// The objective: every op's compute plus every value's redistributions.
  double totalCost();
  /// One pass of single-op moves over the ops marked `dirty`; returns
  /// whether any op moved.
  bool sweep();
  /// Marks the ops whose localCost reads op i's choice: the producers and
  /// other users of its operands and the users of its results.
  void markNeighbours(unsigned i);
  /// The objective's part that the choices of `region` (op indices) change:
  /// their compute and the redistributions of their operands and results.
  double regionCost(ArrayRef<unsigned> region);
  /// The same redistributions' bytes per rank and number of collectives.
  std::pair<int64_t, int64_t> regionVolume(ArrayRef<unsigned> region);
  /// Chain moves, which single-op sweeps cannot make when each step alone
  /// costs as much as it saves: each value redistributed for a use seeds
  /// tryChain. A Partial reduced once, then carried through a few small
  /// ops, beats a reduce_scatter whose shard is gathered again (BatchNorm's
  /// statistics).
  bool sweepChains();
  /// Op i's result `result` takes layout `want`; the region of re-placed
  /// ops grows best-first (at most kChainDepth ops, contractions never)
  /// across the redistributions at its edge, and is kept, returning true,
  /// once it lowers the objective with fewer collectives moving no more
  /// bytes; `moved` then lists the ops it re-placed, in the order their
  /// changes are stamped, with their strategies before and after.
  /// Otherwise the choices are restored.
  struct Moved {
    unsigned op, before, after;
  };
  bool tryChain(unsigned i, unsigned result, unsigned want,
                SmallVectorImpl<Moved> &moved);
  /// A chain move that kept no region, as a template for alike moves: the
  /// ops it read (members; the first is the op it started from), each
  /// after the first reached from an earlier member along one of its
  /// operands or results (its producer, or its use at a position), and
  /// facts: what the move could have read of them. The move is a function
  /// of these facts, so a move from an alike op whose members have equal
  /// facts reads the same and fails the same way: in a transformer, the
  /// same move in every layer after the first is matched, not made.
  struct Alike;
  struct ChainTemplate {
    struct Step {
      unsigned parent;
      bool isResult;
      unsigned slot;
      int use; // -1: the value's producer
    };
    SmallVector<Step, 16> steps;
    SmallVector<const Alike *, 16> alikes;
    /// The reads in the order the move made them, as member numbers.
    SmallVector<unsigned, 16> readOrder;
    SmallVector<uint64_t, 64> facts;
    /// A kept move's re-placed ops (positions in the reads, in the order
    /// their changes are stamped) and strategies; empty for a failed move.
    SmallVector<std::pair<unsigned, unsigned>, kChainDepth> kept;
  };
  /// Appends the facts of `members` (op indices) that a chain move over
  /// them may read (chainFacts' tokens: each member's alike entry, choice
  /// and forced strategy, and each of its operands and results: member
  /// and result number or the layout of a producer outside them, and the
  /// ordered uses by members and others' needed layouts, unless an op
  /// outside them uses the value, when the move read none of its uses).
  void chainFacts(ArrayRef<unsigned> members,
                  SmallVectorImpl<uint64_t> &facts) const;
  /// The template of a move from op i that read `read`, if each op it read
  /// is reached from i through the ops it read (the facts as they were
  /// before the move).
  std::optional<ChainTemplate> recordChain(unsigned i,
                                           ArrayRef<unsigned> read) const;
  /// The reads a move from an alike op predicts for the move from op i
  /// (`t` matched from op i), if it matches.
  std::optional<SmallVector<unsigned, 16>> matchChain(const ChainTemplate &t,
                                                      unsigned i) const;

  func::FuncOp fn;
  CostModel &cost;
  unsigned maxSweeps;
  StringRef search;
  size_t meshRank;

  std::vector<unsigned> argLayouts, resultLayouts;
  std::vector<Operation *> ops;
  DenseMap<Operation *, unsigned> index;
  DenseMap<Value, SmallVector<UseRef, 2>> useRefs;
  /// Per op and strategy: interned operand and result layouts, compute cost.
  struct StrategyIds {
    SmallVector<unsigned, 4> operands, results;
    /// Per operand (result), the index of its layout in Alike's
    /// operandLayouts (resultLayouts).
    SmallVector<unsigned, 4> operandSlots, resultSlots;
    double compute;
  };
  /// Ops alike (name, inherent attributes, types and the split factors in
  /// flight: the same op in every layer of a transformer) have the same
  /// strategies and costs, enumerated once.
  struct Alike {
    std::vector<StrategyIds> ids;
    /// Per result, the split factors of the StridedShards its strategies
    /// give it (addSplitFactor).
    std::vector<SmallVector<SplitFactor, 2>> producedFactors;
    /// Per operand (result), the distinct layouts the strategies give it.
    std::vector<SmallVector<unsigned, 8>> operandLayouts, resultLayouts;
    /// `ids` by column for estimateForward's sums over every strategy: per
    /// operand (result), each strategy's slot, and each strategy's compute.
    std::vector<std::vector<unsigned>> operandSlotColumns, resultSlotColumns;
    std::vector<double> computes;
  };
  /// Keyed by the bytes of the op's name, inherent attributes, types and
  /// split factors (the nodes stay where they are: alikeOf points to them).
  llvm::StringMap<Alike> alike;
  /// Per op, its entry of `alike`.
  std::vector<const Alike *> alikeOf;
  ArrayRef<StrategyIds> strategiesOf(unsigned i) const {
    return alikeOf[i]->ids;
  }
  std::vector<std::vector<double>> estimate;
  std::vector<int> forced;
  /// Per op, whether it updates the parameters (`spmd.phase` optimizer).
  std::vector<char> inOptimizer;
  std::vector<unsigned> choice;
  /// Ops whose neighbourhood changed since sweep() last weighed them: only
  /// they can move (a sweep is otherwise the same as the last).
  std::vector<char> dirty;
  /// Chain moves that kept no region, by (op, result, wanted layout): when
  /// (`version`) and the ops whose choices they read. Each sweep's choices
  /// that change are stamped in `changedAt`.
  struct FailedChain {
    uint64_t at;
    std::vector<unsigned> reads;
  };
  std::map<std::tuple<unsigned, unsigned, unsigned>, FailedChain> failedChains;
  /// Failed chain moves' templates by (alike op, result, wanted layout), a
  /// few per key.
  DenseMap<std::tuple<const Alike *, unsigned, unsigned>,
           SmallVector<ChainTemplate, 1>>
      chainTemplates;
  std::vector<uint64_t> changedAt;
  uint64_t version = 0;
  /// While set, the ops whose choices layoutOf, required and a chain move
  /// read.
  SmallVectorImpl<unsigned> *reads = nullptr;
  /// Per op, the chain move (`readEpoch`) that last noted it in `reads`: a
  /// move reads a few ops' choices many times over.
  mutable std::vector<uint64_t> readAt;
  uint64_t readEpoch = 0;
  void noteRead(unsigned i) const {
    if (reads && readAt[i] != readEpoch) {
      readAt[i] = readEpoch;
      reads->push_back(i);
    }
  }
  void noteChange(unsigned i) {
    changedAt[i] = ++version;
    for (Value v : ops[i]->getOperands())
      needsOf.erase(v);
  }
  /// sweep()'s choice by alikeKey of (current choice, neighbourhood): the
  /// same op in every layer meets the same neighbourhood and is weighed
  /// once.
  llvm::StringMap<unsigned> swept;
  /// operandCosts and resultCosts by alikeKey of their layouts.
  llvm::StringMap<SlotCosts> operandMemo;
  llvm::StringMap<ResultCosts> resultMemo;
  std::vector<unsigned> redistributed; // `to` of each fixed layout change
  DenseMap<Operation *, unsigned> redistributeIndex;
  unsigned replicateLayout = 0;
  /// Mesh dims on which every input and target argument (`spmd.role`) is
  /// Replicate: tensor parallelism's, where activations stay replicated.
  SmallVector<bool, 4> replicatedDims;
};

unsigned FunctionPropagation::layoutOf(Value v) const {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return argLayouts[arg.getArgNumber()];
  Operation *def = v.getDefiningOp();
  auto it = index.find(def);
  if (it != index.end()) {
    noteRead(it->second);
    return strategiesOf(it->second)[choice[it->second]]
        .results[cast<OpResult>(v).getResultNumber()];
  }
  auto r = redistributeIndex.find(def);
  if (r != redistributeIndex.end())
    return redistributed[r->second];
  return replicateLayout;
}

unsigned FunctionPropagation::required(OpOperand &use) const {
  Operation *user = use.getOwner();
  auto it = index.find(user);
  if (it != index.end())
    return requiredBy(it->second, use.getOperandNumber());
  if (isa<func::ReturnOp>(user))
    return resultLayouts[use.getOperandNumber()];
  if (auto fixed = getFixedLayoutChange(user)) {
    // A value that already has the layout the change gives needs none: a
    // redistribute keeps the global value (a gradient computed whole, from
    // a gathered batch, needs no all_reduce), keep_local each rank's
    // value, which is then that layout's. materialize() drops such a
    // redistribute.
    unsigned have = layoutOf(use.get());
    if (cost.layout(have) == fixed->second.getLayoutPlacements())
      return have;
    return cost.intern(fixed->first.getLayoutPlacements());
  }
  return replicateLayout;
}

double FunctionPropagation::valueCost(Value v, unsigned from, Operation *skip,
                                      ArrayRef<unsigned> extra) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<unsigned, 8> targets(extra.begin(), extra.end());
  if (usesOf(v).size() >= kManyUses) {
    // `extra`, then the uses' distinct needs: the sum below weighs each
    // distinct target once, in this order. (A value with few uses is
    // scanned in place below: routing it through appendNeeds too cost 1%
    // of the pass on 8B 8x8, its lists being short.)
    SmallVector<unsigned, 8> needs;
    appendNeeds(v, skip, needs);
    targets.append(needs.begin(), needs.end());
  } else {
    for (const UseRef &use : usesOf(v))
      if (use.use->getOwner() != skip)
        targets.push_back(required(use));
  }
  double total = 0;
  for (size_t t = 0; t < targets.size(); ++t) {
    bool seen = false;
    for (size_t u = 0; u < t && !seen; ++u)
      seen = targets[u] == targets[t];
    if (!seen)
      total += cost.redistribute(type, from, targets[t]);
  }
  return total;
}

FunctionPropagation::LocalCosts
FunctionPropagation::localCosts(unsigned i, const SlotCosts &operandSeconds) {
  Operation *op = ops[i];
  LocalCosts parts;
  for (auto [k, v] : llvm::enumerate(op->getOperands())) {
    SmallVector<double, 8> &row = parts.operands.emplace_back();
    if (llvm::count(op->getOperands(), v) != 1)
      continue;
    // valueCost(v, from, op, {need}) for each slot: `need` first, then the
    // other uses' distinct targets in use order (the same sum, in the same
    // order), each weighed once.
    unsigned from = layoutOf(v);
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<unsigned, 8> needs;
    appendNeeds(v, op, needs);
    SmallVector<std::pair<unsigned, double>, 8> others;
    for (unsigned to : needs)
      others.push_back({to, cost.redistribute(type, from, to)});
    for (auto [slot, need] : llvm::enumerate(alikeOf[i]->operandLayouts[k])) {
      double total = 0;
      total += operandSeconds[k][slot];
      for (auto [to, seconds] : others)
        if (to != need)
          total += seconds;
      row.push_back(total);
    }
  }
  parts.results = &resultCosts(i);
  return parts;
}

FunctionPropagation::ResultCosts &FunctionPropagation::resultCosts(unsigned i) {
  // The uses' distinct targets, found once per alike op and targets.
  SmallVector<unsigned, 16> targets;
  for (Value v : ops[i]->getResults())
    appendUseLayouts(v, nullptr, targets);
  SmallString<128> key;
  auto [memo, fresh] = resultMemo.try_emplace(alikeKey(i, targets, key));
  ResultCosts &costs = memo->second;
  if (!fresh)
    return costs;
  ArrayRef<unsigned> rest = targets;
  for (unsigned r = 0; r < ops[i]->getNumResults(); ++r) {
    ArrayRef<unsigned> mine = rest.slice(1, rest.front());
    rest = rest.drop_front(1 + mine.size());
    costs.targets.emplace_back(mine.begin(), mine.end());
    costs.seconds.emplace_back(alikeOf[i]->resultLayouts[r].size(),
                               std::numeric_limits<double>::quiet_NaN());
  }
  return costs;
}

double FunctionPropagation::addResultCosts(unsigned i, unsigned s,
                                           ResultCosts &results, double total) {
  for (auto [r, slot] : llvm::enumerate(strategiesOf(i)[s].resultSlots)) {
    double &seconds = results.seconds[r][slot];
    if (std::isnan(seconds)) {
      // valueCost(result, layout): each distinct target once, in use order.
      auto type = cast<RankedTensorType>(ops[i]->getResult(r).getType());
      unsigned layout = alikeOf[i]->resultLayouts[r][slot];
      seconds = 0;
      for (unsigned to : results.targets[r])
        seconds += cost.redistribute(type, layout, to);
    }
    total += seconds;
  }
  return total;
}

double FunctionPropagation::ownCost(unsigned i, unsigned s,
                                    const LocalCosts &parts) {
  Operation *op = ops[i];
  const StrategyIds &strategy = strategiesOf(i)[s];
  double total = strategy.compute;
  // Each distinct operand value once, with every layout this op needs of it.
  for (auto [k, v] : llvm::enumerate(op->getOperands())) {
    if (!parts.operands[k].empty()) {
      total += parts.operands[k][strategy.operandSlots[k]];
      continue;
    }
    bool first = llvm::find(op->getOperands(), v) - op->operand_begin() ==
                 static_cast<ptrdiff_t>(k);
    if (!first)
      continue;
    SmallVector<unsigned, 2> mine;
    for (auto [j, w] : llvm::enumerate(op->getOperands()))
      if (w == v)
        mine.push_back(strategy.operands[j]);
    total += valueCost(v, layoutOf(v), op, mine);
  }
  return total;
}

/// Whether `v` is a factory's tensor of zeros (aten.full, aten.full_like
/// with fill_value 0): zeros on every rank are also Partial, of any
/// reduction, at no cost.
static bool isZeroFill(Value v) {
  Attribute fill;
  if (auto full = v.getDefiningOp<aten::FullOp>())
    fill = full.getFillValueAttr();
  else if (auto like = v.getDefiningOp<aten::FullLikeOp>())
    fill = like.getFillValueAttr();
  if (auto value = dyn_cast_or_null<FloatAttr>(fill))
    return value.getValue().isZero();
  if (auto value = dyn_cast_or_null<IntegerAttr>(fill))
    return value.getValue().isZero();
  return false;
}

/// Whether `v` is a bool tensor (where's condition, masked_fill's mask):
/// it selects elements, it is not a value a Partial could make Partial.
static bool isMask(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getElementType().isInteger(1);
}

StringRef FunctionPropagation::alikeKey(unsigned i, ArrayRef<unsigned> layouts,
                                        SmallVectorImpl<char> &buffer) const {
  const Alike *entry = alikeOf[i];
  buffer.assign(reinterpret_cast<const char *>(&entry),
                reinterpret_cast<const char *>(&entry + 1));
  buffer.append(reinterpret_cast<const char *>(layouts.begin()),
                reinterpret_cast<const char *>(layouts.end()));
  return StringRef(buffer.data(), buffer.size());
}

void FunctionPropagation::appendNeeds(Value v, Operation *skip,
                                      SmallVectorImpl<unsigned> &out) const {
  size_t start = out.size();
  ArrayRef<UseRef> uses = usesOf(v);
  if (!keepNeeds || reads || uses.size() < kManyUses) {
    for (const UseRef &use : uses) {
      if (use.use->getOwner() == skip)
        continue;
      unsigned to = required(use);
      if (!llvm::is_contained(ArrayRef(out).drop_front(start), to))
        out.push_back(to);
    }
    return;
  }
  auto [entry, fresh] = needsOf.try_emplace(v);
  Needs &needs = entry->second;
  if (fresh)
    for (auto [position, use] : llvm::enumerate(uses)) {
      unsigned to = required(use);
      auto it = llvm::find(needs.layouts, to);
      if (it == needs.layouts.end()) {
        needs.layouts.push_back(to);
        needs.positions.emplace_back();
        it = std::prev(needs.layouts.end());
      }
      needs.positions[it - needs.layouts.begin()].push_back(position);
      needs.positionOf[use.use] = position;
    }
  // The positions of skip's own uses of v; each layout then counts from
  // its first use outside them, and the layouts come in that order.
  SmallVector<unsigned, 2> skipped;
  if (skip)
    for (OpOperand &operand : skip->getOpOperands())
      if (operand.get() == v)
        skipped.push_back(needs.positionOf.lookup(&operand));
  SmallVector<std::pair<unsigned, unsigned>, 4> firsts;
  for (auto [layout, positions] : llvm::zip(needs.layouts, needs.positions))
    for (unsigned position : positions)
      if (!llvm::is_contained(skipped, position)) {
        firsts.push_back({position, layout});
        break;
      }
  llvm::sort(firsts);
  for (auto [position, layout] : firsts)
    out.push_back(layout);
}

void FunctionPropagation::appendUseLayouts(
    Value v, Operation *skip, SmallVectorImpl<unsigned> &out) const {
  size_t count = out.size();
  out.push_back(0);
  appendNeeds(v, skip, out);
  out[count] = out.size() - count - 1;
}

SmallVector<unsigned, 32> FunctionPropagation::neighbourhood(unsigned i) const {
  SmallVector<unsigned, 32> out;
  for (Value v : ops[i]->getOperands()) {
    out.push_back(layoutOf(v));
    appendUseLayouts(v, ops[i], out);
  }
  for (Value v : ops[i]->getResults())
    appendUseLayouts(v, nullptr, out);
  return out;
}

void FunctionPropagation::estimateForward() {
  // The cheapest estimated way to produce each value: its layout and cost.
  // Consumers weigh only that one, since every (layout, layout) pair weighed
  // is a redistribute plan to compute; the greedy start and the sweeps cover
  // what this estimate misses.
  DenseMap<Value, std::pair<unsigned, double>> best;
  best.reserve(ops.size());
  SmallVector<unsigned, 4> layouts;
  SmallVector<double, 4> upstreams;
  for (unsigned i = 0; i < ops.size(); ++i) {
    Operation *op = ops[i];
    const Alike &same = *alikeOf[i];
    layouts.clear();
    upstreams.clear();
    for (Value v : op->getOperands()) {
      auto it = best.find(v);
      auto [layout, upstream] =
          it == best.end() ? std::make_pair(layoutOf(v), 0.0) : it->second;
      layouts.push_back(layout);
      upstreams.push_back(upstream);
    }
    // Each strategy's compute, then per operand in order its slot's
    // cheapest production plus redistribution: operand by operand over
    // every strategy, the same sums as strategy by strategy. (Most
    // operands have about as many slots as the op has strategies.)
    std::vector<double> &estimates = estimate[i];
    estimates = same.computes;
    const SlotCosts &seconds = operandCosts(i, layouts);
    for (auto [k, row] : llvm::enumerate(seconds)) {
      const unsigned *slots = same.operandSlotColumns[k].data();
      const double *costs = row.data(), upstream = upstreams[k];
      for (size_t s = 0, e = estimates.size(); s < e; ++s)
        estimates[s] += upstream + costs[slots[s]];
    }
    // Per result, the cheapest layout; among equals the one that appeared
    // first in strategy order (the least slot).
    for (auto [r, v] : llvm::enumerate(op->getResults())) {
      const unsigned *slots = same.resultSlotColumns[r].data();
      double cheapest = kInf;
      unsigned slot = 0;
      for (size_t s = 0, e = estimates.size(); s < e; ++s)
        if (estimates[s] < cheapest ||
            (estimates[s] == cheapest && slots[s] < slot)) {
          cheapest = estimates[s];
          slot = slots[s];
        }
      best[v] = {same.resultLayouts[r][slot], cheapest};
    }
  }
}

void FunctionPropagation::chooseBackward() {
  for (unsigned i = ops.size(); i-- > 0;) {
    if (forced[i] >= 0) {
      choice[i] = forced[i];
      continue;
    }
    double bestCost = kInf;
    unsigned bestStrategy = 0;
    ResultCosts &results = resultCosts(i);
    for (unsigned s = 0; s < strategiesOf(i).size(); ++s) {
      // Costs are non-negative: a strategy whose estimate alone reaches the
      // best cost cannot beat it, and its results need no plans.
      if (estimate[i][s] >= bestCost)
        continue;
      double c = addResultCosts(i, s, results, estimate[i][s]);
      if (c < bestCost) {
        bestCost = c;
        bestStrategy = s;
      }
    }
    choice[i] = bestStrategy;
  }
}

const FunctionPropagation::SlotCosts &
FunctionPropagation::operandCosts(unsigned i, ArrayRef<unsigned> froms) {
  SmallString<128> key;
  auto [memo, fresh] = operandMemo.try_emplace(alikeKey(i, froms, key));
  if (!fresh)
    return memo->second;
  SlotCosts &costs = memo->second;
  for (auto [k, v] : llvm::enumerate(ops[i]->getOperands())) {
    SmallVector<double, 8> &row = costs.emplace_back();
    for (unsigned need : alikeOf[i]->operandLayouts[k])
      row.push_back(cost.redistribute(cast<RankedTensorType>(v.getType()),
                                      froms[k], need));
  }
  return costs;
}

const FunctionPropagation::SlotCosts &
FunctionPropagation::operandCosts(unsigned i) {
  SmallVector<unsigned, 4> froms;
  for (Value v : ops[i]->getOperands())
    froms.push_back(layoutOf(v));
  return operandCosts(i, froms);
}

double FunctionPropagation::operandCost(unsigned i, unsigned s,
                                        const SlotCosts &costs) {
  double total = 0;
  for (auto [k, slot] : llvm::enumerate(strategiesOf(i)[s].operandSlots))
    total += costs[k][slot];
  return total;
}

void FunctionPropagation::chooseGreedy(bool followShards, bool keepReplicated) {
  llvm::StringMap<unsigned> chosen;
  SmallString<128> key;
  for (unsigned i = 0; i < ops.size(); ++i) {
    if (forced[i] >= 0)
      continue;
    // Like DTensor's factories, ops without operands start Replicate: a
    // shard is then a free local slice wherever a consumer wants one.
    if (ops[i]->getNumOperands() == 0) {
      choice[i] = 0;
      continue;
    }
    // DTensor's order of preference: the least communication, then the
    // fewest operands to redistribute at all (a free slice of a replicated
    // operand commits its consumers to that shard), then (following shards)
    // no result sharded where no operand is, then the least compute.
    std::tuple<unsigned, unsigned, double, unsigned, unsigned, double> best{
        ~0u, ~0u, kInf, 0, 0, kInf};
    using Kind = layout::Placement::Kind;
    auto is = [&](unsigned layout, size_t m, Kind kind) {
      return cost.layout(layout)[m].kind == kind;
    };
    SmallVector<unsigned, 4> haves;
    // Operands that are zeros (Partial for free), or masks (bool: they
    // select, no Partial could flow into them): with tensor parallelism
    // kept replicated, neither is a replicated value a Partial must not be
    // carried beside (the zeros and the index mask of select backward).
    enum Inert : char { None, Mask, Zeros };
    SmallVector<char, 4> inert;
    for (Value v : ops[i]->getOperands()) {
      haves.push_back(layoutOf(v));
      inert.push_back(isZeroFill(v) ? Zeros : isMask(v) ? Mask : None);
    }
    // The layouts an operand is already redistributed to for the ops
    // chosen before this one: one redistribution serves every consumer
    // (the objective's rule), so taking one costs nothing more. A gradient
    // that clipping's norm reduce-scatters then reaches the update as that
    // shard, not reduce-scattered a second time.
    SmallVector<unsigned, 8> paid;
    SmallVector<unsigned, 4> paidEnd;
    for (auto [k, v] : llvm::enumerate(ops[i]->getOperands())) {
      for (const UseRef &use : usesOf(v))
        if (use.user < i) {
          unsigned need = required(use);
          if (need != haves[k] && !llvm::is_contained(paid, need))
            paid.push_back(need);
        }
      paidEnd.push_back(paid.size());
    }
    auto isPaid = [&](unsigned k, unsigned need) {
      return llvm::is_contained(
          ArrayRef(paid).slice(k ? paidEnd[k - 1] : 0,
                               paidEnd[k] - (k ? paidEnd[k - 1] : 0)),
          need);
    };
    bool optimizer = inOptimizer[i];
    // The choice is a function of the op's strategies, its operands'
    // layouts (with those paid for) and whether it updates the
    // parameters: alike ops met with the same layouts (every layer after
    // the first) take it from the first.
    alikeKey(i, haves, key);
    key.append(reinterpret_cast<const char *>(paidEnd.begin()),
               reinterpret_cast<const char *>(paidEnd.end()));
    key.append(reinterpret_cast<const char *>(paid.begin()),
               reinterpret_cast<const char *>(paid.end()));
    key.push_back(optimizer);
    key.append(inert.begin(), inert.end());
    auto [memo, fresh] =
        chosen.try_emplace(StringRef(key.data(), key.size()), 0);
    if (!fresh) {
      choice[i] = memo->second;
      continue;
    }
    // Mesh dims on which an operand arrives sharded: a shard to follow.
    SmallVector<bool, 4> arrivesSharded(meshRank, false);
    const SlotCosts &operandSeconds = operandCosts(i);
    for (unsigned have : haves)
      for (size_t m = 0; m < meshRank; ++m)
        arrivesSharded[m] =
            arrivesSharded[m] || cost.layout(have)[m].isShardLike();
    for (unsigned s = 0; s < strategiesOf(i).size(); ++s) {
      unsigned moved = 0, unreplicated = 0, resharded = 0;
      double seconds = 0;
      for (auto [k, have] : llvm::enumerate(haves)) {
        unsigned need = strategiesOf(i)[s].operands[k];
        if (have != need && isPaid(k, need))
          continue;
        seconds += operandSeconds[k][strategiesOf(i)[s].operandSlots[k]];
        moved += have != need;
        for (size_t m = 0; followShards && m < meshRank; ++m) {
          const layout::Placement &a = cost.layout(have)[m],
                                  &b = cost.layout(need)[m];
          // DTensor reduces a Partial that an op cannot carry to Replicate,
          // or to the shard another operand brings, never to a shard of its
          // own: a reduce_scatter whose shard the next op gathers again
          // costs two collectives for one all_reduce (the log of
          // loss_parallel's sum-exp). The optimizer updates each parameter
          // where it lives: a gradient reaches it reduce-scattered (FSDP's
          // post-backward), so there a Partial may become a shard.
          resharded += b.isShardLike() && a != b &&
                       (a.isShardLike() || (a.kind == Kind::Partial &&
                                            !arrivesSharded[m] && !optimizer));
        }
        for (size_t m = 0; keepReplicated && m < meshRank; ++m) {
          const layout::Placement &from = cost.layout(have)[m],
                                  &to = cost.layout(need)[m];
          // Zeros taken as Partial stay zeros: nothing replicated turns
          // Partial (the zeros select and slice backward scatter into).
          if (!replicatedDims[m] || from == to ||
              (inert[k] == Zeros && to.kind == Kind::Partial))
            continue;
          if (from.kind == Kind::Replicate)
            unreplicated += !to.isShardLike() || !arrivesSharded[m];
          else
            unreplicated += from.isShardLike() && to.isShardLike();
        }
      }
      for (size_t m = 0; keepReplicated && m < meshRank; ++m) {
        if (!replicatedDims[m])
          continue;
        // A Partial carried beside a replicated operand (layer norm's
        // backward): its replicated parameters' gradients turn Partial too.
        bool partial = false, replicated = false;
        for (auto [k, o] : llvm::enumerate(strategiesOf(i)[s].operands)) {
          partial = partial || is(o, m, Kind::Partial);
          replicated =
              replicated || (is(o, m, Kind::Replicate) && inert[k] == None);
        }
        unreplicated += partial && replicated;
        // A result sharded where no operand is (expand of the replicated
        // loss gradient): DTensor's strategies follow their operands.
        for (unsigned r : strategiesOf(i)[s].results)
          unreplicated +=
              cost.layout(r)[m].isShardLike() &&
              llvm::none_of(strategiesOf(i)[s].operands, [&](unsigned o) {
                return cost.layout(o)[m].isShardLike();
              });
      }
      // Following shards, a result is not sharded where no operand is (a
      // free slice of a replicated value, ViT's expanded [CLS] token): as
      // DTensor's strategies, it follows its operands.
      unsigned sliced = 0;
      for (size_t m = 0; followShards && m < meshRank; ++m)
        for (unsigned r : strategiesOf(i)[s].results)
          sliced += cost.layout(r)[m].isShardLike() &&
                    llvm::none_of(strategiesOf(i)[s].operands, [&](unsigned o) {
                      return cost.layout(o)[m].isShardLike();
                    });
      std::tuple<unsigned, unsigned, double, unsigned, unsigned, double> order{
          unreplicated, resharded, seconds,
          moved,        sliced,    strategiesOf(i)[s].compute};
      if (order < best) {
        best = order;
        choice[i] = s;
      }
    }
    memo->second = choice[i];
  }
}

double FunctionPropagation::totalCost() {
  double total = 0;
  for (unsigned i = 0; i < ops.size(); ++i)
    total += strategiesOf(i)[choice[i]].compute;
  for (BlockArgument arg : fn.getArguments())
    if (isa<RankedTensorType>(arg.getType()))
      total += valueCost(arg, layoutOf(arg));
  for (Operation *op : ops)
    for (Value v : op->getResults())
      total += valueCost(v, layoutOf(v));
  for (auto &[op, index] : redistributeIndex)
    total += valueCost(op->getResult(0), redistributed[index]);
  return total;
}

/// The distinct values an op of `region` reads or writes.
static SmallVector<Value, 16> regionValues(ArrayRef<Operation *> ops,
                                           ArrayRef<unsigned> region) {
  SmallVector<Value, 16> values;
  for (unsigned i : region) {
    for (Value v : ops[i]->getOperands())
      if (isa<RankedTensorType>(v.getType()) && !llvm::is_contained(values, v))
        values.push_back(v);
    for (Value v : ops[i]->getResults())
      if (!llvm::is_contained(values, v))
        values.push_back(v);
  }
  return values;
}

double FunctionPropagation::regionCost(ArrayRef<unsigned> region) {
  double total = 0;
  for (unsigned i : region)
    total += strategiesOf(i)[choice[i]].compute;
  for (Value v : regionValues(ops, region))
    total += valueCost(v, layoutOf(v));
  return total;
}

std::pair<int64_t, int64_t>
FunctionPropagation::regionVolume(ArrayRef<unsigned> region) {
  int64_t bytes = 0, collectives = 0;
  for (Value v : regionValues(ops, region)) {
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<unsigned, 4> targets;
    for (const UseRef &use : usesOf(v))
      if (unsigned to = required(use); !llvm::is_contained(targets, to))
        targets.push_back(to);
    for (unsigned to : targets) {
      auto [b, n] = cost.redistributeVolume(type, layoutOf(v), to);
      bytes += b;
      collectives += n;
    }
  }
  return {bytes, collectives};
}

/// Ops whose strategy splits the step's heavy compute (matrix products,
/// convolutions, attention, embeddings): the parallel mode's choice, which
/// chain moves leave alone. Re-placing them can trade a gradient's
/// reduce_scatter for a gather of activations, which at small sizes the
/// cost model prefers and FSDP's users do not expect.
static bool isContraction(Operation *op) {
  return op->hasTrait<aten::OpTrait::MatrixProduct>() ||
         isa<aten::ConvolutionOp, aten::ConvolutionBackwardOp,
             aten::ScaledDotProductFlashAttentionForCpuOp,
             aten::ScaledDotProductFlashAttentionForCpuBackwardOp,
             aten::EmbeddingOp, aten::EmbeddingDenseBackwardOp>(op);
}

bool FunctionPropagation::tryChain(unsigned i, unsigned result, unsigned want,
                                   SmallVectorImpl<Moved> &moved) {
  SmallVector<unsigned, kChainDepth> region, saved;
  auto restore = [&]() {
    for (auto [k, s] : llvm::zip(region, saved))
      choice[k] = s;
  };
  // Op k joins the region with strategy s: the change of the objective,
  // and whether the grown region is kept. A region is kept when it lowers
  // the objective with fewer collectives and no more bytes, a merge of
  // collectives: at small sizes the latency term alone would favour
  // gathering activations (or, under FSDP, gathering them instead of
  // reduce-scattering gradients). The part before op k joins is weighed
  // once per k (`befores`): it is the same for each of k's strategies
  // while the region stands.
  struct Before {
    unsigned op;
    double seconds;
    int64_t bytes, collectives;
  };
  SmallVector<Before, 8> befores;
  auto evaluate = [&](unsigned k, unsigned s) -> std::pair<double, bool> {
    SmallVector<unsigned, kChainDepth + 1> grown(region.begin(), region.end());
    grown.push_back(k);
    noteRead(k);
    unsigned mine = choice[k];
    auto known =
        llvm::find_if(befores, [&](const Before &b) { return b.op == k; });
    if (known == befores.end()) {
      SmallVector<unsigned, kChainDepth + 1> moved;
      for (unsigned c : region)
        moved.push_back(choice[c]);
      restore();
      double seconds = regionCost(grown);
      auto [bytes, collectives] = regionVolume(grown);
      for (auto [c, m] : llvm::zip(region, moved))
        choice[c] = m;
      befores.push_back({k, seconds, bytes, collectives});
      known = std::prev(befores.end());
    }
    double before = known->seconds;
    int64_t bytesBefore = known->bytes, collectivesBefore = known->collectives;
    choice[k] = s;
    double after = regionCost(grown);
    auto [bytes, collectives] = regionVolume(grown);
    choice[k] = mine;
    return {after - before, after < before - 1e-9 * before - 1e-15 &&
                                bytes <= bytesBefore &&
                                collectives < collectivesBefore};
  };
  // Candidate moves: (op, operand or result position, layout it must take
  // there), from the redistributions at the region's edge.
  struct Move {
    unsigned op;
    bool isResult;
    unsigned position, layout;
  };
  SmallVector<Move> moves = {{i, true, result, want}};
  while (region.size() < kChainDepth && !moves.empty()) {
    // Any move that completes a kept region is taken; otherwise the region
    // grows by the move that lowers the objective most (or raises it least).
    double bestSeconds = kInf;
    unsigned bestOp = 0, bestStrategy = 0;
    for (const Move &m : moves) {
      if (forced[m.op] >= 0 || llvm::is_contained(region, m.op) ||
          isContraction(ops[m.op]))
        continue;
      for (unsigned s = 0; s < strategiesOf(m.op).size(); ++s) {
        const StrategyIds &st = strategiesOf(m.op)[s];
        if ((m.isResult ? st.results : st.operands)[m.position] != m.layout)
          continue;
        auto [seconds, kept] = evaluate(m.op, s);
        if (kept) {
          for (auto [k, before] : llvm::zip(region, saved)) {
            moved.push_back({k, before, choice[k]});
            noteChange(k);
          }
          moved.push_back({m.op, choice[m.op], s});
          choice[m.op] = s;
          noteChange(m.op);
          return true;
        }
        if (seconds < bestSeconds) {
          bestSeconds = seconds;
          bestOp = m.op;
          bestStrategy = s;
        }
      }
    }
    if (bestSeconds == kInf)
      break;
    region.push_back(bestOp);
    saved.push_back(choice[bestOp]);
    choice[bestOp] = bestStrategy;
    befores.clear();
    // The redistributions at the region's edge: producers of its operands,
    // users of its results, and other users of its operands, each to take
    // the layout the region gives or needs.
    moves.clear();
    for (unsigned k : region) {
      for (auto [q, v] : llvm::enumerate(ops[k]->getOperands())) {
        unsigned need = strategiesOf(k)[choice[k]].operands[q];
        if (auto r = dyn_cast<OpResult>(v)) {
          auto it = index.find(r.getOwner());
          if (it != index.end() && layoutOf(v) != need)
            moves.push_back({it->second, true, r.getResultNumber(), need});
        }
        for (const UseRef &use : usesOf(v))
          if (use.user != kNotOp && use.user != k && required(use) != need)
            moves.push_back({use.user, false, use.operand, need});
      }
      for (Value v : ops[k]->getResults())
        for (const UseRef &use : usesOf(v)) {
          if (use.user != kNotOp && required(use) != layoutOf(v))
            moves.push_back({use.user, false, use.operand, layoutOf(v)});
        }
    }
  }
  restore();
  return false;
}

/// Templates kept per (alike op, result, wanted layout).
static constexpr size_t kChainTemplates = 8;

namespace {
/// chainFacts' tokens.
enum ChainFact : uint64_t {
  kSeenValue = 1ull << 62,
  kNewValue,
  kMemberResult,
  kOutsideResult,
  kOtherValue,
  kUsedOutside,
  kUses,
  kMemberUse,
  kOtherUse,
};
} // namespace

void FunctionPropagation::chainFacts(ArrayRef<unsigned> members,
                                     SmallVectorImpl<uint64_t> &facts) const {
  DenseMap<unsigned, unsigned> memberOf;
  for (auto [m, k] : llvm::enumerate(members))
    memberOf.try_emplace(k, m);
  DenseMap<Value, unsigned> valueIds;
  auto valueFacts = [&](Value v) {
    auto [seen, fresh] = valueIds.try_emplace(v, valueIds.size());
    if (!fresh) {
      facts.append({kSeenValue, seen->second});
      return;
    }
    facts.push_back(kNewValue);
    auto producer = index.find(v.getDefiningOp());
    if (producer == index.end()) {
      facts.append({kOtherValue, layoutOf(v)});
    } else {
      auto member = memberOf.find(producer->second);
      if (member == memberOf.end())
        facts.push_back(kOutsideResult);
      else
        facts.append({kMemberResult, member->second,
                      cast<OpResult>(v).getResultNumber()});
    }
    // A move that reads a value's uses reads each user's need: when an op
    // outside the members uses it, the move read none of them.
    for (OpOperand &use : v.getUses()) {
      auto user = index.find(use.getOwner());
      if (user != index.end() && !memberOf.count(user->second)) {
        facts.push_back(kUsedOutside);
        return;
      }
    }
    facts.push_back(kUses);
    for (OpOperand &use : v.getUses()) {
      auto user = index.find(use.getOwner());
      if (user != index.end())
        facts.append({kMemberUse, memberOf.find(user->second)->second,
                      use.getOperandNumber()});
      else
        facts.append({kOtherUse, required(use)});
    }
  };
  for (unsigned k : members) {
    facts.append({reinterpret_cast<uint64_t>(alikeOf[k]), choice[k],
                  static_cast<uint64_t>(static_cast<int64_t>(forced[k]))});
    for (Value v : ops[k]->getOperands())
      valueFacts(v);
    for (Value v : ops[k]->getResults())
      valueFacts(v);
  }
}

std::optional<FunctionPropagation::ChainTemplate>
FunctionPropagation::recordChain(unsigned i, ArrayRef<unsigned> read) const {
  ChainTemplate t;
  DenseMap<unsigned, unsigned> memberOf, wanted;
  for (unsigned k : read)
    wanted.try_emplace(k, 0);
  SmallVector<unsigned, 16> members = {i};
  memberOf.try_emplace(i, 0);
  // Breadth first from i through the ops read, in operand and use order.
  for (unsigned m = 0; m < members.size(); ++m) {
    Operation *op = ops[members[m]];
    auto visit = [&](Operation *owner, bool isResult, unsigned slot, int use) {
      auto it = index.find(owner);
      if (it == index.end() || !wanted.count(it->second) ||
          !memberOf.try_emplace(it->second, members.size()).second)
        return;
      members.push_back(it->second);
      t.steps.push_back({m, isResult, slot, use});
    };
    auto visitValue = [&](Value v, bool isResult, unsigned slot) {
      if (!isResult)
        visit(v.getDefiningOp(), false, slot, -1);
      int position = 0;
      for (OpOperand &use : v.getUses())
        visit(use.getOwner(), isResult, slot, position++);
    };
    for (auto [q, v] : llvm::enumerate(op->getOperands()))
      visitValue(v, false, q);
    for (auto [r, v] : llvm::enumerate(op->getResults()))
      visitValue(v, true, r);
  }
  if (members.size() != memberOf.size() ||
      llvm::any_of(read, [&](unsigned k) { return !memberOf.count(k); }))
    return std::nullopt;
  for (unsigned k : members)
    t.alikes.push_back(alikeOf[k]);
  for (unsigned k : read)
    t.readOrder.push_back(memberOf.find(k)->second);
  chainFacts(members, t.facts);
  return t;
}

std::optional<SmallVector<unsigned, 16>>
FunctionPropagation::matchChain(const ChainTemplate &t, unsigned i) const {
  SmallVector<unsigned, 16> members = {i};
  DenseMap<unsigned, unsigned> memberOf;
  memberOf.try_emplace(i, 0);
  for (const ChainTemplate::Step &step : t.steps) {
    Operation *parent = ops[members[step.parent]];
    if (step.slot >=
        (step.isResult ? parent->getNumResults() : parent->getNumOperands()))
      return std::nullopt;
    Value v = step.isResult ? Value(parent->getResult(step.slot))
                            : parent->getOperand(step.slot);
    Operation *owner = nullptr;
    if (step.use < 0) {
      owner = v.getDefiningOp();
    } else {
      int position = 0;
      for (OpOperand &use : v.getUses())
        if (position++ == step.use) {
          owner = use.getOwner();
          break;
        }
    }
    auto it = index.find(owner);
    if (!owner || it == index.end() ||
        alikeOf[it->second] != t.alikes[members.size()] ||
        !memberOf.try_emplace(it->second, members.size()).second)
      return std::nullopt;
    members.push_back(it->second);
  }
  SmallVector<uint64_t, 64> facts;
  chainFacts(members, facts);
  if (facts != t.facts)
    return std::nullopt;
  SmallVector<unsigned, 16> read;
  for (unsigned m : t.readOrder)
    read.push_back(members[m]);
  return read;
}

bool FunctionPropagation::sweepChains() {
  bool changed = false;
  for (unsigned i = 0; i < ops.size(); ++i)
    for (auto [r, v] : llvm::enumerate(ops[i]->getResults())) {
      unsigned from = layoutOf(v);
      SmallVector<unsigned, 4> wanted;
      for (const UseRef &use : usesOf(v)) {
        unsigned to = required(use);
        if (to != from && !llvm::is_contained(wanted, to))
          wanted.push_back(to);
      }
      for (unsigned want : wanted) {
        // A move that failed before fails again while none of the choices
        // it read has changed: it is a function of them.
        auto key = std::make_tuple(i, static_cast<unsigned>(r), want);
        auto failed = failedChains.find(key);
        if (failed != failedChains.end() &&
            llvm::all_of(failed->second.reads, [&](unsigned k) {
              return changedAt[k] <= failed->second.at;
            }))
          continue;
        SmallVector<ChainTemplate, 1> &templates =
            chainTemplates[std::make_tuple(alikeOf[i], r, want)];
        std::optional<SmallVector<unsigned, 16>> matched;
        const ChainTemplate *match = nullptr;
        for (const ChainTemplate &t : templates)
          if ((matched = matchChain(t, i))) {
            match = &t;
            break;
          }
        if (matched && !match->kept.empty()) {
          // The alike move was kept: this one re-places the same ops alike.
          for (auto [position, strategy] : match->kept) {
            choice[(*matched)[position]] = strategy;
            noteChange((*matched)[position]);
          }
          changed = true;
          break;
        }
        if (matched) {
          failedChains[key] = {
              version, std::vector<unsigned>(matched->begin(), matched->end())};
          continue;
        }
        SmallVector<unsigned, 16> read;
        SmallVector<Moved, kChainDepth> moved;
        reads = &read;
        ++readEpoch;
        bool kept = tryChain(i, r, want, moved);
        reads = nullptr;
        if (kept) {
          if (templates.size() < kChainTemplates) {
            // The template holds the facts the move read, from before it.
            for (const Moved &m : moved)
              choice[m.op] = m.before;
            std::optional<ChainTemplate> t = recordChain(i, read);
            for (const Moved &m : moved)
              choice[m.op] = m.after;
            if (t) {
              for (const Moved &m : moved)
                t->kept.push_back({static_cast<unsigned>(
                                       llvm::find(read, m.op) - read.begin()),
                                   m.after});
              templates.push_back(std::move(*t));
            }
          }
          changed = true;
          break;
        }
        if (templates.size() < kChainTemplates)
          if (std::optional<ChainTemplate> t = recordChain(i, read))
            templates.push_back(std::move(*t));
        failedChains[key] = {version,
                             std::vector<unsigned>(read.begin(), read.end())};
      }
    }
  return changed;
}

unsigned FunctionPropagation::sweepChoice(unsigned i) {
  // Equal within rounding.
  auto same = [](double a, double b) {
    return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b)) + 1e-15;
  };
  unsigned current = choice[i], bestStrategy = current;
  const SlotCosts &operandSeconds = operandCosts(i);
  LocalCosts parts = localCosts(i, operandSeconds);
  double bestCost = localCost(i, current, parts);
  double bestOperands = operandCost(i, current, operandSeconds);
  for (unsigned s = 0; s < strategiesOf(i).size(); ++s) {
    if (s == current)
      continue;
    // Costs are non-negative, so ownCost bounds localCost from below (in
    // floating point too: adding them rounds monotonically): past the best
    // cost's rounding window the strategy cannot be better, and its
    // results need no plans.
    double own = ownCost(i, s, parts);
    if (own > bestCost && !same(own, bestCost))
      continue;
    double c = addResultCosts(i, s, *parts.results, own),
           operands = operandCost(i, s, operandSeconds);
    // Only a strict improvement moves, so sweeps end. At equal cost the
    // strategy that redistributes less of its own operands wins: the
    // communication moves to later consumers, so a Partial stays lazy
    // until one needs it reduced.
    bool better = same(c, bestCost)
                      ? operands < bestOperands && !same(operands, bestOperands)
                      : c < bestCost;
    if (better) {
      bestCost = c;
      bestOperands = operands;
      bestStrategy = s;
    }
  }
  return bestStrategy;
}

bool FunctionPropagation::sweep() {
  bool changed = false;
  for (unsigned i = 0; i < ops.size(); ++i) {
    if (forced[i] >= 0 || !dirty[i])
      continue;
    dirty[i] = false;
    unsigned current = choice[i];
    SmallVector<unsigned, 32> seen = neighbourhood(i);
    seen.push_back(current);
    SmallString<128> key;
    auto [memo, fresh] = swept.try_emplace(alikeKey(i, seen, key), current);
    if (fresh)
      memo->second = sweepChoice(i);
    choice[i] = memo->second;
    if (choice[i] != current) {
      changed = true;
      noteChange(i);
      markNeighbours(i);
    }
  }
  return changed;
}

void FunctionPropagation::markNeighbours(unsigned i) {
  auto mark = [&](Operation *op) {
    auto it = index.find(op);
    if (it != index.end())
      dirty[it->second] = true;
  };
  for (Value v : ops[i]->getOperands()) {
    if (Operation *def = v.getDefiningOp())
      mark(def);
    for (Operation *user : v.getUsers())
      mark(user);
  }
  for (Value v : ops[i]->getResults())
    for (Operation *user : v.getUsers())
      mark(user);
}

LogicalResult FunctionPropagation::run() {
  replicateLayout = cost.intern(replicated(meshRank));
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    argLayouts.push_back(
        cost.intern(placementsOf(fn.getArgAttrDict(i), meshRank)));
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    resultLayouts.push_back(
        cost.intern(placementsOf(fn.getResultAttrDict(i), meshRank)));

  // StridedShard layouts in flight: the ops may take them as they are
  // (enumerateStrategies' twins). The arguments' reach every op; those that
  // ops produce (merging views, packed splits and cats) reach the ops
  // downstream of them, carried by values with a dim of their size, so an
  // op far from attention gets no twins for the heads' factors.
  SmallVector<SplitFactor> argFactors;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    for (const layout::Placement &p : cost.layout(argLayouts[i]))
      addSplitFactor(p, fn.getArgumentTypes()[i], argFactors);
  SmallVector<int64_t> packedFactors;
  for (const SplitFactor &f : argFactors)
    if (!llvm::is_contained(packedFactors, f.factor))
      packedFactors.push_back(f.factor);
  DenseMap<Value, SmallVector<SplitFactor, 2>> reaching;
  auto incoming = [&](Operation *op) {
    SmallVector<SplitFactor> factors = argFactors;
    for (Value v : op->getOperands()) {
      auto it = reaching.find(v);
      if (it == reaching.end())
        continue;
      for (const SplitFactor &f : it->second)
        if (!llvm::is_contained(factors, f))
          factors.push_back(f);
    }
    return factors;
  };
  // The split factors of the StridedShards of `layouts` (addSplitFactor),
  // for a value of `type`.
  auto addSplitFactors = [](const Placements &layouts, Type type,
                            SmallVector<SplitFactor, 2> &out) {
    if (isa<RankedTensorType>(type))
      for (const layout::Placement &p : layouts)
        addSplitFactor(p, type, out);
  };
  // `factors` that fit a dim of `v`, and `produced`: the split factors of
  // the layouts its producer gives it.
  auto carry = [&](Value v, ArrayRef<SplitFactor> factors,
                   ArrayRef<SplitFactor> produced) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type)
      return;
    SmallVector<SplitFactor, 2> &out = reaching[v];
    for (const SplitFactor &f : factors)
      if (llvm::is_contained(type.getShape(), f.size) &&
          !llvm::is_contained(out, f))
        out.push_back(f);
    for (const SplitFactor &f : produced)
      if (!llvm::is_contained(out, f))
        out.push_back(f);
  };

  WalkResult walk = fn.walk([&](Operation *op) {
    if (op == fn || isa<func::ReturnOp>(op))
      return WalkResult::advance();
    if (auto fixed = getFixedLayoutChange(op)) {
      redistributeIndex[op] = redistributed.size();
      redistributed.push_back(cost.intern(fixed->second.getLayoutPlacements()));
      SmallVector<SplitFactor, 2> produced;
      addSplitFactors(fixed->second.getLayoutPlacements(),
                      op->getResult(0).getType(), produced);
      carry(op->getResult(0), incoming(op), produced);
      return WalkResult::advance();
    }
    bool hasTensors =
        llvm::any_of(op->getOperandTypes(), llvm::IsaPred<TensorType>) ||
        llvm::any_of(op->getResultTypes(), llvm::IsaPred<TensorType>);
    if (!hasTensors ||
        (op->getNumOperands() == 0 && op->hasTrait<OpTrait::ConstantLike>()))
      return WalkResult::advance();
    SmallVector<SplitFactor> factors = incoming(op);
    SmallVector<uintptr_t, 32> key = {
        reinterpret_cast<uintptr_t>(op->getName().getAsOpaquePointer()),
        op->getNumOperands()};
    for (StringAttr name : op->getName().getAttributeNames()) {
      std::optional<Attribute> attr = op->getInherentAttr(name);
      key.push_back(reinterpret_cast<uintptr_t>(
          attr ? attr->getAsOpaquePointer() : nullptr));
    }
    for (TypeRange types :
         {TypeRange(op->getOperandTypes()), TypeRange(op->getResultTypes())})
      for (Type t : types)
        key.push_back(reinterpret_cast<uintptr_t>(t.getAsOpaquePointer()));
    for (const SplitFactor &f : factors) {
      key.push_back(f.size);
      key.push_back(f.factor);
    }
    auto [entry, inserted] =
        alike.try_emplace(StringRef(reinterpret_cast<const char *>(key.data()),
                                    key.size() * sizeof(uintptr_t)));
    Alike &same = entry->second;
    if (inserted) {
      same.producedFactors.resize(op->getNumResults());
      same.operandLayouts.resize(op->getNumOperands());
      same.resultLayouts.resize(op->getNumResults());
      auto slotOf = [](SmallVector<unsigned, 8> &layouts, unsigned id) {
        auto it = llvm::find(layouts, id);
        if (it != layouts.end())
          return static_cast<unsigned>(it - layouts.begin());
        layouts.push_back(id);
        return static_cast<unsigned>(layouts.size() - 1);
      };
      auto add = [&](const MeshStrategy &s) {
        StrategyIds &strategy = same.ids.emplace_back();
        for (auto [k, p] : llvm::enumerate(s.operands)) {
          strategy.operands.push_back(cost.intern(p));
          strategy.operandSlots.push_back(
              slotOf(same.operandLayouts[k], strategy.operands.back()));
        }
        for (auto [r, p] : llvm::enumerate(s.results)) {
          strategy.results.push_back(cost.intern(p));
          strategy.resultSlots.push_back(
              slotOf(same.resultLayouts[r], strategy.results.back()));
          addSplitFactors(p, op->getResultTypes()[r], same.producedFactors[r]);
        }
        strategy.compute = cost.compute(op, s);
      };
      if (failed(forEachStrategy(op, cost.getMeshShape(), factors,
                                 packedFactors, add))) {
        op->emitOpError("has no sharding rule: cannot propagate layouts "
                        "through it");
        return WalkResult::interrupt();
      }
      same.operandSlotColumns.resize(op->getNumOperands());
      same.resultSlotColumns.resize(op->getNumResults());
      for (const StrategyIds &strategy : same.ids) {
        for (auto [k, slot] : llvm::enumerate(strategy.operandSlots))
          same.operandSlotColumns[k].push_back(slot);
        for (auto [r, slot] : llvm::enumerate(strategy.resultSlots))
          same.resultSlotColumns[r].push_back(slot);
        same.computes.push_back(strategy.compute);
      }
    }
    for (auto [r, v] : llvm::enumerate(op->getResults()))
      carry(v, factors, same.producedFactors[r]);
    int force = -1;
    if (auto attr = op->getAttrOfType<IntegerAttr>("spmd.strategy")) {
      force = attr.getInt();
      if (force < 0 || force >= static_cast<int>(same.ids.size())) {
        op->emitOpError("spmd.strategy = ")
            << force << " is out of range: the op has " << same.ids.size()
            << " strategies on this mesh";
        return WalkResult::interrupt();
      }
    }
    // An op that computes on whole values (Muon's Newton-Schulz iteration)
    // runs its strategy with every operand and result Replicate.
    if (op->hasAttr(SPMDDialect::getReplicatedAttrName())) {
      auto replicated = [&](ArrayRef<unsigned> ids) {
        return llvm::all_of(ids,
                            [&](unsigned id) { return id == replicateLayout; });
      };
      auto it = llvm::find_if(same.ids, [&](const StrategyIds &s) {
        return replicated(s.operands) && replicated(s.results);
      });
      int whole = static_cast<int>(it - same.ids.begin());
      if (it == same.ids.end() || (force >= 0 && force != whole)) {
        op->emitOpError(it == same.ids.end()
                            ? "is spmd.replicated but has no strategy with "
                              "every operand and result Replicate"
                            : "has spmd.strategy and spmd.replicated, which "
                              "name different strategies");
        return WalkResult::interrupt();
      }
      force = whole;
    }
    index[op] = ops.size();
    ops.push_back(op);
    inOptimizer.push_back(getPhase(op) == "optimizer");
    alikeOf.push_back(&same);
    forced.push_back(force);
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  auto addUses = [&](Value v) {
    SmallVector<UseRef, 2> &refs = useRefs[v];
    for (OpOperand &use : v.getUses()) {
      auto it = index.find(use.getOwner());
      refs.push_back({&use, it == index.end() ? kNotOp : it->second,
                      use.getOperandNumber()});
    }
  };
  for (BlockArgument arg : fn.getArguments())
    addUses(arg);
  fn.walk([&](Operation *op) {
    for (Value v : op->getResults())
      addUses(v);
  });

  estimate.resize(ops.size());
  choice.assign(ops.size(), 0);
  for (unsigned i = 0; i < ops.size(); ++i)
    if (forced[i] >= 0)
      choice[i] = forced[i];
  bool batchArgs = false;
  replicatedDims.assign(meshRank, true);
  for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
    auto role = fn.getArgAttrOfType<StringAttr>(i, "spmd.role");
    if (!role || (role.getValue() != "input" && role.getValue() != "target"))
      continue;
    batchArgs = true;
    for (size_t m = 0; m < meshRank; ++m)
      replicatedDims[m] =
          replicatedDims[m] && cost.layout(argLayouts[i])[m].kind ==
                                   layout::Placement::Kind::Replicate;
  }
  bool anyReplicated = batchArgs && llvm::is_contained(replicatedDims, true);
  // DTensor's own choice, when the search starts from it: forcing its
  // forward changes none of its inputs, so the start that follows shards
  // below is this choice again.
  std::optional<std::vector<unsigned>> dtensorChoice;
  if (search != "cost") {
    chooseGreedy(/*followShards=*/true, /*keepReplicated=*/false);
    if (search == "greedy")
      return success();
    dtensorChoice = choice;
    // greedy-forward: the forward keeps DTensor's choice.
    for (unsigned i = 0; i < ops.size(); ++i)
      if (forced[i] < 0 && getPhase(ops[i]) == "forward")
        forced[i] = choice[i];
  }
  // Starting points, the cheapest is refined: the whole-graph estimate;
  // the greedy choice (which finds the plain data-parallel plan where the
  // estimate's double counting on a DAG can lead elsewhere), also following
  // shards as DTensor does; and, with tensor parallelism, the greedy
  // choice that keeps replicated values replicated (Megatron's backward,
  // which single-op sweeps cannot reach from a lazy Partial).
  estimateForward();
  chooseBackward();
  std::vector<unsigned> best = choice;
  double bestCost = totalCost();
  for (auto [followShards, keepReplicated] :
       {std::pair(false, false), std::pair(true, false),
        std::pair(true, true)}) {
    if (keepReplicated && !anyReplicated)
      break;
    if (followShards && !keepReplicated && dtensorChoice)
      choice = *dtensorChoice;
    else
      chooseGreedy(followShards, keepReplicated);
    double c = totalCost();
    if (c < bestCost) {
      bestCost = c;
      best = choice;
    }
  }
  choice = std::move(best);
  dirty.assign(ops.size(), true);
  changedAt.assign(ops.size(), 0);
  readAt.assign(ops.size(), 0);
  needsOf.clear();
  keepNeeds = true;
  for (unsigned n = 0; n < maxSweeps; ++n) {
    bool moved = sweep();
    std::vector<unsigned> before = choice;
    if (!sweepChains() && !moved)
      break;
    for (unsigned i = 0; i < ops.size(); ++i)
      if (choice[i] != before[i])
        markNeighbours(i);
  }
  return success();
}

/// "batch statistics of '<module>'" (" (backward)" in backward) when `v`
/// is computed in a BatchNorm module (a subclass of torch's _BatchNorm in
/// the step's `spmd.modules`): its Partial is a sum over the batch, which
/// capture writes as reductions so that data parallelism normalizes with
/// the whole batch's statistics.
static std::optional<std::string> batchStatistics(Value v) {
  Operation *def = v.getDefiningOp();
  auto module = def ? def->getAttrOfType<StringAttr>("spmd.module") : nullptr;
  auto fn = def ? def->getParentOfType<func::FuncOp>() : nullptr;
  auto modules =
      fn ? fn->getAttrOfType<DictionaryAttr>("spmd.modules") : DictionaryAttr();
  if (!module || !modules)
    return std::nullopt;
  auto info = modules.getAs<DictionaryAttr>(module.getValue());
  auto classes = info ? info.getAs<ArrayAttr>("classes") : ArrayAttr();
  if (!classes || llvm::none_of(classes, [](Attribute c) {
        auto name = dyn_cast<StringAttr>(c);
        return name && name.getValue() == "_BatchNorm";
      }))
    return std::nullopt;
  std::string reason = "batch statistics of '" + module.str() + "'";
  if (getPhase(def) == "backward")
    reason += " (backward)";
  return reason;
}

LogicalResult FunctionPropagation::materialize(FlatSymbolRefAttr mesh) {
  MLIRContext *ctx = fn.getContext();
  // Each interned layout's attribute, built once.
  std::vector<LayoutAttr> attrOf;
  auto layoutAttr = [&](unsigned id) {
    if (id >= attrOf.size())
      attrOf.resize(id + 1);
    if (!attrOf[id])
      attrOf[id] = getLayoutAttr(mesh, cost.layout(id));
    return attrOf[id];
  };
  // Fixed redistributes whose operand already has their `to` (required()):
  // the global value is the same, so they go.
  SmallVector<RedistributeOp> satisfied;
  for (auto &[op, index] : redistributeIndex)
    if (auto r = dyn_cast<RedistributeOp>(op))
      if (layoutOf(r.getInput()) == redistributed[index])
        satisfied.push_back(r);
  // Values with the layouts their uses need, in program order.
  SmallVector<Value> values(fn.getArguments().begin(), fn.getArguments().end());
  fn.walk([&](Operation *op) {
    if (op != fn)
      values.append(op->result_begin(), op->result_end());
  });
  for (Value v : values) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type)
      continue;
    unsigned from = layoutOf(v);
    // Group the uses by the layout they need.
    SmallVector<std::pair<unsigned, SmallVector<OpOperand *>>> groups;
    for (OpOperand &use : v.getUses()) {
      unsigned to = required(use);
      if (to == from)
        continue;
      auto it = llvm::find_if(groups, [&](auto &g) { return g.first == to; });
      if (it == groups.end())
        groups.push_back({to, {&use}});
      else
        it->second.push_back(&use);
    }
    for (auto &[to, uses] : groups) {
      OpOperand *first =
          *llvm::min_element(uses, [](OpOperand *a, OpOperand *b) {
            return a->getOwner()->isBeforeInBlock(b->getOwner());
          });
      Operation *user = first->getOwner();
      if (cost.redistribute(type, from, to) == kInf)
        return user->emitOpError("operand ")
               << first->getOperandNumber() << " needs layout "
               << layout::placementsStr(cost.layout(to)) << " but gets "
               << layout::placementsStr(cost.layout(from))
               << ", and no redistribution connects them";
      OpBuilder b(user);
      // A constraint says why it exists (a TP style's boundary).
      auto why = isa<ShardingConstraintOp>(user)
                     ? user->getAttrOfType<StringAttr>("spmd.reason")
                     : StringAttr();
      std::string reason =
          why ? why.str()
              : "operand " + std::to_string(first->getOperandNumber()) +
                    " of " + user->getName().getStringRef().str();
      if (!why && llvm::any_of(cost.layout(from), [](const auto &p) {
            return p.kind == layout::Placement::Kind::Partial;
          }))
        if (std::optional<std::string> stats = batchStatistics(v))
          reason = *stats;
      if (user->hasAttr(SPMDDialect::getReplicatedAttrName()))
        reason += ", which computes on whole values (spmd.replicated)";
      auto r = RedistributeOp::create(b, user->getLoc(), type, v,
                                      layoutAttr(from), layoutAttr(to));
      copyProvenance(user, r);
      r->setAttr("spmd.reason", StringAttr::get(ctx, reason));
      for (OpOperand *use : uses)
        use->set(r.getResult());
    }
  }
  for (RedistributeOp r : satisfied) {
    r.getResult().replaceAllUsesWith(r.getInput());
    r->erase();
  }
  auto layoutsName = StringAttr::get(ctx, "spmd.layouts");
  auto strategyName = StringAttr::get(ctx, "spmd.strategy");
  // Each chosen strategy's result layouts, built once.
  DenseMap<const StrategyIds *, ArrayAttr> resultsAttr;
  for (auto [i, op] : llvm::enumerate(ops)) {
    const StrategyIds &chosen = strategiesOf(i)[choice[i]];
    ArrayAttr &layouts = resultsAttr[&chosen];
    if (!layouts) {
      SmallVector<Attribute> attrs;
      for (unsigned id : chosen.results)
        attrs.push_back(layoutAttr(id));
      layouts = ArrayAttr::get(ctx, attrs);
    }
    op->setAttr(layoutsName, layouts);
    if (op->hasAttr(strategyName))
      op->removeAttr(strategyName);
  }
  SmallVector<Attribute> args, results;
  for (unsigned id : argLayouts)
    args.push_back(layoutAttr(id));
  for (unsigned id : resultLayouts)
    results.push_back(layoutAttr(id));
  setArgLayouts(fn, args);
  setResultLayouts(fn, results);
  return success();
}

struct PropagatePass : spmd::impl::PropagatePassBase<PropagatePass> {
  using PropagatePassBase::PropagatePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (search != "cost" && search != "greedy" && search != "greedy-forward") {
      module.emitError("spmd-propagate: search '")
          << search << "' is not cost, greedy or greedy-forward";
      return signalPassFailure();
    }
    MeshOp mesh = getOnlyMesh(module, "spmd-propagate");
    if (!mesh || failed(verifyPartitionable(module, "spmd-propagate")))
      return signalPassFailure();
    std::vector<int64_t> meshShape(mesh.getShape().begin(),
                                   mesh.getShape().end());
    FailureOr<layout::MeshCostModel> model =
        getMeshCostModel(mesh, latency, bandwidth, "spmd-propagate");
    if (failed(model))
      return signalPassFailure();
    CostModel cost(meshShape, *model, flops, memoryBandwidth);
    auto meshRef = FlatSymbolRefAttr::get(mesh.getSymNameAttr());
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      FunctionPropagation propagation(fn, cost, maxSweeps, search);
      if (failed(propagation.run()) || failed(propagation.materialize(meshRef)))
        return signalPassFailure();
    }
  }
};

} // namespace
