//===- Partition.cpp - the global program becomes the per-rank program ----===//
//
// --spmd-partition (Passes.td, docs/partition.md).
//
//===----------------------------------------------------------------------===//

#include "spmd/Partition/Passes.h"
#include "spmd/Propagate/Strategy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <deque>
#include <limits>
#include <map>

namespace spmd {
#define GEN_PASS_DEF_PARTITIONPASS
#include "spmd/Partition/Passes.h.inc"
} // namespace spmd

using namespace mlir;
using namespace spmd;
using layout::Placement;
using Step = layout::RedistributeStep;

namespace {

/// `count` positions of a `spmd.local_take` row: `start`, `start + 1`, ...
/// of the input, or fill where `start` is -1.
struct Run {
  int64_t start, count;
};
/// A row as maximal runs (appendRun merges), so that its size grows with
/// the pieces of a layout, not with the size of the tensor.
using Row = SmallVector<Run, 4>;

/// Appends a run to `row`, merging it into the last one when it continues
/// it.
void appendRun(Row &row, int64_t start, int64_t count) {
  if (count <= 0)
    return;
  if (!row.empty()) {
    Run &last = row.back();
    bool fill = start == -1, lastFill = last.start == -1;
    if (fill == lastFill && (fill || last.start + last.count == start)) {
      last.count += count;
      return;
    }
  }
  row.push_back({start, count});
}

/// A per-rank index table (`spmd.local_take`'s), each distinct row stored
/// once: rank r's row is `rows[rowOf[r]]`, and every row has the same
/// length. Tables have a few distinct rows however many ranks there are.
struct RankTable {
  std::vector<Row> rows;
  std::vector<unsigned> rowOf;
};

/// A table as `spmd.local_take` takes it: its size along the dim, whether
/// each row keeps every wanted element in place (no take needed where the
/// input has that size), and its per-rank `indices` or (compact) `starts`
/// and `counts`.
struct TakeForm {
  int64_t size = 0;
  bool rowsInPlace = false;
  DenseI64ArrayAttr indices, starts, counts;
  /// `starts` and `counts` are one rank's runs, which every rank takes.
  bool uniform = false;
};

/// Rewrites one function; the mesh is fixed for the module.
class Partitioner {
public:
  Partitioner(MeshOp mesh)
      : meshRef(FlatSymbolRefAttr::get(mesh.getSymNameAttr())),
        layoutsName(StringAttr::get(mesh.getContext(), "spmd.layouts")),
        meshShape(mesh.getShape().begin(), mesh.getShape().end()),
        numRanks(layout::numRanks(meshShape)),
        cost(layout::MeshCostModel::defaults(meshShape.size())) {
    strides.assign(meshShape.size(), 1);
    for (size_t m = meshShape.size(); m-- > 1;)
      strides[m - 1] = strides[m] * meshShape[m];
  }

  LogicalResult run(func::FuncOp fn);

private:
  /// The per-rank type of `global` laid out as `p`, an interned layout
  /// (memoized: every layer of a transformer has the same types and
  /// layouts).
  RankedTensorType localType(RankedTensorType global, const Placements &p);
  /// The intervals of global indices along `dim` that `rank` holds, in
  /// local order (kept for the pass: the reference stays valid).
  const std::vector<layout::Interval> &positions(RankedTensorType global,
                                                 const Placements &p,
                                                 int64_t rank,
                                                 int64_t dim) const;
  /// `rank`'s coordinate along mesh dim `m` (row-major ranks, as
  /// layout::rankToCoords).
  int64_t coordOf(int64_t rank, int64_t m) const {
    return rank / strides[m] % meshShape[m];
  }
  /// Each rank's piece of `global`, laid out as `p`, along each of `dims`
  /// as one interval (empty where it holds none), rank-major; none where
  /// some piece is not contiguous (a StridedShard).
  std::optional<std::vector<layout::Interval>>
  contiguousPieces(RankedTensorType global, const Placements &p,
                   ArrayRef<int64_t> dims) const;
  /// Linear rank of `rank`'s group member `j` along mesh dim `m`.
  int64_t member(int64_t rank, int64_t m, int64_t j) const {
    return rank + (j - coordOf(rank, m)) * strides[m];
  }
  /// The per-rank index table that lays out `blocks` blocks of `width`
  /// positions, block j holding the global indices `want(r, j)` taken from
  /// where `have(r, j)` (source block j's global indices, at offset j *
  /// `sourceWidth`) holds them; fill where nothing is wanted. `want` and
  /// `have` give intervals and may depend only on a rank's coordinates
  /// along `keyDims`: one row is computed per distinct coordinates there,
  /// in time of the intervals, not of the tensor's size.
  template <typename WantFn, typename HaveFn>
  RankTable table(int64_t blocks, int64_t width, int64_t sources,
                  int64_t sourceWidth, WantFn want, HaveFn have,
                  ArrayRef<int64_t> keyDims) const;
  /// `spmd.local_take` of `input` along `dim`, skipped when the table keeps
  /// every wanted element in place and `maskPadding` is off.
  Value take(OpBuilder &b, Location loc, Value input, int64_t dim,
             const RankTable &indices, double fill, bool maskPadding) {
    return take(b, loc, input, dim, takeForm(indices, maskPadding), fill);
  }
  TakeForm takeForm(const RankTable &indices, bool maskPadding) const;
  Value take(OpBuilder &b, Location loc, Value input, int64_t dim,
             const TakeForm &form, double fill);
  /// The steps of a redistribution, on local values.
  FailureOr<Value> redistribute(RedistributeOp op, Value input);
  Value step(OpBuilder &b, Location loc, Value input, RankedTensorType global,
             const Step &s, StringAttr reason);
  /// Zeroes (or sets to `fill`) the padding of operands that the op sums
  /// over.
  void maskReducedOperands(Operation *op);
  LogicalResult rewriteOp(Operation *op);
  void expandMeanNllLoss(aten::NllLossForwardOp op);
  LogicalResult setRandomOffsets(Operation *op);
  /// Gives an op whose operand or result `table` is laid out as `p` with
  /// dim `dim` sharded the per-rank {first, count, size} of that dim as
  /// attribute `name`: an embedding (or its backward) its vocabulary rows,
  /// `spmd.vocab_rows`; nll_loss (or its backward) its classes,
  /// `spmd.class_rows`.
  LogicalResult setShardRows(Operation *op, const Placements &p,
                             RankedTensorType table, int64_t dim,
                             StringRef name);

  FlatSymbolRefAttr meshRef;
  StringAttr layoutsName;
  std::vector<int64_t> meshShape;
  /// Rank distance between neighbours along each mesh dim.
  std::vector<int64_t> strides;
  int64_t numRanks;
  layout::MeshCostModel cost;
  /// Each distinct layout once (its address names it), and the layouts
  /// read from attributes, by attribute.
  std::deque<Placements> interned;
  llvm::StringMap<const Placements *> internedByKey;
  DenseMap<Attribute, const Placements *> internedByAttr;
  const Placements &intern(const Placements &p);
  const Placements &intern(LayoutAttr attr);
  /// The global layout of each value (`none` for values without one).
  DenseMap<Value, const Placements *> layouts;
  const Placements none;
  const Placements &layoutOf(Value v) const {
    const Placements *p = layouts.lookup(v);
    return p ? *p : none;
  }
  DenseMap<Value, RankedTensorType> globals;
  /// Global layout and type of each aten op's operands, read before any
  /// rewrite (a redistribution's local value may be its input itself, so
  /// the operands cannot be looked up in `layouts` later).
  DenseMap<Operation *,
           SmallVector<std::pair<const Placements *, RankedTensorType>, 4>>
      operandLayouts;
  /// positions() by what decides them.
  mutable llvm::StringMap<std::vector<layout::Interval>> positionsMemo;
  /// localType by the global type and the interned layout.
  DenseMap<std::pair<Type, const Placements *>, RankedTensorType> localTypes;
  /// A redistribution step's index tables by the global type, the step's
  /// layouts and mesh dim, and the table's dim and role: every layer of a
  /// transformer redistributes alike.
  llvm::StringMap<TakeForm> stepTables;
  /// Redistribution plans by global type and layouts: every layer of a
  /// transformer redistributes alike.
  DenseMap<std::tuple<Type, Attribute, Attribute>, layout::RedistributePlan>
      plans;
};

const Placements &Partitioner::intern(const Placements &p) {
  SmallString<128> key;
  appendLayoutKey(Type(), p, key);
  const Placements *&known = internedByKey[key];
  if (!known)
    known = &interned.emplace_back(p);
  return *known;
}

const Placements &Partitioner::intern(LayoutAttr attr) {
  const Placements *&known = internedByAttr[attr];
  if (!known)
    known = &intern(attr.getLayoutPlacements());
  return *known;
}

RankedTensorType Partitioner::localType(RankedTensorType global,
                                        const Placements &p) {
  RankedTensorType &local = localTypes[{global, &p}];
  if (!local)
    local = global.clone(layout::maxLocalShape(shapeOf(global), meshShape, p));
  return local;
}

std::optional<std::vector<layout::Interval>>
Partitioner::contiguousPieces(RankedTensorType global, const Placements &p,
                              ArrayRef<int64_t> dims) const {
  std::vector<layout::Interval> out;
  for (int64_t r = 0; r < numRanks; ++r) {
    std::vector<std::vector<layout::Interval>> ranges =
        layout::localIndexRanges(shapeOf(global), meshShape, p,
                                 layout::rankToCoords(r, meshShape));
    for (int64_t d : dims) {
      if (ranges[d].size() > 1)
        return std::nullopt;
      out.push_back(ranges[d].empty() ? layout::Interval{} : ranges[d].front());
    }
  }
  return out;
}

const std::vector<layout::Interval> &
Partitioner::positions(RankedTensorType global, const Placements &p,
                       int64_t rank, int64_t dim) const {
  // Along `dim`, what a rank holds depends only on the dim's length and,
  // on the mesh dims that shard it, their placements and the rank's
  // coordinates: alike queries (every layer's tables, ranks that differ
  // elsewhere) are answered once.
  SmallVector<int64_t, 16> key = {global.getDimSize(dim)};
  for (auto [m, placement] : llvm::enumerate(p)) {
    bool shards = placement.isShardLike() && placement.dim == dim;
    key.push_back(shards ? static_cast<int64_t>(placement.kind) : -1);
    key.push_back(shards ? placement.splitFactor : 0);
    key.push_back(shards ? coordOf(rank, m) : 0);
  }
  auto [it, fresh] = positionsMemo.try_emplace(
      StringRef(reinterpret_cast<const char *>(key.data()),
                key.size() * sizeof(int64_t)));
  if (fresh)
    it->second =
        layout::localIndexRanges(shapeOf(global), meshShape, p,
                                 layout::rankToCoords(rank, meshShape))[dim];
  return it->second;
}

template <typename WantFn, typename HaveFn>
RankTable Partitioner::table(int64_t blocks, int64_t width, int64_t sources,
                             int64_t sourceWidth, WantFn want, HaveFn have,
                             ArrayRef<int64_t> keyDims) const {
  RankTable out;
  out.rowOf.reserve(numRanks);
  // A rank's key: its coordinates along `keyDims` in mixed radix; the row
  // of each key met, -1 before.
  int64_t keys = 1;
  for (int64_t k : keyDims)
    keys *= meshShape[k];
  std::vector<int> rowOfKey(keys, -1);
  for (int64_t r = 0; r < numRanks; ++r) {
    int64_t key = 0;
    for (int64_t k : keyDims)
      key = key * meshShape[k] + coordOf(r, k);
    bool inserted = rowOfKey[key] < 0;
    if (inserted)
      rowOfKey[key] = out.rows.size();
    out.rowOf.push_back(rowOfKey[key]);
    if (!inserted)
      continue;
    // The held intervals by global begin, each with its source position.
    struct Held {
      int64_t begin, end, source;
    };
    std::vector<Held> held;
    for (int64_t j = 0; j < sources; ++j) {
      int64_t at = j * sourceWidth;
      for (const layout::Interval &iv : have(r, j)) {
        held.push_back({iv.begin, iv.end, at});
        at += iv.size();
      }
    }
    llvm::sort(held,
               [](const Held &a, const Held &b) { return a.begin < b.begin; });
    Row &row = out.rows.emplace_back();
    for (int64_t j = 0; j < blocks; ++j) {
      int64_t placed = 0;
      for (const layout::Interval &iv : want(r, j)) {
        for (int64_t g = iv.begin; g < iv.end && placed < width;) {
          // The held interval at or after g.
          auto h = llvm::partition_point(
              held, [&](const Held &x) { return x.end <= g; });
          int64_t next = std::min(iv.end, g + width - placed);
          if (h == held.end() || h->begin > g) {
            // Not held: fill up to the next held position.
            int64_t end = h == held.end() ? next : std::min(next, h->begin);
            appendRun(row, -1, end - g);
            placed += end - g;
            g = end;
            continue;
          }
          int64_t end = std::min(next, h->end);
          appendRun(row, h->source + (g - h->begin), end - g);
          placed += end - g;
          g = end;
        }
      }
      appendRun(row, -1, width - placed);
    }
  }
  return out;
}

TakeForm Partitioner::takeForm(const RankTable &indices,
                               bool maskPadding) const {
  TakeForm form;
  for (const Run &run : indices.rows.front())
    form.size += run.count;
  form.rowsInPlace = true;
  for (const Row &row : indices.rows) {
    int64_t at = 0;
    for (const Run &run : row) {
      form.rowsInPlace &= run.start == -1 ? !maskPadding : run.start == at;
      at += run.count;
    }
  }
  // The compact form: each row's runs with trailing fill dropped, padded
  // with empty runs to the longest, when shorter than the table; one row
  // for every rank when all take the same (a _StridedShard's pieces
  // reordered after an all_gather), whose runs are never longer than it.
  auto real = [](const Row &row) {
    return row.size() - (!row.empty() && row.back().start == -1);
  };
  size_t perRank = 1;
  for (const Row &row : indices.rows)
    perRank = std::max(perRank, real(row));
  // (Rows are maximal runs: equal rows have equal runs.)
  form.uniform = llvm::all_of(indices.rows, [&](const Row &row) {
    return llvm::equal(row, indices.rows.front(), [](Run a, Run b) {
      return a.start == b.start && a.count == b.count;
    });
  });
  bool compact = 2 * perRank < static_cast<size_t>(form.size) || perRank == 1 ||
                 form.uniform;
  SmallVector<int64_t> starts, counts, table;
  ArrayRef<unsigned> rowOf = indices.rowOf;
  for (unsigned r : form.uniform ? rowOf.take_front() : rowOf) {
    const Row &row = indices.rows[r];
    if (!compact) {
      for (const Run &run : row)
        for (int64_t i = 0; i < run.count; ++i)
          table.push_back(run.start == -1 ? -1 : run.start + i);
      continue;
    }
    for (size_t j = 0; j < perRank; ++j) {
      starts.push_back(j < real(row) ? row[j].start : 0);
      counts.push_back(j < real(row) ? row[j].count : 0);
    }
  }
  MLIRContext *ctx = meshRef.getContext();
  if (compact) {
    form.starts = DenseI64ArrayAttr::get(ctx, starts);
    form.counts = DenseI64ArrayAttr::get(ctx, counts);
  } else {
    form.indices = DenseI64ArrayAttr::get(ctx, table);
  }
  return form;
}

Value Partitioner::take(OpBuilder &b, Location loc, Value input, int64_t dim,
                        const TakeForm &form, double fill) {
  auto type = cast<RankedTensorType>(input.getType());
  if (form.rowsInPlace && form.size == type.getDimSize(dim))
    return input;
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = form.size;
  return LocalTakeOp::create(b, loc, type.clone(shape), input, meshRef,
                             b.getI64IntegerAttr(dim), form.indices,
                             form.starts, form.counts,
                             form.uniform ? b.getUnitAttr() : UnitAttr(),
                             b.getF64FloatAttr(fill))
      .getResult();
}

Value Partitioner::step(OpBuilder &b, Location loc, Value input,
                        RankedTensorType global, const Step &s,
                        StringAttr reason) {
  int64_t m = s.meshDim, n = meshShape[m];
  std::vector<int64_t> in =
      layout::maxLocalShape(shapeOf(global), meshShape, s.before);
  std::vector<int64_t> out =
      layout::maxLocalShape(shapeOf(global), meshShape, s.after);
  auto meshDims = b.getDenseI64ArrayAttr({m});
  auto withReason = [&](Operation *op) {
    op->setAttr("spmd.reason",
                StringAttr::get(b.getContext(),
                                reason.getValue() + ": " +
                                    layout::placementsStr(s.before) + " -> " +
                                    layout::placementsStr(s.after)));
    return op->getResult(0);
  };
  auto typeWith = [&](Type t, int64_t dim, int64_t size) {
    auto type = cast<RankedTensorType>(t);
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] = size;
    return type.clone(shape);
  };
  // Block j of rank r's group along m under `p`, along `dim`.
  auto held = [this, global, m](const Placements &p, int64_t dim) {
    return [this, global, m, dim,
            p](int64_t r, int64_t j) -> const std::vector<layout::Interval> & {
      return positions(global, p, member(r, m, j), dim);
    };
  };
  auto own = [this, global](const Placements &p, int64_t dim) {
    return [this, global, dim,
            p](int64_t r, int64_t) -> const std::vector<layout::Interval> & {
      return positions(global, p, r, dim);
    };
  };
  // The mesh dims whose coordinates decide `own(p, dim)`, and
  // `held(p, dim)` (its mesh dim m replaced by the block number).
  auto ownKey = [&](const Placements &p, int64_t dim, bool exceptM,
                    SmallVector<int64_t> &key) {
    for (int64_t k = 0, e = p.size(); k < e; ++k)
      if (p[k].isShardLike() && p[k].dim == dim && !(exceptM && k == m) &&
          !llvm::is_contained(key, k))
        key.push_back(k);
  };
  // `spmd.local_take` of `v` along `dim` by the table `build` makes from
  // the mesh dims that decide it (those sharding `dim` after and before
  // the step, mesh dim m left out of the side it is a block number of),
  // built once per step, dim and role.
  auto takeBy = [&](Value v, char role, int64_t dim, bool afterByBlock,
                    bool beforeByBlock,
                    function_ref<RankTable(ArrayRef<int64_t>)> build) {
    SmallString<256> memoKey;
    int64_t head[] = {role, dim, m};
    memoKey.append(reinterpret_cast<const char *>(head),
                   reinterpret_cast<const char *>(head + 3));
    appendLayoutKey(global, s.before, memoKey);
    appendLayoutKey(Type(), s.after, memoKey);
    auto [it, fresh] = stepTables.try_emplace(memoKey);
    if (fresh) {
      SmallVector<int64_t> key;
      ownKey(s.after, dim, afterByBlock, key);
      ownKey(s.before, dim, beforeByBlock, key);
      it->second = takeForm(build(key), /*maskPadding=*/false);
    }
    return take(b, loc, v, dim, it->second, 0);
  };
  // After a gather along `dim`: this rank's new positions from the n
  // padded pieces.
  auto unpad = [&](Value v, int64_t dim) {
    return takeBy(v, 'u', dim, false, true, [&](ArrayRef<int64_t> key) {
      return table(1, out[dim], n, in[dim], own(s.after, dim),
                   held(s.before, dim), key);
    });
  };
  // Before a scatter along `dim`: n padded blocks, block j holding group
  // member j's new positions, from this rank's own.
  auto pad = [&](Value v, int64_t dim) {
    return takeBy(v, 'p', dim, true, false, [&](ArrayRef<int64_t> key) {
      return table(n, out[dim], 1, 0, held(s.after, dim), own(s.before, dim),
                   key);
    });
  };

  switch (s.kind) {
  case Step::Kind::AllGather: {
    int64_t d = s.before[m].dim;
    Value gathered = withReason(
        AllGatherOp::create(b, loc, typeWith(input.getType(), d, n * in[d]),
                            input, meshRef, meshDims, b.getI64IntegerAttr(d)));
    return unpad(gathered, d);
  }
  case Step::Kind::AllReduce:
    return withReason(AllReduceOp::create(
        b, loc, input.getType(), input, meshRef, meshDims,
        ReduceKindAttr::get(b.getContext(),
                            fromLayoutReduceKind(s.before[m].reduce))));
  case Step::Kind::ReduceScatter: {
    int64_t d = s.after[m].dim;
    Value padded = pad(input, d);
    return withReason(ReduceScatterOp::create(
        b, loc, typeWith(padded.getType(), d, out[d]), padded, meshRef,
        meshDims, b.getI64IntegerAttr(d),
        ReduceKindAttr::get(b.getContext(),
                            fromLayoutReduceKind(s.before[m].reduce))));
  }
  case Step::Kind::AllToAll: {
    int64_t from = s.before[m].dim, to = s.after[m].dim;
    Value padded = pad(input, to);
    Value exchanged = withReason(AllToAllOp::create(
        b, loc,
        typeWith(typeWith(padded.getType(), to, out[to]), from, n * in[from]),
        padded, meshRef, meshDims, b.getI64IntegerAttr(to),
        b.getI64IntegerAttr(from)));
    return unpad(exchanged, from);
  }
  case Step::Kind::LocalSlice: {
    int64_t d = s.after[m].dim;
    return takeBy(input, 's', d, false, false, [&](ArrayRef<int64_t> key) {
      return table(1, out[d], 1, 0, own(s.after, d), own(s.before, d), key);
    });
  }
  case Step::Kind::LocalPartial: {
    layout::ReduceKind kind = s.after[m].reduce;
    if (kind != layout::ReduceKind::Sum)
      return input; // avg, max, min of equal copies: the value itself
    // Sum: the group's first rank keeps the value, the others hold zero.
    auto type = cast<RankedTensorType>(input.getType());
    Value v = input;
    if (type.getRank() == 0)
      v = aten::ViewOp::create(b, loc, type.clone({1}), v,
                               b.getDenseI64ArrayAttr({1}));
    int64_t size = cast<RankedTensorType>(v.getType()).getDimSize(0);
    RankTable indices;
    indices.rows = {Row{{0, size}}, Row{{-1, size}}};
    for (int64_t r = 0; r < numRanks; ++r)
      indices.rowOf.push_back(coordOf(r, m) == 0 ? 0 : 1);
    v = take(b, loc, v, 0, indices, 0, true);
    if (type.getRank() == 0)
      v = aten::ViewOp::create(b, loc, type, v, b.getDenseI64ArrayAttr({}));
    return v;
  }
  }
  llvm_unreachable("unknown step");
}

FailureOr<Value> Partitioner::redistribute(RedistributeOp op, Value input) {
  auto global = cast<RankedTensorType>(op.getType());
  auto [known, fresh] = plans.try_emplace({global, op.getFrom(), op.getTo()});
  if (fresh)
    known->second = layout::planRedistribute(
        shapeOf(global), elementBytes(global.getElementType()), meshShape,
        op.getFrom().getLayoutPlacements(), op.getTo().getLayoutPlacements(),
        cost);
  const layout::RedistributePlan &plan = known->second;
  if (!plan.error.empty())
    return op.emitOpError("has no plan: ") << plan.error;
  auto reason = op->getAttrOfType<StringAttr>("spmd.reason");
  if (!reason)
    reason = StringAttr::get(op.getContext(), "spmd.redistribute");
  ProvenanceListener provenance(op);
  OpBuilder b(op, &provenance);
  Value v = input;
  for (const Step &s : plan.steps)
    v = step(b, op.getLoc(), v, global, s, reason);
  return v;
}

/// The padding of an operand that a `reduce` runs over: the reduction's
/// identity in `element`'s range (0 for sums and averages, the lowest
/// value for a max, the highest for a min), so padding never wins.
static double reductionIdentity(layout::ReduceKind reduce, Type element) {
  bool max = reduce == layout::ReduceKind::Max;
  if (!max && reduce != layout::ReduceKind::Min)
    return 0;
  if (auto integer = dyn_cast<IntegerType>(element)) {
    if (integer.getWidth() == 1)
      return max ? 0 : 1;
    // -2^(w-1) is exact; 2^(w-1) - 1 is for w <= 53 (i32).
    double bound = std::ldexp(1.0, integer.getWidth() - 1);
    return max ? -bound : bound - 1;
  }
  double inf = std::numeric_limits<double>::infinity();
  return max ? -inf : inf;
}

void Partitioner::maskReducedOperands(Operation *op) {
  // Only a reduction that leaves a result Partial sums over its operands'
  // shards (most ops have none).
  auto isPartial = [](const Placement &p) {
    return p.kind == Placement::Kind::Partial;
  };
  SmallVector<const Placements *> partialResults;
  for (Value r : op->getResults()) {
    const Placements &p = layoutOf(r);
    if (llvm::any_of(p, isPartial))
      partialResults.push_back(&p);
  }
  auto operands = operandLayouts.find(op);
  if (partialResults.empty() || operands == operandLayouts.end())
    return;
  ProvenanceListener provenance(op);
  OpBuilder b(op, &provenance);
  for (auto [operand, info] :
       llvm::zip(op->getOpOperands(), operands->second)) {
    const Placements &p = *info.first;
    RankedTensorType type = info.second;
    // A vocabulary-sharded lookup reads only the rows it holds.
    if (isa<aten::EmbeddingOp>(op) && operand.getOperandNumber() == 0)
      continue;
    std::vector<int64_t> shape = shapeOf(type), padded;
    for (size_t m = 0; m < p.size(); ++m) {
      if (!p[m].isShardLike())
        continue;
      auto partial = llvm::find_if(partialResults, [&](const Placements *r) {
        return isPartial((*r)[m]);
      });
      if (partial == partialResults.end())
        continue;
      int64_t d = p[m].dim;
      if (padded.empty())
        padded = layout::maxLocalShape(shape, meshShape, p);
      // Even when the pieces, each at most padded[d] long, fill the dim
      // exactly: every rank holds padded[d] valid rows.
      int64_t pieces = 1;
      for (size_t k = 0; k < p.size(); ++k)
        if (p[k].isShardLike() && p[k].dim == d)
          pieces *= meshShape[k];
      if (pieces * padded[d] == shape[d])
        continue;
      // One row per distinct valid length: the first `valid` rows, then
      // padding.
      RankTable indices;
      std::map<int64_t, unsigned> rowOfValid;
      for (int64_t r = 0; r < numRanks; ++r) {
        int64_t valid = 0;
        for (const layout::Interval &held : positions(type, p, r, d))
          valid += held.size();
        auto [it, inserted] =
            rowOfValid.try_emplace(valid, indices.rows.size());
        indices.rowOf.push_back(it->second);
        if (!inserted)
          continue;
        Row &row = indices.rows.emplace_back();
        appendRun(row, 0, valid);
        appendRun(row, -1, padded[d] - valid);
      }
      if (rowOfValid.size() == 1 && rowOfValid.begin()->first == padded[d])
        continue; // even
      // Padding is the identity of the pending reduction; padded targets
      // must be ignored, not counted as class 0.
      double fill =
          reductionIdentity((**partial)[m].reduce, type.getElementType());
      if (auto nll = dyn_cast<aten::NllLossForwardOp>(op))
        if (operand.getOperandNumber() == 1)
          fill = static_cast<double>(nll.getIgnoreIndexAttr().getInt());
      operand.set(take(b, op->getLoc(), operand.get(), d, indices, fill,
                       /*maskPadding=*/true));
    }
  }
}

void Partitioner::expandMeanNllLoss(aten::NllLossForwardOp op) {
  const Placements &out = layoutOf(op.getOutput());
  SmallVector<int64_t> meshDims;
  for (size_t m = 0; m < out.size(); ++m)
    if (out[m].kind == Placement::Kind::Partial)
      meshDims.push_back(m);
  if (op.getReduction() != 1 || meshDims.empty())
    return;
  ProvenanceListener provenance(op);
  OpBuilder b(op->getContext(), &provenance);
  b.setInsertionPointAfter(op);
  op.setReduction(2);
  Value total = op.getTotalWeight();
  auto all =
      AllReduceOp::create(b, op.getLoc(), total.getType(), total, meshRef,
                          b.getDenseI64ArrayAttr(meshDims),
                          ReduceKindAttr::get(b.getContext(), ReduceKind::Sum));
  all->setAttr("spmd.reason",
               b.getStringAttr("total_weight of the mean nll_loss_forward: "
                               "the mean divides by the global total"));
  auto mean =
      aten::DivTensorOp::create(b, op.getLoc(), op.getOutput().getType(),
                                op.getOutput(), all.getResult());
  op.getOutput().replaceAllUsesExcept(mean.getResult(), mean);
  total.replaceAllUsesExcept(all.getResult(), all);
}

/// One radix of a dim's refinement: `size` global positions, of which a rank
/// holds [begin, begin + count).
struct Radix {
  int64_t size, begin, count;
};

/// `runs` (the intervals of global indices a rank holds along a dim of
/// `extent`, in local order, as localIndexRanges merges them) as a product
/// of runs in a mixed radix, outer radix first: {(B, b0, nb), (H, h0, nh)}
/// for the batch block b0.. and head chunk h0.. of a merged [B*H] dim laid
/// out [Shard, StridedShard]. Empty when the runs are not ascending or not
/// such a product.
static SmallVector<Radix> refine(ArrayRef<layout::Interval> runs,
                                 int64_t extent) {
  if (runs.size() <= 1)
    return {{extent, runs.empty() ? 0 : runs[0].begin,
             runs.empty() ? 0 : runs[0].size()}};
  int64_t run = runs[0].size(), stride = runs[1].begin - runs[0].begin;
  if (stride <= 0 || extent % stride != 0)
    return {};
  int64_t first = runs[0].begin % stride;
  if (first + run > stride)
    return {};
  // The runs' positions in units of `stride`, merged into runs again.
  SmallVector<layout::Interval> outer;
  for (auto [k, r] : llvm::enumerate(runs)) {
    if (r.size() != run || r.begin % stride != first ||
        (k && r.begin <= runs[k - 1].begin))
      return {};
    int64_t q = r.begin / stride;
    if (!outer.empty() && outer.back().end == q)
      ++outer.back().end;
    else
      outer.push_back({q, q + 1});
  }
  SmallVector<Radix> radices = refine(outer, extent / stride);
  if (radices.empty())
    return {};
  radices.push_back({stride, first, run});
  return radices;
}

LogicalResult Partitioner::setRandomOffsets(Operation *op) {
  Value result = op->getResult(0);
  const Placements &p = layoutOf(result);
  RankedTensorType global = globals.lookup(result);
  if (llvm::all_of(p, [](const Placement &x) { return !x.isShardLike(); }))
    return success();
  // Each dim as a product of contiguous runs, the same radices on every
  // rank: a StridedShard piece is then a contiguous box of a finer global
  // shape with the same element order, and draws by global index there.
  // A dim held as one run keeps its local (padded) size, so uneven shards
  // draw as before; a dim held as several runs must have the same radices
  // and counts on every rank.
  auto local = cast<RankedTensorType>(result.getType());
  SmallVector<int64_t> shape, localShape, offsets;
  for (int64_t r = 0; r < numRanks; ++r) {
    SmallVector<int64_t> sizes, counts;
    std::vector<std::vector<layout::Interval>> ranges =
        layout::localIndexRanges(shapeOf(global), meshShape, p,
                                 layout::rankToCoords(r, meshShape));
    for (int64_t d = 0; d < global.getRank(); ++d) {
      SmallVector<Radix> radices = refine(ranges[d], global.getDimSize(d));
      if (radices.empty())
        return op->emitOpError("result layout ")
               << layout::placementsStr(p)
               << " gives a rank pieces that are no product of runs; random "
                  "ops draw by global index";
      for (const Radix &x : radices) {
        sizes.push_back(x.size);
        counts.push_back(radices.size() == 1 ? local.getDimSize(d) : x.count);
        offsets.push_back(x.begin);
      }
    }
    if (r == 0) {
      shape = sizes;
      localShape = counts;
    } else if (sizes != shape || counts != localShape) {
      return op->emitOpError("result layout ")
             << layout::placementsStr(p)
             << " gives ranks pieces of different structure; random ops "
                "draw by global index";
    }
  }
  Builder b(op->getContext());
  op->setAttr("spmd.global_shape", b.getDenseI64ArrayAttr(shape));
  op->setAttr("spmd.global_offsets", b.getDenseI64ArrayAttr(offsets));
  if (static_cast<int64_t>(shape.size()) == global.getRank())
    return success();
  // The op draws on the finer local shape: its tensor operand and results
  // are viewed there and back (same elements, same order).
  ProvenanceListener provenance(op);
  OpBuilder builder(op, &provenance);
  auto refined = [&](Value v) {
    return cast<RankedTensorType>(v.getType()).clone(localShape);
  };
  auto sizeAttr = [&](Type t) {
    return builder.getDenseI64ArrayAttr(cast<RankedTensorType>(t).getShape());
  };
  Value input = op->getOperand(0);
  op->setOperand(0, aten::ViewOp::create(builder, op->getLoc(), refined(input),
                                         input, sizeAttr(refined(input))));
  builder.setInsertionPointAfter(op);
  for (Value v : op->getResults()) {
    Type local = v.getType();
    v.setType(refined(v));
    auto back =
        aten::ViewOp::create(builder, op->getLoc(), local, v, sizeAttr(local));
    v.replaceAllUsesExcept(back, back);
  }
  return success();
}

LogicalResult Partitioner::setShardRows(Operation *op, const Placements &p,
                                        RankedTensorType table, int64_t dim,
                                        StringRef name) {
  if (llvm::none_of(p, [&](const Placement &x) {
        return x.isShardLike() && x.dim == dim;
      }))
    return success();
  std::optional<std::vector<layout::Interval>> pieces =
      contiguousPieces(table, p, {dim});
  if (!pieces)
    return op->emitOpError("layout ")
           << layout::placementsStr(p) << " gives a rank non-contiguous "
           << "pieces of dim " << dim << " of " << table
           << "; a sharded vocabulary or class dim needs Shard placements";
  std::vector<int64_t> rows;
  for (const layout::Interval &piece : *pieces) {
    rows.push_back(piece.begin);
    rows.push_back(piece.size());
    rows.push_back(table.getDimSize(dim));
  }
  op->setAttr(name, Builder(op->getContext()).getDenseI64ArrayAttr(rows));
  return success();
}

LogicalResult Partitioner::rewriteOp(Operation *op) {
  op->removeAttr(layoutsName);
  maskReducedOperands(op);
  if (isa<aten::EmbeddingOp>(op)) {
    auto [p, type] = operandLayouts.find(op)->second[0];
    if (failed(setShardRows(op, *p, type, 0, "spmd.vocab_rows")))
      return failure();
  }
  if (isa<aten::EmbeddingDenseBackwardOp>(op) &&
      failed(setShardRows(op, layoutOf(op->getResult(0)),
                          globals[op->getResult(0)], 0, "spmd.vocab_rows")))
    return failure();
  // Classes sharded over ranks (loss_parallel: a vocabulary-sharded head's
  // logits): each rank takes the targets it holds.
  if (isa<aten::NllLossForwardOp, aten::NllLossBackwardOp>(op)) {
    auto [p, type] = operandLayouts.find(op)
                         ->second[isa<aten::NllLossForwardOp>(op) ? 0 : 1];
    if (failed(
            setShardRows(op, *p, type, type.getRank() - 1, "spmd.class_rows")))
      return failure();
  }
  // Whether any operand or result type changes: an op that keeps its
  // types keeps its invariants.
  bool retyped = false;
  if (auto operands = operandLayouts.find(op); operands != operandLayouts.end())
    for (auto [v, info] : llvm::zip(op->getOperands(), operands->second))
      retyped = retyped || v.getType() != info.second;
  for (Value v : op->getResults()) {
    RankedTensorType global = globals[v];
    RankedTensorType local = localType(global, layoutOf(v));
    retyped = retyped || local != global;
    v.setType(local);
  }
  if (op->hasTrait<aten::OpTrait::Random>() && failed(setRandomOffsets(op)))
    return failure();
  Builder b(op->getContext());
  auto localShape = [&]() {
    return cast<RankedTensorType>(op->getResult(0).getType()).getShape();
  };
  if (op->hasTrait<aten::OpTrait::ResultSizeAttr>())
    op->setAttr("size", b.getDenseI64ArrayAttr(localShape()));
  if (isa<aten::ReshapeAliasOp>(op)) {
    SmallVector<int64_t> strides(localShape().size(), 1);
    for (int64_t d = static_cast<int64_t>(strides.size()) - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * std::max<int64_t>(localShape()[d + 1], 1);
    op->setAttr("stride", b.getDenseI64ArrayAttr(strides));
  }
  // A split of a sharded dim (a StridedShard into its pieces) splits the
  // local pieces.
  if (auto split = dyn_cast<aten::SplitTensorOp>(op))
    split.setSplitSize(cast<RankedTensorType>(op->getResult(0).getType())
                           .getDimSize(aten::normalizeDim(
                               split.getDim(), localShape().size())));
  if (auto split = dyn_cast<aten::SplitWithSizesOp>(op)) {
    int64_t dim = aten::normalizeDim(split.getDim(), localShape().size());
    SmallVector<int64_t> sizes;
    for (Value v : op->getResults())
      sizes.push_back(cast<RankedTensorType>(v.getType()).getDimSize(dim));
    split.setSplitSizes(sizes);
  }
  if (auto nll = dyn_cast<aten::NllLossForwardOp>(op))
    expandMeanNllLoss(nll);
  // A grouped convolution sharded on its channels convolves its own groups
  // (the strategy keeps groups whole).
  auto localGroups = [&](int64_t groups, unsigned input) -> int64_t {
    if (groups == 1) // ungrouped: channels contract instead
      return 1;
    auto global = operandLayouts.find(op)->second[input].second;
    auto local = cast<RankedTensorType>(op->getOperand(input).getType());
    return groups * local.getDimSize(1) / global.getDimSize(1);
  };
  if (auto conv = dyn_cast<aten::ConvolutionOp>(op))
    conv.setGroups(localGroups(conv.getGroups(), 0));
  if (auto conv = dyn_cast<aten::ConvolutionBackwardOp>(op))
    conv.setGroups(localGroups(conv.getGroups(), 1));
  // A vocabulary shard's gradient has the local (padded) row count.
  if (auto backward = dyn_cast<aten::EmbeddingDenseBackwardOp>(op))
    backward.setNumWeights(localShape()[0]);
  // The op's own invariants (its types, attributes and traits): the rewrite
  // changes nothing else, and the pass manager verifies the whole per-rank
  // program after the pass.
  if (retyped && failed(op->getName().verifyInvariants(op)))
    return op->emitOpError("does not verify with its per-rank types");
  return success();
}

LogicalResult Partitioner::run(func::FuncOp fn) {
  size_t meshRank = meshShape.size();
  for (BlockArgument arg : fn.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      continue;
    layouts[arg] =
        &intern(placementsOf(fn.getArgAttrDict(arg.getArgNumber()), meshRank));
    globals[arg] = type;
    arg.setType(localType(type, layoutOf(arg)));
  }
  SmallVector<Operation *> ops;
  fn.walk([&](Operation *op) {
    if (op != fn)
      ops.push_back(op);
  });
  // The global layout and type of every value, before any type changes.
  for (Operation *op : ops) {
    SmallVector<const Placements *, 2> results;
    if (auto fixed = getFixedLayoutChange(op)) {
      results.push_back(&intern(fixed->second));
    } else if (isa<aten::AtenDialect>(op->getDialect()) ||
               isa<ShardingConstraintOp>(op)) {
      auto attr = op->getAttrOfType<ArrayAttr>(layoutsName);
      if (!attr || attr.size() != op->getNumResults())
        return op->emitOpError("has no spmd.layouts: run --spmd-propagate "
                               "before --spmd-partition");
      for (Attribute a : attr) {
        auto layout = dyn_cast<LayoutAttr>(a);
        if (!layout)
          return op->emitOpError(
              "spmd.layouts must hold #spmd.layout attributes");
        results.push_back(&intern(layout));
      }
    } else {
      results.assign(op->getNumResults(), &intern(replicated(meshRank)));
    }
    for (auto [v, p] : llvm::zip(op->getResults(), results)) {
      if (auto type = dyn_cast<RankedTensorType>(v.getType())) {
        layouts[v] = p;
        globals[v] = type;
      }
    }
    if (isa<aten::AtenDialect>(op->getDialect()))
      for (Value v : op->getOperands())
        operandLayouts[op].push_back({&layoutOf(v), globals.lookup(v)});
  }
  for (Operation *op : ops) {
    if (auto c = dyn_cast<ShardingConstraintOp>(op)) {
      // Propagation gave the input the constrained layout already.
      c.getResult().replaceAllUsesWith(c.getInput());
      c->erase();
      continue;
    }
    if (auto keep = dyn_cast<KeepLocalOp>(op)) {
      // Partial and Replicate have the same local type: each rank's own
      // value simply stays.
      keep.getResult().replaceAllUsesWith(keep.getInput());
      keep->erase();
      continue;
    }
    if (auto r = dyn_cast<RedistributeOp>(op)) {
      FailureOr<Value> local = redistribute(r, r.getInput());
      if (failed(local))
        return failure();
      r.getResult().replaceAllUsesWith(*local);
      r->erase();
      continue;
    }
    if (isa<aten::AtenDialect>(op->getDialect()) && failed(rewriteOp(op)))
      return failure();
  }
  SmallVector<Type> results;
  for (unsigned i = 0; i < fn.getNumResults(); ++i) {
    auto type = dyn_cast<RankedTensorType>(fn.getResultTypes()[i]);
    results.push_back(
        type ? Type(localType(type, intern(placementsOf(fn.getResultAttrDict(i),
                                                        meshRank))))
             : fn.getResultTypes()[i]);
  }
  fn.setType(FunctionType::get(
      fn.getContext(), fn.getBody().front().getArgumentTypes(), results));
  return success();
}

struct PartitionPass : spmd::impl::PartitionPassBase<PartitionPass> {
  void runOnOperation() override {
    if (failed(partitionModule(getOperation())))
      signalPassFailure();
  }
};

} // namespace

LogicalResult spmd::partitionModule(ModuleOp module) {
  MeshOp mesh = getOnlyMesh(module, "spmd-partition");
  if (!mesh || failed(verifyPartitionable(module, "spmd-partition")))
    return failure();
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    Partitioner partitioner(mesh);
    if (failed(partitioner.run(fn)))
      return failure();
  }
  return success();
}
