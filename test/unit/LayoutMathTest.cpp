//===- LayoutMathTest.cpp - Tests of spmd::layout index math --------------===//
//
// Targeted cases of the DTensor placement semantics, validate() rejections,
// and an exhaustive comparison against an independent brute-force reference
// that simulates torch.chunk / torch.cat on explicit index vectors.
//
//===----------------------------------------------------------------------===//

#include "spmd/Layout/LayoutMath.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <ostream>
#include <sstream>

namespace spmd::layout {
// Readable gtest failure messages.
void PrintTo(const Interval &iv, std::ostream *os) { *os << iv.str(); }
void PrintTo(const Placement &p, std::ostream *os) { *os << p.str(); }
} // namespace spmd::layout

using namespace spmd::layout;

namespace {

using Shape = std::vector<int64_t>;
using Ranges = std::vector<Interval>;
using Placements = std::vector<Placement>;

const Placement R = Placement::replicate();
const Placement P = Placement::partial();
const Placement S0 = Placement::shard(0);
const Placement S1 = Placement::shard(1);

Placement ss(int64_t dim, int64_t sf) {
  return Placement::stridedShard(dim, sf);
}

//===----------------------------------------------------------------------===//
// Independent brute-force reference
//===----------------------------------------------------------------------===//

using Indices = std::vector<int64_t>;

/// torch.chunk(v, n) simulated by slicing: consecutive pieces of
/// ceil(len / n) elements, then padded with empty pieces up to n (torch may
/// return fewer than n chunks; the missing trailing ones hold nothing).
std::vector<Indices> torchChunk(const Indices &v, int64_t n) {
  std::vector<Indices> out;
  size_t per = (v.size() + n - 1) / n;
  for (size_t s = 0; s < v.size(); s += per)
    out.emplace_back(v.begin() + s, v.begin() + std::min(v.size(), s + per));
  out.resize(n);
  return out;
}

/// torch.chunk(v, n)[i]: the same slicing, producing only the i-th chunk.
Indices torchChunkAt(const Indices &v, int64_t n, int64_t i) {
  size_t per = (v.size() + n - 1) / n;
  size_t start = std::min(v.size(), per * i);
  return Indices(v.begin() + start,
                 v.begin() + std::min(v.size(), start + per));
}

/// The global indices each tensor dim of rank `coords` holds, in local
/// order, computed by applying the placements mesh dim by mesh dim to
/// explicit index vectors (torch.chunk + torch.cat simulation).
std::vector<Indices> referenceLocal(const Shape &shape, const Shape &mesh,
                                    const Placements &placements,
                                    const Shape &coords) {
  std::vector<Indices> dims(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    dims[d].resize(shape[d]);
    std::iota(dims[d].begin(), dims[d].end(), 0); // 0, 1, ..., L-1
  }
  for (size_t m = 0; m < mesh.size(); ++m) {
    const Placement &p = placements[m];
    if (p.kind == Placement::Kind::Shard) {
      dims[p.dim] = torchChunkAt(dims[p.dim], mesh[m], coords[m]);
    } else if (p.kind == Placement::Kind::StridedShard) {
      Indices cat;
      for (const Indices &piece : torchChunk(dims[p.dim], p.splitFactor)) {
        Indices mine = torchChunkAt(piece, mesh[m], coords[m]);
        cat.insert(cat.end(), mine.begin(), mine.end());
      }
      dims[p.dim] = cat;
    }
  }
  return dims;
}

/// True when `ranges`, expanded in order, are exactly the indices `ref`.
bool sameIndices(const Ranges &ranges, const Indices &ref) {
  size_t pos = 0;
  for (const Interval &iv : ranges)
    for (int64_t i = iv.begin; i < iv.end; ++i, ++pos)
      if (pos >= ref.size() || ref[pos] != i)
        return false;
  return pos == ref.size();
}

template <typename T> std::string join(const std::vector<T> &v) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i)
      os << ", ";
    if constexpr (std::is_same_v<T, Placement> || std::is_same_v<T, Interval>)
      os << v[i].str();
    else
      os << v[i];
  }
  os << "]";
  return os.str();
}

std::string describe(const Shape &shape, const Shape &mesh,
                     const Placements &placements) {
  return "globalShape=" + join(shape) + " mesh=" + join(mesh) +
         " placements=" + join(placements);
}

/// Checks one layout for every rank: localIndexRanges and localShape equal
/// the reference, intervals are non-empty and merged, maxLocalShape is the
/// maximum over ranks, and all ranks together cover every global element
/// exactly R times (R = product of the Replicate/Partial mesh dim sizes).
/// Returns false (after one ADD_FAILURE) on the first mismatch.
bool checkLayout(const Shape &shape, const Shape &mesh,
                 const Placements &placements) {
  auto fail = [&](const std::string &what) {
    ADD_FAILURE() << describe(shape, mesh, placements) << ": " << what;
    return false;
  };
  std::string reason = validate(shape, mesh, placements);
  if (!reason.empty())
    return fail("unexpectedly invalid: " + reason);

  int64_t replicas = 1;
  for (size_t m = 0; m < mesh.size(); ++m)
    if (!placements[m].isShardLike())
      replicas *= mesh[m];

  // Coverage counts over the row-major global index grid, accumulated with
  // an N-D difference array (one corner update per box of intervals).
  size_t rank = shape.size();
  Shape strides(rank, 1);
  for (size_t d = rank; d-- > 1;)
    strides[d - 1] = strides[d] * (shape[d] + 1);
  int64_t gridSize = rank ? strides[0] * (shape[0] + 1) : 1;
  std::vector<int64_t> diff(gridSize, 0);

  Shape maxShape(rank, 0);
  int64_t numRanksInMesh = numRanks(mesh);
  for (int64_t r = 0; r < numRanksInMesh; ++r) {
    Shape coords = rankToCoords(r, mesh);
    // Built only on failure: string formatting dominates the run time.
    auto at = [&](size_t d) {
      return " at coords=" + join(coords) + " dim " + std::to_string(d);
    };
    if (coordsToRank(coords, mesh) != r)
      return fail("coordsToRank(rankToCoords(r)) != r" + at(0));
    std::vector<Ranges> ranges =
        localIndexRanges(shape, mesh, placements, coords);
    Shape local = localShape(shape, mesh, placements, coords);
    std::vector<Indices> ref = referenceLocal(shape, mesh, placements, coords);
    if (ranges.size() != rank || local.size() != rank)
      return fail("wrong result rank" + at(0));
    for (size_t d = 0; d < rank; ++d) {
      if (!sameIndices(ranges[d], ref[d]))
        return fail("localIndexRanges " + join(ranges[d]) +
                    " != reference indices " + join(ref[d]) + at(d));
      if (local[d] != static_cast<int64_t>(ref[d].size()))
        return fail("localShape " + std::to_string(local[d]) +
                    " != reference size " + std::to_string(ref[d].size()) +
                    at(d));
      for (size_t i = 0; i < ranges[d].size(); ++i) {
        if (ranges[d][i].empty())
          return fail("empty interval in " + join(ranges[d]) + at(d));
        if (i && ranges[d][i - 1].end == ranges[d][i].begin)
          return fail("unmerged intervals in " + join(ranges[d]) + at(d));
      }
      maxShape[d] = std::max(maxShape[d], local[d]);
    }
    // Add +1 on every box of the cartesian product of the per-dim intervals:
    // 2^rank signed corner updates per box (a 0-D tensor is one 0-D box).
    std::vector<size_t> pick(rank, 0);
    bool anyEmpty = false;
    for (size_t d = 0; d < rank; ++d)
      anyEmpty |= ranges[d].empty();
    while (!anyEmpty) {
      for (unsigned corner = 0; corner < (1u << rank); ++corner) {
        int64_t offset = 0, sign = 1;
        for (size_t d = 0; d < rank; ++d) {
          const Interval &iv = ranges[d][pick[d]];
          bool hi = corner & (1u << d);
          offset += strides[d] * (hi ? iv.end : iv.begin);
          sign = hi ? -sign : sign;
        }
        diff[offset] += sign;
      }
      size_t d = rank;
      while (d > 0 && ++pick[d - 1] == ranges[d - 1].size())
        pick[--d] = 0;
      if (d == 0)
        break;
    }
  }

  if (maxLocalShape(shape, mesh, placements) != maxShape)
    return fail("maxLocalShape " +
                join(maxLocalShape(shape, mesh, placements)) +
                " != max over ranks " + join(maxShape));

  // Prefix sums along each dim turn the difference array into counts.
  for (size_t d = 0; d < rank; ++d)
    for (int64_t i = 0; i < gridSize; ++i)
      if ((i / strides[d]) % (shape[d] + 1) != 0)
        diff[i] += diff[i - strides[d]];
  Shape index(rank);
  for (int64_t i = 0; i < gridSize; ++i) {
    bool inside = true;
    for (size_t d = 0; d < rank; ++d) {
      index[d] = (i / strides[d]) % (shape[d] + 1);
      inside &= index[d] < shape[d];
    }
    if (inside && diff[i] != replicas)
      return fail("global element " + join(index) + " is held " +
                  std::to_string(diff[i]) + " times, expected " +
                  std::to_string(replicas));
  }
  return true;
}

/// Calls `fn(mesh, placements)` for every mesh of rank 1..maxMeshRank with
/// dim sizes in 1..maxDimSize and every assignment of `options` to its dims.
template <typename Fn>
void forEachLayout(size_t maxMeshRank, int64_t maxDimSize,
                   const Placements &options, Fn fn) {
  for (size_t meshRank = 1; meshRank <= maxMeshRank; ++meshRank) {
    Shape mesh(meshRank, 1);
    while (true) {
      std::vector<size_t> pick(meshRank, 0);
      while (true) {
        Placements placements;
        for (size_t i : pick)
          placements.push_back(options[i]);
        fn(mesh, placements);
        size_t d = meshRank;
        while (d > 0 && ++pick[d - 1] == options.size())
          pick[--d] = 0;
        if (d == 0)
          break;
      }
      size_t d = meshRank;
      while (d > 0 && ++mesh[d - 1] > maxDimSize)
        mesh[--d] = 1;
      if (d == 0)
        break;
    }
  }
}

//===----------------------------------------------------------------------===//
// torch.chunk rule
//===----------------------------------------------------------------------===//

Shape chunkSizes(int64_t length, int64_t n) {
  Shape sizes;
  for (int64_t i = 0; i < n; ++i)
    sizes.push_back(chunkRange(length, n, i).size());
  return sizes;
}

TEST(LayoutMathChunk, TorchChunkExamples) {
  EXPECT_EQ(chunkSize(10, 4), 3);
  EXPECT_EQ(chunkSizes(10, 4), (Shape{3, 3, 3, 1}));
  EXPECT_EQ(chunkRange(10, 4, 3), (Interval{9, 10}));

  EXPECT_EQ(chunkSize(5, 4), 2);
  EXPECT_EQ(chunkSizes(5, 4), (Shape{2, 2, 1, 0}));
  EXPECT_EQ(chunkRange(5, 4, 2), (Interval{4, 5}));
  EXPECT_TRUE(chunkRange(5, 4, 3).empty());

  // torch.chunk(arange(6), 4) has only 3 chunks of 2: the last rank is empty.
  EXPECT_EQ(chunkSizes(6, 4), (Shape{2, 2, 2, 0}));
  EXPECT_EQ(chunkSizes(0, 3), (Shape{0, 0, 0}));
  EXPECT_EQ(chunkSizes(7, 1), (Shape{7}));
  EXPECT_EQ(chunkSizes(2, 5), (Shape{1, 1, 0, 0, 0}));
}

TEST(LayoutMathChunk, HugeLengthDoesNotOverflow) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(chunkSize(big, 2), big / 2 + 1);
  EXPECT_EQ(chunkRange(big, 2, 1), (Interval{big / 2 + 1, big}));
  EXPECT_EQ(chunkRange(big, 3, 2).end, big);
  EXPECT_EQ(chunkRange(big, big, big - 1), (Interval{big - 1, big}));
}

//===----------------------------------------------------------------------===//
// Placement
//===----------------------------------------------------------------------===//

TEST(LayoutMathPlacement, StrAndEquality) {
  EXPECT_EQ(R.str(), "replicate");
  EXPECT_EQ(P.str(), "partial<sum>");
  EXPECT_EQ(Placement::partial(ReduceKind::Avg).str(), "partial<avg>");
  EXPECT_EQ(Placement::partial(ReduceKind::Max).str(), "partial<max>");
  EXPECT_EQ(Placement::partial(ReduceKind::Min).str(), "partial<min>");
  EXPECT_EQ(S0.str(), "shard<0>");
  EXPECT_EQ(ss(0, 3).str(), "strided_shard<0, 3>");

  EXPECT_EQ(S1, Placement::shard(1));
  EXPECT_NE(S0, S1);
  EXPECT_NE(S0, ss(0, 1)); // Same elements, different kinds.
  EXPECT_NE(ss(0, 2), ss(0, 3));
  EXPECT_NE(P, Placement::partial(ReduceKind::Max));
  EXPECT_NE(R, P);
  // Fields irrelevant to the kind are ignored.
  Placement odd = R;
  odd.dim = 4;
  odd.splitFactor = 7;
  EXPECT_EQ(odd, R);

  EXPECT_TRUE(S0.isShardLike());
  EXPECT_TRUE(ss(1, 2).isShardLike());
  EXPECT_FALSE(R.isShardLike());
  EXPECT_FALSE(P.isShardLike());
}

//===----------------------------------------------------------------------===//
// Targeted layouts
//===----------------------------------------------------------------------===//

TEST(LayoutMathLocal, ShardUneven) {
  std::vector<Ranges> expected = {{{0, 3}}, {{3, 6}}, {{6, 9}}, {{9, 10}}};
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(localIndexRanges({10}, {4}, {S0}, {r}),
              std::vector<Ranges>{expected[r]});
    EXPECT_EQ(localShape({10}, {4}, {S0}, {r}), Shape{expected[r][0].size()});
  }
  EXPECT_EQ(maxLocalShape({10}, {4}, {S0}), Shape{3});
}

TEST(LayoutMathLocal, EmptyShards) {
  // L=5 on 4 ranks: 2, 2, 1, 0; the last rank's list is empty.
  EXPECT_EQ(localIndexRanges({5}, {4}, {S0}, {3}), std::vector<Ranges>{{}});
  EXPECT_EQ(localShape({5}, {4}, {S0}, {3}), Shape{0});
  // L=0: every rank empty, also with StridedShard.
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(localIndexRanges({0}, {3}, {S0}, {r}), std::vector<Ranges>{{}});
    EXPECT_EQ(localIndexRanges({0}, {3}, {ss(0, 2)}, {r}),
              std::vector<Ranges>{{}});
  }
  EXPECT_EQ(maxLocalShape({0}, {3}, {S0}), Shape{0});
  // Only the sharded dim shrinks.
  EXPECT_EQ(localShape({4, 2}, {3}, {S1}, {2}), (Shape{4, 0}));
  EXPECT_EQ(localIndexRanges({4, 2}, {3}, {S1}, {2}),
            (std::vector<Ranges>{{{0, 4}}, {}}));
}

TEST(LayoutMathLocal, ReplicateAndPartialKeepFullShape) {
  for (const Placement &p : {R, P, Placement::partial(ReduceKind::Min)})
    for (int64_t r = 0; r < 3; ++r)
      EXPECT_EQ(localIndexRanges({7, 2}, {3}, {p}, {r}),
                (std::vector<Ranges>{{{0, 7}}, {{0, 2}}}));
  // A 0-D tensor on a mesh.
  EXPECT_EQ(localShape({}, {2, 2}, {R, P}, {1, 1}), Shape{});
  EXPECT_EQ(maxLocalShape({}, {2}, {R}), Shape{});
}

TEST(LayoutMathLocal, NestedShardSameDim) {
  // Mesh {2,2}, [Shard(0), Shard(0)], L=8: rank (a,b) holds rows
  // [4a+2b, 4a+2b+2).
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 2; ++b)
      EXPECT_EQ(localIndexRanges({8}, {2, 2}, {S0, S0}, {a, b}),
                (std::vector<Ranges>{{{4 * a + 2 * b, 4 * a + 2 * b + 2}}}));
  EXPECT_EQ(localIndexRanges({8}, {2, 2}, {S0, S0}, {0, 1}),
            (std::vector<Ranges>{{{2, 4}}}));
  // Uneven L=7: chunk(7,2) = [0,4),[4,7); then chunk of each by 2.
  EXPECT_EQ(localIndexRanges({7}, {2, 2}, {S0, S0}, {1, 0}),
            (std::vector<Ranges>{{{4, 6}}}));
  EXPECT_EQ(localIndexRanges({7}, {2, 2}, {S0, S0}, {1, 1}),
            (std::vector<Ranges>{{{6, 7}}}));
  // Replicate in between does not change the nesting.
  EXPECT_EQ(localIndexRanges({8}, {2, 3, 2}, {S0, R, S0}, {1, 2, 1}),
            (std::vector<Ranges>{{{6, 8}}}));
}

TEST(LayoutMathLocal, ShardDifferentDims) {
  // Mesh {2,3}, [Shard(1), Shard(0)] on a 4x9 tensor.
  EXPECT_EQ(localIndexRanges({4, 9}, {2, 3}, {S1, S0}, {1, 1}),
            (std::vector<Ranges>{{{2, 4}}, {{5, 9}}}));
  EXPECT_EQ(localShape({4, 9}, {2, 3}, {S1, S0}, {1, 1}), (Shape{2, 4}));
  // chunk(4, 3) = 2, 2, 0: the last tp rank holds no rows.
  EXPECT_EQ(localIndexRanges({4, 9}, {2, 3}, {S1, S0}, {1, 2}),
            (std::vector<Ranges>{{}, {{5, 9}}}));
  EXPECT_EQ(localShape({4, 9}, {2, 3}, {S1, S0}, {1, 2}), (Shape{0, 4}));
  EXPECT_EQ(maxLocalShape({4, 9}, {2, 3}, {S1, S0}), (Shape{2, 5}));
}

TEST(LayoutMathLocal, StridedShardExamples) {
  // L=12, sf=3, n=2: pieces [0,4),[4,8),[8,12); rank 0 takes the first half
  // of each piece.
  EXPECT_EQ(localIndexRanges({12}, {2}, {ss(0, 3)}, {0}),
            (std::vector<Ranges>{{{0, 2}, {4, 6}, {8, 10}}}));
  EXPECT_EQ(localIndexRanges({12}, {2}, {ss(0, 3)}, {1}),
            (std::vector<Ranges>{{{2, 4}, {6, 8}, {10, 12}}}));
  EXPECT_EQ(localShape({12}, {2}, {ss(0, 3)}, {1}), Shape{6});
  // Uneven L=10, sf=3: pieces of 4, 4, 2.
  EXPECT_EQ(localIndexRanges({10}, {2}, {ss(0, 3)}, {0}),
            (std::vector<Ranges>{{{0, 2}, {4, 6}, {8, 9}}}));
  EXPECT_EQ(localIndexRanges({10}, {2}, {ss(0, 3)}, {1}),
            (std::vector<Ranges>{{{2, 4}, {6, 8}, {9, 10}}}));
  // L=4, sf=3: pieces of 2, 2, 0; on 3 ranks the last rank is empty.
  EXPECT_EQ(localIndexRanges({4}, {3}, {ss(0, 3)}, {2}),
            (std::vector<Ranges>{{}}));
  // One rank: the pieces are contiguous again and get merged.
  EXPECT_EQ(localIndexRanges({9}, {1}, {ss(0, 3)}, {0}),
            (std::vector<Ranges>{{{0, 9}}}));
  // Packed q|k|v rows (sf=3) on a 2-D weight, sharded on dim 0.
  // 6 rows = 3 pieces of 2, chunk(2, 3) = 1, 1, 0: rank 2 holds nothing.
  EXPECT_EQ(localIndexRanges({6, 5}, {3}, {ss(0, 3)}, {1}),
            (std::vector<Ranges>{{{1, 2}, {3, 4}, {5, 6}}, {{0, 5}}}));
  EXPECT_EQ(localIndexRanges({6, 5}, {3}, {ss(0, 3)}, {2}),
            (std::vector<Ranges>{{}, {{0, 5}}}));
  EXPECT_EQ(localIndexRanges({18, 5}, {3}, {ss(0, 3)}, {1}),
            (std::vector<Ranges>{{{2, 4}, {8, 10}, {14, 16}}, {{0, 5}}}));
  EXPECT_EQ(maxLocalShape({10}, {2}, {ss(0, 3)}), Shape{5});
}

TEST(LayoutMathLocal, StridedShardFactorOneEqualsShard) {
  for (int64_t length = 0; length <= 20; ++length)
    for (int64_t n = 1; n <= 5; ++n)
      for (int64_t r = 0; r < n; ++r) {
        EXPECT_EQ(localIndexRanges({length}, {n}, {ss(0, 1)}, {r}),
                  localIndexRanges({length}, {n}, {S0}, {r}))
            << "L=" << length << " n=" << n << " r=" << r;
        EXPECT_EQ(localShape({length}, {n}, {ss(0, 1)}, {r}),
                  localShape({length}, {n}, {S0}, {r}));
      }
}

/// "TP Shard(0) on tp first, then Shard(0) on dp of the TP-local piece".
Ranges tpThenDp(int64_t length, int64_t dpSize, int64_t tpSize, int64_t dp,
                int64_t tp) {
  Interval tpPiece = chunkRange(length, tpSize, tp);
  Interval dpPiece = chunkRange(tpPiece.size(), dpSize, dp);
  if (dpPiece.empty())
    return {};
  return {{tpPiece.begin + dpPiece.begin, tpPiece.begin + dpPiece.end}};
}

TEST(LayoutMathLocal, FsdpOverTpEquivalence) {
  // DTensor's FSDP-over-TP layout: mesh (dp, tp), [StridedShard(0, tp),
  // Shard(0)] holds the rows of "TP first, then dp of the TP-local piece".
  // On a 2x2 mesh this holds for every L (even and odd).
  for (int64_t length = 0; length <= 24; ++length)
    for (int64_t dp = 0; dp < 2; ++dp)
      for (int64_t tp = 0; tp < 2; ++tp)
        EXPECT_EQ(localIndexRanges({length}, {2, 2}, {ss(0, 2), S0}, {dp, tp}),
                  std::vector<Ranges>{tpThenDp(length, 2, 2, dp, tp)})
            << "L=" << length << " dp=" << dp << " tp=" << tp;
  // On any mesh it holds when tp divides L.
  for (int64_t dpSize = 1; dpSize <= 4; ++dpSize)
    for (int64_t tpSize = 1; tpSize <= 4; ++tpSize)
      for (int64_t length = 0; length <= 30; length += tpSize)
        for (int64_t dp = 0; dp < dpSize; ++dp)
          for (int64_t tp = 0; tp < tpSize; ++tp)
            EXPECT_EQ(
                localIndexRanges({length}, {dpSize, tpSize},
                                 {ss(0, tpSize), S0}, {dp, tp}),
                std::vector<Ranges>{tpThenDp(length, dpSize, tpSize, dp, tp)})
                << "L=" << length << " mesh=" << dpSize << "x" << tpSize
                << " dp=" << dp << " tp=" << tp;
  // It is not an identity in general: dp=3, tp=2, L=7: rank (2, 0) holds
  // row 6 while TP-first gives it nothing.
  EXPECT_EQ(localIndexRanges({7}, {3, 2}, {ss(0, 2), S0}, {2, 0}),
            (std::vector<Ranges>{{{6, 7}}}));
  EXPECT_TRUE(tpThenDp(7, 3, 2, 2, 0).empty());
}

TEST(LayoutMathLocal, MaxLocalShapeNested) {
  // Rank 0 is not always the largest once StridedShard nests: L=7 on mesh
  // {2,2} [Shard(0), StridedShard(0, 3)]: rank (0,0) gets 4 rows cut into
  // pieces 2,2,0 and keeps 1+1; rank (1,0) gets 3 rows cut into 1,1,1 and
  // keeps 1+1+1.
  EXPECT_EQ(localShape({7}, {2, 2}, {S0, ss(0, 3)}, {0, 0}), Shape{2});
  EXPECT_EQ(localShape({7}, {2, 2}, {S0, ss(0, 3)}, {1, 0}), Shape{3});
  EXPECT_EQ(maxLocalShape({7}, {2, 2}, {S0, ss(0, 3)}), Shape{3});

  // A bigger case, compared with the maximum over all ranks.
  Shape shape = {13, 17};
  Shape mesh = {3, 2, 4};
  Placements placements = {ss(0, 3), S0, ss(1, 3)};
  Shape expected(2, 0);
  for (int64_t r = 0; r < numRanks(mesh); ++r) {
    Shape local = localShape(shape, mesh, placements, rankToCoords(r, mesh));
    for (size_t d = 0; d < 2; ++d)
      expected[d] = std::max(expected[d], local[d]);
  }
  EXPECT_EQ(maxLocalShape(shape, mesh, placements), expected);
}

//===----------------------------------------------------------------------===//
// Rank <-> coordinates
//===----------------------------------------------------------------------===//

TEST(LayoutMathMesh, RankCoordsRowMajor) {
  Shape mesh = {2, 3, 4};
  EXPECT_EQ(numRanks(mesh), 24);
  EXPECT_EQ(numRanks({}), 1);
  EXPECT_EQ(rankToCoords(0, mesh), (Shape{0, 0, 0}));
  EXPECT_EQ(rankToCoords(1, mesh), (Shape{0, 0, 1}));
  EXPECT_EQ(rankToCoords(4, mesh), (Shape{0, 1, 0}));
  EXPECT_EQ(rankToCoords(12, mesh), (Shape{1, 0, 0}));
  EXPECT_EQ(rankToCoords(23, mesh), (Shape{1, 2, 3}));
  EXPECT_EQ(coordsToRank({1, 2, 3}, mesh), 23);
  EXPECT_EQ(rankToCoords(0, {}), Shape{});
  EXPECT_EQ(coordsToRank({}, {}), 0);
  int64_t r = 0;
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c, ++r) {
        EXPECT_EQ(rankToCoords(r, mesh), (Shape{a, b, c}));
        EXPECT_EQ(coordsToRank({a, b, c}, mesh), r);
      }
}

//===----------------------------------------------------------------------===//
// validate()
//===----------------------------------------------------------------------===//

/// Expects validate() to fail with a message containing every fragment.
void expectInvalid(const std::string &reason,
                   const std::vector<std::string> &fragments) {
  EXPECT_FALSE(reason.empty());
  for (const std::string &fragment : fragments)
    EXPECT_NE(reason.find(fragment), std::string::npos)
        << "message '" << reason << "' lacks '" << fragment << "'";
}

TEST(LayoutMathValidate, AcceptsWellFormedLayouts) {
  EXPECT_EQ(validate({8, 4}, {2, 2}, {S0, S1}), "");
  EXPECT_EQ(validate({8, 4}, {2, 2}, {ss(0, 2), S0}, {1, 1}), "");
  EXPECT_EQ(validate({0}, {4}, {S0}, {3}), "");
  EXPECT_EQ(validate({}, {}, {}, {}), "");
  EXPECT_EQ(validate({}, {3}, {P}, {2}), "");
}

TEST(LayoutMathValidate, RejectsBadInput) {
  expectInvalid(validate({4, -3}, {2}, {S0}),
                {"tensor dim 1", "negative size -3"});
  expectInvalid(validate({4}, {2, 0}, {S0, R}),
                {"mesh dim 1", "size 0", ">= 1"});
  expectInvalid(validate({4}, {-2}, {S0}), {"mesh dim 0", "size -2"});
  // The limits (kMaxMeshRanks, kMaxMeshDims, kMaxDimSize,
  // kMaxTensorElements), checked without overflow.
  const int64_t big = int64_t(1) << 40;
  expectInvalid(validate({4}, {big, big}, {R, R}),
                {"more than 4096 ranks", "mesh dim 0"});
  expectInvalid(validate({4}, {64, 65}, {R, R}),
                {"more than 4096 ranks", "mesh dim 1 has size 65"});
  EXPECT_EQ(validate({4}, {64, 64}, {R, R}), "");
  expectInvalid(
      validate({4}, std::vector<int64_t>(9, 1), std::vector<Placement>(9, R)),
      {"9 dims", "at most 8"});
  expectInvalid(validate({kMaxDimSize + 1}, {2}, {S0}),
                {"tensor dim 0", "67108865 elements", "2^26"});
  EXPECT_EQ(validate({kMaxDimSize}, {2}, {S0}), "");
  expectInvalid(validate({1 << 20, 1 << 20, 2}, {2}, {S0}),
                {"more than 2^40 elements"});
  expectInvalid(validate({INT64_MAX, INT64_MAX}, {2}, {S0}), {"tensor dim 0"});
  expectInvalid(validate({4}, {2, 2}, {S0}),
                {"one placement per mesh dim", "1 placements", "rank 2"});
  expectInvalid(validate({4}, {2}, {S0, R}), {"2 placements", "rank 1"});
  expectInvalid(validate({4, 4}, {2}, {Placement::shard(2)}),
                {"shard<2>", "mesh dim 0", "tensor dim 2", "[0, 2)"});
  expectInvalid(validate({4}, {2, 2}, {R, Placement::shard(-1)}),
                {"shard<-1>", "mesh dim 1", "out of range"});
  expectInvalid(validate({}, {2}, {S0}), {"tensor of rank 0"});
  expectInvalid(validate({4}, {2}, {ss(1, 2)}),
                {"strided_shard<1, 2>", "out of range"});
  expectInvalid(validate({4}, {2}, {ss(0, 0)}),
                {"strided_shard<0, 0>", "split factor 0", ">= 1"});
  expectInvalid(validate({4}, {2}, {ss(0, -2)}), {"split factor -2"});
  Placement badKind;
  badKind.kind = static_cast<Placement::Kind>(42);
  expectInvalid(validate({4}, {2}, {badKind}), {"unknown placement kind"});
  Placement badReduce = Placement::partial();
  badReduce.reduce = static_cast<ReduceKind>(9);
  expectInvalid(validate({4}, {2}, {badReduce}), {"unknown reduce kind"});
}

TEST(LayoutMathValidate, RejectsBadCoords) {
  expectInvalid(validate({4}, {2, 3}, {S0, R}, {1}),
                {"one coordinate per mesh dim", "1 coordinates", "rank 2"});
  expectInvalid(validate({4}, {2, 3}, {S0, R}, {1, 3}),
                {"coordinate 3", "mesh dim 1", "[0, 3)"});
  expectInvalid(validate({4}, {2, 3}, {S0, R}, {-1, 0}),
                {"coordinate -1", "mesh dim 0", "[0, 2)"});
  // Layout errors are reported before coordinate errors.
  expectInvalid(validate({4}, {2}, {ss(0, 0)}, {5}), {"split factor 0"});
}

//===----------------------------------------------------------------------===//
// Exhaustive comparison with the brute-force reference
//===----------------------------------------------------------------------===//

TEST(LayoutMathExhaustive, OneDimTensors) {
  const Placements options = {R, P, S0, ss(0, 2), ss(0, 3), ss(0, 4)};
  int failures = 0;
  forEachLayout(3, 4, options, [&](const Shape &mesh, const Placements &pl) {
    for (int64_t length = 0; length <= 17 && failures < 10; ++length)
      failures += !checkLayout({length}, mesh, pl);
  });
}

TEST(LayoutMathExhaustive, TwoDimTensors) {
  const Placements options = {R, P, S0, S1, ss(0, 2), ss(1, 3)};
  const Shape lengths = {0, 1, 3, 5, 8, 13, 17};
  int failures = 0;
  forEachLayout(3, 4, options, [&](const Shape &mesh, const Placements &pl) {
    for (int64_t rows : lengths)
      for (int64_t cols : lengths)
        if (failures < 10)
          failures += !checkLayout({rows, cols}, mesh, pl);
  });
}

TEST(LayoutMathExhaustive, ThreeDimTensorsSmall) {
  // A few 3-D shapes exercise the N-D coverage grid and mixed dims.
  const Placements options = {R,        S0,      S1, Placement::shard(2),
                              ss(2, 2), ss(0, 3)};
  int failures = 0;
  forEachLayout(2, 3, options, [&](const Shape &mesh, const Placements &pl) {
    for (const Shape &shape : {Shape{0, 2, 3}, Shape{3, 4, 5}, Shape{5, 1, 7}})
      if (failures < 10)
        failures += !checkLayout(shape, mesh, pl);
  });
}

} // namespace
