//===- LayoutMath.cpp - Index math of DTensor-style layouts ---------------===//
//
// See LayoutMath.h for the semantics (DTensor placements, torch.chunk rule,
// `_StridedShard`, left-to-right nesting) and the error strategy.
//
//===----------------------------------------------------------------------===//

#include "spmd/Layout/LayoutMath.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace spmd::layout {

//===----------------------------------------------------------------------===//
// ReduceKind, Placement, Interval
//===----------------------------------------------------------------------===//

std::string stringifyReduceKind(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::Sum:
    return "sum";
  case ReduceKind::Avg:
    return "avg";
  case ReduceKind::Max:
    return "max";
  case ReduceKind::Min:
    return "min";
  }
  return "unknown";
}

Placement Placement::replicate() { return Placement(); }

Placement Placement::partial(ReduceKind reduce) {
  Placement p;
  p.kind = Kind::Partial;
  p.reduce = reduce;
  return p;
}

Placement Placement::shard(int64_t dim) {
  Placement p;
  p.kind = Kind::Shard;
  p.dim = dim;
  return p;
}

Placement Placement::stridedShard(int64_t dim, int64_t splitFactor) {
  Placement p;
  p.kind = Kind::StridedShard;
  p.dim = dim;
  p.splitFactor = splitFactor;
  return p;
}

std::string Placement::str() const {
  switch (kind) {
  case Kind::Replicate:
    return "replicate";
  case Kind::Partial:
    return "partial<" + stringifyReduceKind(reduce) + ">";
  case Kind::Shard:
    return "shard<" + std::to_string(dim) + ">";
  case Kind::StridedShard:
    return "strided_shard<" + std::to_string(dim) + ", " +
           std::to_string(splitFactor) + ">";
  }
  return "unknown_placement<" + std::to_string(static_cast<int>(kind)) + ">";
}

std::string joinPlacements(const std::vector<Placement> &placements) {
  std::string s;
  for (size_t i = 0; i < placements.size(); ++i)
    s += (i ? ", " : "") + placements[i].str();
  return s;
}

std::string placementsStr(const std::vector<Placement> &placements) {
  return "[" + joinPlacements(placements) + "]";
}

std::string Interval::str() const {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

//===----------------------------------------------------------------------===//
// torch.chunk rule
//===----------------------------------------------------------------------===//

int64_t chunkSize(int64_t length, int64_t numChunks) {
  assert(length >= 0 && "chunkSize: negative length");
  assert(numChunks >= 1 && "chunkSize: numChunks must be >= 1");
  // ceil(length / numChunks) without overflowing for huge lengths.
  return length / numChunks + (length % numChunks != 0 ? 1 : 0);
}

Interval chunkRange(int64_t length, int64_t numChunks, int64_t index) {
  assert(index >= 0 && index < numChunks && "chunkRange: index out of range");
  int64_t c = chunkSize(length, numChunks);
  // begin = min(length, index * c), computed without overflow.
  int64_t begin = (c == 0 || index > length / c) ? length : index * c;
  begin = std::min(begin, length);
  int64_t end = (c >= length - begin) ? length : begin + c;
  return {begin, end};
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

namespace {

std::string placementName(size_t meshDim, const Placement &p) {
  return "placement " + p.str() + " on mesh dim " + std::to_string(meshDim);
}

} // namespace

std::string checkTensorShape(const std::vector<int64_t> &shape) {
  int64_t elements = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0)
      return "tensor dim " + std::to_string(d) + " has negative size " +
             std::to_string(shape[d]);
    if (shape[d] > kMaxDimSize)
      return "tensor dim " + std::to_string(d) + " has " +
             std::to_string(shape[d]) +
             " elements; spmd partitions dims of at most 2^26 (" +
             std::to_string(kMaxDimSize) + ")";
    // Both factors are at most 2^40 here: no overflow.
    elements *= shape[d];
    if (elements > kMaxTensorElements)
      return "the tensor has more than 2^40 elements (dims 0.." +
             std::to_string(d) + " already hold " + std::to_string(elements) +
             ")";
  }
  return "";
}

std::string validate(const std::vector<int64_t> &globalShape,
                     const std::vector<int64_t> &meshShape,
                     const std::vector<Placement> &placements) {
  std::string shapeReason = checkTensorShape(globalShape);
  if (!shapeReason.empty())
    return shapeReason;

  if (static_cast<int64_t>(meshShape.size()) > kMaxMeshDims)
    return "the mesh has " + std::to_string(meshShape.size()) +
           " dims; spmd supports at most " + std::to_string(kMaxMeshDims);
  int64_t ranks = 1;
  for (size_t m = 0; m < meshShape.size(); ++m) {
    if (meshShape[m] < 1)
      return "mesh dim " + std::to_string(m) + " has size " +
             std::to_string(meshShape[m]) + "; mesh dim sizes must be >= 1";
    // ranks <= kMaxMeshRanks before the product: check by division.
    if (meshShape[m] > kMaxMeshRanks / ranks)
      return "the mesh has more than " + std::to_string(kMaxMeshRanks) +
             " ranks (mesh dim " + std::to_string(m) + " has size " +
             std::to_string(meshShape[m]) + "); spmd partitions for at most " +
             std::to_string(kMaxMeshRanks);
    ranks *= meshShape[m];
  }

  return validatePlacements(globalShape.size(), meshShape.size(), placements);
}

std::string validatePlacements(size_t tensorRank, size_t meshRank,
                               const std::vector<Placement> &placements) {
  if (placements.size() != meshRank)
    return "expected one placement per mesh dim: got " +
           std::to_string(placements.size()) +
           " placements for a mesh of "
           "rank " +
           std::to_string(meshRank);

  int64_t rank = static_cast<int64_t>(tensorRank);
  for (size_t m = 0; m < placements.size(); ++m) {
    const Placement &p = placements[m];
    switch (p.kind) {
    case Placement::Kind::Replicate:
      continue;
    case Placement::Kind::Partial:
      switch (p.reduce) {
      case ReduceKind::Sum:
      case ReduceKind::Avg:
      case ReduceKind::Max:
      case ReduceKind::Min:
        continue;
      }
      return placementName(m, p) + " has an unknown reduce kind " +
             std::to_string(static_cast<int>(p.reduce));
    case Placement::Kind::Shard:
    case Placement::Kind::StridedShard:
      if (p.dim < 0 || p.dim >= rank)
        return placementName(m, p) + " shards tensor dim " +
               std::to_string(p.dim) + ", out of range [0, " +
               std::to_string(rank) + ") for a tensor of rank " +
               std::to_string(rank);
      if (p.kind == Placement::Kind::StridedShard && p.splitFactor < 1)
        return placementName(m, p) + " has split factor " +
               std::to_string(p.splitFactor) + "; it must be >= 1";
      continue;
    }
    return placementName(m, p) + " has an unknown placement kind";
  }
  return "";
}

std::string validate(const std::vector<int64_t> &globalShape,
                     const std::vector<int64_t> &meshShape,
                     const std::vector<Placement> &placements,
                     const std::vector<int64_t> &coords) {
  std::string reason = validate(globalShape, meshShape, placements);
  if (!reason.empty())
    return reason;
  if (coords.size() != meshShape.size())
    return "expected one coordinate per mesh dim: got " +
           std::to_string(coords.size()) + " coordinates for a mesh of rank " +
           std::to_string(meshShape.size());
  for (size_t m = 0; m < coords.size(); ++m)
    if (coords[m] < 0 || coords[m] >= meshShape[m])
      return "coordinate " + std::to_string(coords[m]) + " on mesh dim " +
             std::to_string(m) + " is out of range [0, " +
             std::to_string(meshShape[m]) + ")";
  return "";
}

//===----------------------------------------------------------------------===//
// Local index ranges and shapes
//===----------------------------------------------------------------------===//

namespace {

/// Calls `fn(lo, hi)` for each run of local positions [lo, hi) (relative to
/// the local-so-far sequence of `length` elements) that rank `coord` of `n`
/// holds under the shard-like placement `p`, in local order. Runs are
/// increasing and disjoint; empty ones are skipped.
template <typename Fn>
void forEachHeldRun(int64_t length, const Placement &p, int64_t n,
                    int64_t coord, Fn fn) {
  if (p.kind == Placement::Kind::Shard) {
    Interval r = chunkRange(length, n, coord);
    if (!r.empty())
      fn(r.begin, r.end);
    return;
  }
  assert(p.kind == Placement::Kind::StridedShard);
  for (int64_t j = 0; j < p.splitFactor; ++j) {
    Interval piece = chunkRange(length, p.splitFactor, j);
    if (piece.empty())
      break; // All later pieces are empty too.
    Interval sub = chunkRange(piece.size(), n, coord);
    if (!sub.empty())
      fn(piece.begin + sub.begin, piece.begin + sub.end);
  }
}

/// Number of local positions rank `coord` of `n` holds under `p` out of a
/// local-so-far dim of `length` elements.
int64_t heldLength(int64_t length, const Placement &p, int64_t n,
                   int64_t coord) {
  if (p.kind == Placement::Kind::Shard)
    return chunkRange(length, n, coord).size();
  // forEachHeldRun's pieces in closed form: `full` pieces of c, then one of
  // `rest` < c (torch.chunk), each chunked on the n ranks.
  int64_t c = chunkSize(length, p.splitFactor);
  if (c == 0)
    return 0;
  int64_t full = length / c, rest = length % c;
  return full * chunkRange(c, n, coord).size() +
         (rest ? chunkRange(rest, n, coord).size() : 0);
}

/// Appends `iv` to `out`, dropping it if empty and merging it into the last
/// interval when contiguous with it.
void appendInterval(std::vector<Interval> &out, Interval iv) {
  if (iv.empty())
    return;
  if (!out.empty() && out.back().end == iv.begin) {
    out.back().end = iv.end;
    return;
  }
  out.push_back(iv);
}

} // namespace

std::vector<std::vector<Interval>>
localIndexRanges(const std::vector<int64_t> &globalShape,
                 const std::vector<int64_t> &meshShape,
                 const std::vector<Placement> &placements,
                 const std::vector<int64_t> &coords) {
  assert(validate(globalShape, meshShape, placements, coords).empty() &&
         "localIndexRanges: invalid layout; call validate() first");
  std::vector<std::vector<Interval>> ranges(globalShape.size());
  for (size_t d = 0; d < globalShape.size(); ++d)
    appendInterval(ranges[d], {0, globalShape[d]});

  for (size_t m = 0; m < placements.size(); ++m) {
    const Placement &p = placements[m];
    if (!p.isShardLike())
      continue;
    std::vector<Interval> &cur = ranges[p.dim];
    int64_t length = 0;
    for (const Interval &iv : cur)
      length += iv.size();

    // Held runs come in increasing order, so a single cursor over `cur`
    // maps local positions back to global intervals.
    std::vector<Interval> next;
    size_t idx = 0;    // Interval of `cur` the cursor is in.
    int64_t start = 0; // Local position of cur[idx].begin.
    forEachHeldRun(
        length, p, meshShape[m], coords[m], [&](int64_t lo, int64_t hi) {
          while (idx < cur.size() && start + cur[idx].size() <= lo) {
            start += cur[idx].size();
            ++idx;
          }
          int64_t s = start;
          for (size_t i = idx; i < cur.size() && s < hi; ++i) {
            int64_t e = s + cur[i].size();
            appendInterval(next, {cur[i].begin + (std::max(lo, s) - s),
                                  cur[i].begin + (std::min(hi, e) - s)});
            s = e;
          }
        });
    cur = std::move(next);
  }
  return ranges;
}

std::vector<int64_t> localShape(const std::vector<int64_t> &globalShape,
                                const std::vector<int64_t> &meshShape,
                                const std::vector<Placement> &placements,
                                const std::vector<int64_t> &coords) {
  assert(validate(globalShape, meshShape, placements, coords).empty() &&
         "localShape: invalid layout; call validate() first");
  std::vector<int64_t> shape = globalShape;
  for (size_t m = 0; m < placements.size(); ++m) {
    const Placement &p = placements[m];
    if (p.isShardLike())
      shape[p.dim] = heldLength(shape[p.dim], p, meshShape[m], coords[m]);
  }
  return shape;
}

std::vector<int64_t> maxLocalShape(const std::vector<int64_t> &globalShape,
                                   const std::vector<int64_t> &meshShape,
                                   const std::vector<Placement> &placements) {
  assert(validate(globalShape, meshShape, placements).empty() &&
         "maxLocalShape: invalid layout; call validate() first");
  // A rank's local size along a dim depends only on the local-so-far size
  // and its coordinate, so propagate the set of reachable sizes mesh dim by
  // mesh dim (it stays small) instead of enumerating every rank.
  std::vector<int64_t> result(globalShape.size());
  for (size_t d = 0; d < globalShape.size(); ++d) {
    // Rank 0 holds the largest piece when the shards of d are plain (chunk
    // 0 is the largest at every level) or one StridedShard alone shards d
    // (chunk 0 of every piece): no set of sizes needed.
    bool plain = true;
    int sharding = 0;
    for (const Placement &p : placements)
      if (p.isShardLike() && p.dim == static_cast<int64_t>(d)) {
        ++sharding;
        plain &= p.kind == Placement::Kind::Shard || p.splitFactor == 1;
      }
    if (plain || sharding == 1) {
      int64_t length = globalShape[d];
      for (size_t m = 0; m < placements.size(); ++m)
        if (placements[m].isShardLike() &&
            placements[m].dim == static_cast<int64_t>(d))
          length = heldLength(length, placements[m], meshShape[m], 0);
      result[d] = length;
      continue;
    }
    std::vector<int64_t> sizes = {globalShape[d]};
    for (size_t m = 0; m < placements.size(); ++m) {
      const Placement &p = placements[m];
      if (!p.isShardLike() || p.dim != static_cast<int64_t>(d))
        continue;
      std::vector<int64_t> next;
      for (int64_t length : sizes)
        for (int64_t c = 0; c < meshShape[m]; ++c)
          next.push_back(heldLength(length, p, meshShape[m], c));
      std::sort(next.begin(), next.end());
      next.erase(std::unique(next.begin(), next.end()), next.end());
      sizes = std::move(next);
    }
    result[d] = *std::max_element(sizes.begin(), sizes.end());
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Rank <-> coordinates
//===----------------------------------------------------------------------===//

int64_t numRanks(const std::vector<int64_t> &meshShape) {
  int64_t ranks = 1;
  for (int64_t size : meshShape) {
    assert(size >= 1 && "numRanks: mesh dim sizes must be >= 1");
    assert(ranks <= std::numeric_limits<int64_t>::max() / size &&
           "numRanks: rank count overflows int64");
    ranks *= size;
  }
  return ranks;
}

std::vector<int64_t> rankToCoords(int64_t rank,
                                  const std::vector<int64_t> &meshShape) {
  assert(rank >= 0 && rank < numRanks(meshShape) &&
         "rankToCoords: rank out of range");
  std::vector<int64_t> coords(meshShape.size());
  for (size_t i = meshShape.size(); i-- > 0;) {
    coords[i] = rank % meshShape[i];
    rank /= meshShape[i];
  }
  return coords;
}

int64_t coordsToRank(const std::vector<int64_t> &coords,
                     const std::vector<int64_t> &meshShape) {
  assert(coords.size() == meshShape.size() &&
         "coordsToRank: one coordinate per mesh dim expected");
  int64_t rank = 0;
  for (size_t i = 0; i < coords.size(); ++i) {
    assert(coords[i] >= 0 && coords[i] < meshShape[i] &&
           "coordsToRank: coordinate out of range");
    rank = rank * meshShape[i] + coords[i];
  }
  return rank;
}

} // namespace spmd::layout
