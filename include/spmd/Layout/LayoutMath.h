//===- LayoutMath.h - Index math of DTensor-style layouts -------*- C++ -*-===//
//
// Pure C++17 index math for layouts: which global elements of a tensor each
// rank of a device mesh holds, given one placement per mesh dim. No MLIR or
// LLVM dependency; the dialect attributes, verifiers, the partitioner and the
// redistribute planner build on it.
//
// Semantics are PyTorch DTensor's (DESIGN.md section 2):
//  - Replicate: every rank along the mesh dim holds the whole local-so-far
//    tensor.
//  - Partial(op): every rank holds a full-shaped (local-so-far) value still to
//    be reduced with op; for index math it behaves like Replicate.
//  - Shard(d): torch.chunk rule on tensor dim d, see chunkRange().
//  - StridedShard(d, sf): DTensor `_StridedShard`: tensor dim d is cut into sf
//    pieces (torch.chunk rule), each piece is chunked n ways (torch.chunk
//    rule) and rank i holds the concatenation, in piece order, of every
//    piece's i-th chunk. sf == 1 is the same as Shard(d).
//  - Mesh dims sharding the same tensor dim nest left to right (mesh dim 0
//    first), each on the local-so-far size and positions.
//
// Error strategy: validate() checks an input and returns a human-readable
// reason on failure. Every other function documents the precondition that
// validate() (or the stated argument checks) passed, asserts it in debug
// builds, and has unspecified results otherwise. Callers that see untrusted
// input (MLIR verifiers, plan parsers) call validate() first and turn a
// non-empty reason into a diagnostic.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_LAYOUT_LAYOUTMATH_H
#define SPMD_LAYOUT_LAYOUTMATH_H

#include <cstdint>
#include <string>
#include <vector>

namespace spmd::layout {

/// The reduction a Partial placement still owes (DTensor `Partial`'s
/// reduce_op): sum, avg, max or min.
enum class ReduceKind { Sum, Avg, Max, Min };

/// Returns the lower-case name of `kind`: "sum", "avg", "max" or "min"
/// ("unknown" for a value outside the enum).
std::string stringifyReduceKind(ReduceKind kind);

/// One mesh dim's placement (DTensor `Placement`). Only the fields relevant to
/// `kind` carry meaning: `dim` for Shard/StridedShard, `splitFactor` for
/// StridedShard, `reduce` for Partial. The others are ignored by operator==,
/// str() and every function of this header.
struct Placement {
  enum class Kind { Replicate, Partial, Shard, StridedShard };

  Kind kind = Kind::Replicate;
  /// Shard / StridedShard: the (non-negative, already normalized) tensor dim.
  int64_t dim = -1;
  /// StridedShard only: number of pieces the tensor dim is first cut into.
  int64_t splitFactor = 1;
  /// Partial only: the pending reduction.
  ReduceKind reduce = ReduceKind::Sum;

  /// DTensor `Replicate()`.
  static Placement replicate();
  /// DTensor `Partial(reduce_op)`.
  static Placement partial(ReduceKind reduce = ReduceKind::Sum);
  /// DTensor `Shard(dim)`. `dim` is not checked here; see validate().
  static Placement shard(int64_t dim);
  /// DTensor `_StridedShard(dim, split_factor)`. Arguments are not checked
  /// here; see validate().
  static Placement stridedShard(int64_t dim, int64_t splitFactor);

  /// True for Shard and StridedShard.
  bool isShardLike() const {
    return kind == Kind::Shard || kind == Kind::StridedShard;
  }

  /// Compares `kind` and the fields relevant to it. StridedShard(d, 1) and
  /// Shard(d) hold the same elements but compare unequal (different kinds).
  bool operator==(const Placement &other) const {
    if (kind != other.kind)
      return false;
    switch (kind) {
    case Kind::Replicate:
      return true;
    case Kind::Partial:
      return reduce == other.reduce;
    case Kind::Shard:
      return dim == other.dim;
    case Kind::StridedShard:
      return dim == other.dim && splitFactor == other.splitFactor;
    }
    // Unknown kinds (out-of-enum values): compare every field.
    return dim == other.dim && splitFactor == other.splitFactor &&
           reduce == other.reduce;
  }
  bool operator!=(const Placement &other) const { return !(*this == other); }

  /// Textual form: "replicate", "partial<sum>", "shard<0>",
  /// "strided_shard<0, 3>".
  std::string str() const;
};

/// "shard<0>, replicate": the placements' textual forms, comma-separated.
std::string joinPlacements(const std::vector<Placement> &placements);
/// "[shard<0>, replicate]".
std::string placementsStr(const std::vector<Placement> &placements);

/// Half-open interval [begin, end) of global indices along one tensor dim.
struct Interval {
  int64_t begin = 0;
  int64_t end = 0;

  /// Number of indices, end - begin (callers keep begin <= end).
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const Interval &other) const {
    return begin == other.begin && end == other.end;
  }
  bool operator!=(const Interval &other) const { return !(*this == other); }
  /// Textual form "[begin, end)".
  std::string str() const;
};

/// Limits of what spmd partitions, checked by validate() and
/// checkTensorShape() (docs/semantics.md, "Limits"). The partitioner's
/// per-rank index tables grow with the ranks times the elements of a
/// redistributed dim, so the bounds keep compile time and memory finite.
/// Mesh dims (DeviceMesh ndim).
constexpr int64_t kMaxMeshDims = 8;
/// Ranks of a mesh: the product of its dim sizes.
constexpr int64_t kMaxMeshRanks = 4096;
/// Elements of one tensor dim (2^26).
constexpr int64_t kMaxDimSize = int64_t(1) << 26;
/// Elements of one tensor (2^40): its byte size fits int64 for any dtype.
constexpr int64_t kMaxTensorElements = int64_t(1) << 40;

/// Checks a tensor shape against the limits above: returns the empty string,
/// or a reason naming the dim ("tensor dim 1 has 2^30 elements; ...").
std::string checkTensorShape(const std::vector<int64_t> &shape);

/// torch.chunk chunk size: ceil(length / numChunks), in elements.
/// Preconditions (asserted): length >= 0, numChunks >= 1.
int64_t chunkSize(int64_t length, int64_t numChunks);

/// torch.chunk rule: the positions [i*c, min(length, (i+1)*c)) with
/// c = chunkSize(length, numChunks) that chunk `index` of a dim of `length`
/// elements covers; an empty interval at `length` when i*c >= length (e.g.
/// length 5, 4 chunks: sizes 2, 2, 1, 0). Positions are relative to the
/// chunked sequence (0-based).
/// Preconditions (asserted): length >= 0, numChunks >= 1,
/// 0 <= index < numChunks.
Interval chunkRange(int64_t length, int64_t numChunks, int64_t index);

/// Checks a layout applied to a tensor. `globalShape` is the global tensor
/// shape (one size per tensor dim), `meshShape` the device mesh shape (one
/// size per mesh dim), `placements` one placement per mesh dim. Returns the
/// empty string when the layout is well formed, otherwise a human-readable
/// reason naming the offending entry: a negative tensor dim size, a shape
/// beyond the limits (checkTensorShape()), a mesh dim size < 1, more than
/// kMaxMeshDims mesh dims or kMaxMeshRanks ranks, placements.size() !=
/// mesh rank, an unknown placement kind or reduce kind, a Shard/StridedShard
/// dim outside [0, tensor rank), a split factor < 1.
/// Negative (Python-style) shard dims are rejected: normalize them first.
std::string validate(const std::vector<int64_t> &globalShape,
                     const std::vector<int64_t> &meshShape,
                     const std::vector<Placement> &placements);

/// validate()'s checks of the placements alone, for a tensor of rank
/// `tensorRank` on a mesh of rank `meshRank` whose shapes validate() has
/// accepted: one placement per mesh dim, known kinds and reduce kinds,
/// Shard/StridedShard dims in range, split factors >= 1.
std::string validatePlacements(size_t tensorRank, size_t meshRank,
                               const std::vector<Placement> &placements);

/// As above, and also checks the coordinates of one rank: coords.size() must
/// equal the mesh rank and coords[m] must lie in [0, meshShape[m]).
std::string validate(const std::vector<int64_t> &globalShape,
                     const std::vector<int64_t> &meshShape,
                     const std::vector<Placement> &placements,
                     const std::vector<int64_t> &coords);

/// The global indices the rank at mesh coordinates `coords` holds: one list
/// per tensor dim, in local order (position 0 of the local shard first), with
/// empty intervals dropped and intervals that are adjacent in local order
/// and contiguous globally merged. A dim with no local elements yields an
/// empty list. The local tensor is the cartesian product of the per-dim lists.
/// Semantics: DTensor placements as described at the top of this header
/// (torch.chunk rule, `_StridedShard`, left-to-right nesting).
/// Precondition (asserted): validate(globalShape, meshShape, placements,
/// coords) is empty.
std::vector<std::vector<Interval>>
localIndexRanges(const std::vector<int64_t> &globalShape,
                 const std::vector<int64_t> &meshShape,
                 const std::vector<Placement> &placements,
                 const std::vector<int64_t> &coords);

/// The shape of the local tensor of the rank at `coords` (elements per tensor
/// dim); equals the total sizes of localIndexRanges() but is cheaper
/// (DTensor's `compute_local_shape_and_global_offset` sizes).
/// Precondition (asserted): validate(globalShape, meshShape, placements,
/// coords) is empty.
std::vector<int64_t> localShape(const std::vector<int64_t> &globalShape,
                                const std::vector<int64_t> &meshShape,
                                const std::vector<Placement> &placements,
                                const std::vector<int64_t> &coords);

/// Per tensor dim, the maximum of localShape() over all ranks of the mesh:
/// what a padded (even) representation allocates per rank. For a lone
/// Shard(d) on a dim of L elements this is chunkSize(L, n); once shards nest
/// with StridedShard it need not be rank 0's shape (L=7, mesh {2,2},
/// [Shard(0), StridedShard(0, 3)]: rank (0,0) holds 2 rows, rank (1,0) 3).
/// Precondition (asserted): validate(globalShape, meshShape, placements) is
/// empty.
std::vector<int64_t> maxLocalShape(const std::vector<int64_t> &globalShape,
                                   const std::vector<int64_t> &meshShape,
                                   const std::vector<Placement> &placements);

/// Number of ranks of the mesh: the product of its dim sizes (1 for a 0-D
/// mesh). Precondition (asserted): every size >= 1 and the product fits in
/// int64_t (validate() checks both).
int64_t numRanks(const std::vector<int64_t> &meshShape);

/// Mesh coordinates of linear `rank`, row-major (last mesh dim varies
/// fastest), like DeviceMesh's rank layout. Preconditions (asserted): every
/// mesh size >= 1, 0 <= rank < numRanks(meshShape).
std::vector<int64_t> rankToCoords(int64_t rank,
                                  const std::vector<int64_t> &meshShape);

/// Inverse of rankToCoords(): the row-major linear rank of `coords`.
/// Preconditions (asserted): coords.size() == meshShape.size() and
/// 0 <= coords[m] < meshShape[m].
int64_t coordsToRank(const std::vector<int64_t> &coords,
                     const std::vector<int64_t> &meshShape);

} // namespace spmd::layout

#endif // SPMD_LAYOUT_LAYOUTMATH_H
