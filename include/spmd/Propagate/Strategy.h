//===- Strategy.h - op strategies on a device mesh, and their cost -*- C++
//-*-===//
//
// What sharding propagation chooses from: every way an op can run on an
// N-D mesh (one 1-D strategy of its einsum rule per mesh dim, DTensor's
// op strategies), and the alpha-beta cost of running it that way
// (redistributions of its operands, its own compute).
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_PROPAGATE_STRATEGY_H
#define SPMD_PROPAGATE_STRATEGY_H

#include "spmd/Dialect/SPMD/SPMD.h"
#include "spmd/Layout/Redistribute.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace spmd {

/// One placement per mesh dim: a value's layout on the module's mesh.
using Placements = std::vector<layout::Placement>;

/// Replicate on each of `meshRank` mesh dims.
Placements replicated(size_t meshRank);

/// The placements of an argument's or result's `spmd.layout` in `attrs`;
/// Replicate on each of `meshRank` mesh dims where there is none.
Placements placementsOf(mlir::DictionaryAttr attrs, size_t meshRank);

/// Sets `spmd.layout` to `layouts[i]` on argument i of `fn` wherever
/// `layouts[i]` is non-null, rebuilding the argument attributes once
/// (setArgAttr per argument rebuilds them each time: quadratic in the
/// thousands of arguments of a large model's step).
void setArgLayouts(mlir::FunctionOpInterface fn,
                   llvm::ArrayRef<mlir::Attribute> layouts);
/// The same for the results.
void setResultLayouts(mlir::FunctionOpInterface fn,
                      llvm::ArrayRef<mlir::Attribute> layouts);

/// One way to run an op on the whole mesh: the layout each operand must
/// have and the layout each result gets.
struct MeshStrategy {
  std::vector<Placements> operands;
  std::vector<Placements> results;
};

/// A StridedShard in flight: `factor` pieces of a dim of `size` elements
/// (a merged view's output, an argument's layout).
struct SplitFactor {
  int64_t size, factor;
  bool operator==(const SplitFactor &o) const {
    return size == o.size && factor == o.factor;
  }
};

/// Every strategy of `op` (an op with the aten ShardingRuleOpInterface) on
/// a mesh of shape `meshShape`: the product of the 1-D strategies of its
/// einsum rule, one per mesh dim, mesh dim 0 varying slowest. A combination
/// is dropped when a 1-D strategy in it needs even shards (views that merge
/// or split a sharded dim) and the mesh dims sharding a tensor dim do not
/// divide it, or when a layout does not fit its tensor. Strategy 0 is
/// always the all-Replicate one. Fails (no diagnostic) for an op without a
/// rule.
///
/// For each (size, f) of `splitFactors`, every 1-D strategy whose Shards
/// all fall on dims of that size gets a twin with StridedShard(d, f) in
/// their place: the op treats the indices of a label alike whatever their
/// order, so a value laid out as a StridedShard (a merged view, a packed
/// projection) flows through it without a redistribution. An embedding's
/// table rows (its vocabulary, which must come in contiguous pieces) get no
/// twins. A view that merges or splits the sharded dim with others (a 1-D
/// strategy with even shards) gets a twin only for a factor of
/// `packedFactors` (the arguments' StridedShards: a packed parameter such
/// as a fused gate|up projection), on an operand dim of the factor's size
/// and a result dim whose chunks hold whole outer atoms; the factors that
/// 2-D meshes nest (attention's heads inside the batch) stay on views of
/// their own size. The combinations of the rule's own strategies come
/// first, numbered as without twins.
///
/// An spmd.sharding_constraint has the strategies of an identity, kept
/// where they give the pinned placement on each of its fixed mesh dims (or
/// the pinned layout alone, Replicate on the free dims, where none does).
///
/// A 1-D strategy with `divides` (a view's atom) is used on a mesh dim only
/// when the mesh dim's size (times the sizes of the other mesh dims on the
/// same atom) divides the atom. Atoms sharded by several mesh dims nest:
/// a later mesh dim's StridedShard factor counts the atoms before it as the
/// earlier mesh dims left them (dp on the batch and tp on the heads of
/// [T, B*H, hd] is [Shard(1), StridedShard(1, B/dp)]).
llvm::FailureOr<std::vector<MeshStrategy>>
enumerateStrategies(mlir::Operation *op, llvm::ArrayRef<int64_t> meshShape,
                    llvm::ArrayRef<SplitFactor> splitFactors = {},
                    llvm::ArrayRef<int64_t> packedFactors = {});

/// enumerateStrategies' strategies, in its order, each passed to `fn`
/// (valid for the call only: one buffer serves every strategy), without
/// collecting them. Fails (no diagnostic) for an op without a rule.
llvm::LogicalResult
forEachStrategy(mlir::Operation *op, llvm::ArrayRef<int64_t> meshShape,
                llvm::ArrayRef<SplitFactor> splitFactors,
                llvm::ArrayRef<int64_t> packedFactors,
                llvm::function_ref<void(const MeshStrategy &)> fn);

/// Adds the StridedShard in flight that `p` makes of a value of `type`
/// (none unless `p` is a StridedShard with factor > 1) to `out`, once.
void addSplitFactor(const layout::Placement &p, mlir::Type type,
                    llvm::SmallVectorImpl<SplitFactor> &out);

/// The alpha-beta model of `mesh`: MeshCostModel::defaults, with the
/// per-mesh-dim `latency` (seconds) and `bandwidth` (bytes/second) given by
/// a pass's options where not empty. Emits "<pass>: '<option>' has N
/// values; the mesh has M dims" at the mesh and fails on a length that
/// does not match the mesh rank.
llvm::FailureOr<layout::MeshCostModel>
getMeshCostModel(MeshOp mesh, llvm::ArrayRef<double> latency,
                 llvm::ArrayRef<double> bandwidth, llvm::StringRef pass);

/// Bytes per element of a tensor element type (i1 counts one byte, as in
/// the runtime).
int64_t elementBytes(mlir::Type elementType);

/// Bytes of a ranked tensor type's elements; 0 for any other type.
int64_t tensorBytes(mlir::Type type);

/// The shape of a ranked tensor type, as layout math takes it.
std::vector<int64_t> shapeOf(mlir::Type type);

/// Appends a memo key of `placements` to `key`: `type` (when given) and the
/// fields operator== compares (kind, tensor dim, split factor, reduce
/// kind). Equal keys name equal layouts of equal types.
void appendLayoutKey(mlir::Type type, const Placements &placements,
                     llvm::SmallVectorImpl<char> &key);

/// The alpha-beta cost model propagation minimizes: communication on the
/// mesh (`mesh`, per mesh dim latency in seconds and bandwidth in bytes per
/// second) plus compute on each rank (GEMM flops at `flopsPerSecond`, every
/// other op's bytes read and written at `bytesPerSecond`). Redistribution
/// costs come from the redistribute planner and are memoized.
class CostModel {
public:
  CostModel(std::vector<int64_t> meshShape, layout::MeshCostModel mesh,
            double flopsPerSecond, double bytesPerSecond);

  /// A small integer naming `placements`: equal layouts get equal ids, so
  /// the search compares and memoizes layouts by id.
  unsigned intern(const Placements &placements);
  /// The layout an id names.
  const Placements &layout(unsigned id) const { return layouts[id]; }

  /// Seconds to redistribute a tensor of `type` (global shape) from layout
  /// `from` to layout `to` (interned ids); 0 when equal; +inf when no plan
  /// exists.
  double redistribute(mlir::RankedTensorType type, unsigned from, unsigned to);
  /// Bytes each rank sends for that redistribution, and its number of
  /// collectives (its plan's steps).
  std::pair<int64_t, int64_t> redistributeVolume(mlir::RankedTensorType type,
                                                 unsigned from, unsigned to);

  /// Estimated seconds of `op` on one rank under `strategy`: GEMMs,
  /// convolutions and attention (SDPA forward and backward, FlashAttention's
  /// flop count) by their local flops, other ops by the local bytes they
  /// read and write.
  double compute(mlir::Operation *op, const MeshStrategy &strategy);

  /// GEMM throughput in flop/s by the element type of the GEMM's result
  /// (as printed: "f32", "bf16", "f16"); types not listed run at the
  /// constructor's `flopsPerSecond`.
  void setGemmFlops(llvm::StringMap<double> byElementType) {
    gemmFlops = std::move(byElementType);
  }

  /// The per-rank (padded) shape of a tensor of `type` under `placements`.
  std::vector<int64_t> localShape(mlir::RankedTensorType type,
                                  const Placements &placements) const;
  /// The number of elements of that shape (memoized: an op's strategies
  /// give its values a few layouts each, alike ops the same ones).
  double localElements(mlir::RankedTensorType type,
                       const Placements &placements);

  const std::vector<int64_t> &getMeshShape() const { return meshShape; }

private:
  std::vector<int64_t> meshShape;
  layout::MeshCostModel mesh;
  double flopsPerSecond, bytesPerSecond;
  llvm::StringMap<double> gemmFlops;
  /// The GEMM throughput for results of element type `t`.
  double flopsFor(mlir::Type t) const;
  llvm::StringMap<unsigned> ids;
  std::vector<Placements> layouts;
  /// localElements by type and placements.
  llvm::StringMap<double> elements;
  /// Per (type, from, to), keyed by the type and (from << 32 | to): the
  /// plan's seconds, bytes per rank and collectives.
  llvm::DenseMap<std::pair<const void *, uint64_t>,
                 layout::RedistributePlanner::Summary>
      cache;
  /// One planner per tensor type.
  llvm::DenseMap<const void *, std::unique_ptr<layout::RedistributePlanner>>
      planners;
  const layout::RedistributePlanner::Summary &plan(mlir::RankedTensorType type,
                                                   unsigned from, unsigned to);
};

} // namespace spmd

#endif // SPMD_PROPAGATE_STRATEGY_H
