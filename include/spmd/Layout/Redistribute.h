//===- Redistribute.h - the redistribute planner ----------------*- C++ -*-===//
//
// Plans the cheapest sequence of per-mesh-dim steps that turns one layout of
// a tensor into another (DESIGN.md §2, DTensor's `redistribute`). Pure C++:
// the partitioner turns each step into an `spmd` collective or a local op.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_LAYOUT_REDISTRIBUTE_H
#define SPMD_LAYOUT_REDISTRIBUTE_H

#include "spmd/Layout/LayoutMath.h"

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace spmd::layout {

/// Alpha-beta cost model of a device mesh: per mesh dim, the latency of one
/// message (seconds) and the bandwidth of one rank's link (bytes/second).
struct MeshCostModel {
  std::vector<double> latency;
  std::vector<double> bandwidth;

  /// NVLink-class (intra-node: 5 us, 150 GB/s) for the last mesh dim and
  /// InfiniBand-class (inter-node: 20 us, 25 GB/s) for the others, the
  /// usual (dp, tp) arrangement of a 2-D mesh.
  static MeshCostModel defaults(size_t meshRank);
};

/// One step of a redistribution: a change of the placement of one mesh dim.
struct RedistributeStep {
  enum class Kind {
    /// Shard/StridedShard(d) -> Replicate: gather the pieces along d
    /// (uneven: pad to the chunk size, gather, unpad; strided: reorder).
    AllGather,
    /// Partial -> Replicate.
    AllReduce,
    /// Partial -> Shard/StridedShard(d): reduce and keep this rank's chunk
    /// of d (strided: blocks reordered before the reduction).
    ReduceScatter,
    /// Shard(i) -> Shard(j): split along j, exchange, concatenate along i.
    AllToAll,
    /// Replicate -> Shard/StridedShard(d): keep this rank's chunk; no
    /// communication.
    LocalSlice,
    /// Replicate -> Partial: sum/avg keep the value on the group's first
    /// rank and zero elsewhere, max/min keep it everywhere; no
    /// communication.
    LocalPartial,
  };

  Kind kind;
  int64_t meshDim;
  /// Placements of every mesh dim before and after the step.
  std::vector<Placement> before, after;
  /// Bytes each rank sends in the step (0 for local steps), for the local
  /// piece padded to the chunk size (what the collective moves).
  int64_t bytesPerRank = 0;
  /// Estimated seconds under the cost model (collectiveCost).
  double seconds = 0;

  /// "all_gather", "all_reduce", "reduce_scatter", "all_to_all",
  /// "local_slice", "local_partial".
  static const char *kindName(Kind kind);
  /// E.g. "all_to_all on mesh dim 1: [shard<0>, shard<1>] -> [shard<0>,
  /// shard<0>], 4096 bytes/rank".
  std::string str() const;
};

struct RedistributePlan {
  std::vector<RedistributeStep> steps;
  /// Sum of the steps' seconds.
  double seconds = 0;
  /// Empty when the plan exists; otherwise why not.
  std::string error;
};

/// Bytes each rank sends and estimated seconds of one collective of `kind`
/// on a group of `n` ranks (latency `alpha` seconds, `bandwidth` bytes per
/// second), where `largeBytes` is the larger local piece of its two sides
/// (the gathered result, the reduced input, the exchanged piece). Bytes as
/// ring algorithms move them ((n - 1) / n of the piece; all_reduce, a
/// reduce_scatter then an all_gather, twice that); latency as the
/// latency-bound algorithms MPI and NCCL use for small messages (recursive
/// doubling / halving, Bruck, trees): ceil(log2 n) rounds for every
/// collective, so one all_reduce costs less than the reduce_scatter and
/// all_gather it could be split into. Local steps and n == 1 are free.
std::pair<int64_t, double> collectiveCost(RedistributeStep::Kind kind,
                                          int64_t n, int64_t largeBytes,
                                          double alpha, double bandwidth);

/// collectiveCost's terms of one group that do not depend on the bytes:
/// the group size, ceil(log2 n) * alpha seconds, the (n - 1) / n share of
/// the piece a ring moves, and the bandwidth (bytes per second).
struct GroupCost {
  int64_t n;
  double latency, share, bandwidth;
  GroupCost(int64_t n, double alpha, double bandwidth);
};
/// collectiveCost(kind, n, largeBytes, alpha, bandwidth) from its
/// group's terms, bit for bit.
std::pair<int64_t, double> collectiveCost(RedistributeStep::Kind kind,
                                          const GroupCost &group,
                                          int64_t largeBytes);

/// The cheapest sequence of steps from `from` to `to` for a tensor of
/// `globalShape` with `elementBytes` bytes per element on a mesh of
/// `meshShape`, ties broken by fewer steps, then deterministically.
///
/// Each step changes one mesh dim and keeps every intermediate layout valid
/// for the nesting rule (mesh dims sharding the same tensor dim apply left
/// to right): the placement of mesh dim m may change from or to a shard of
/// tensor dim d only when no mesh dim after m shards d. So [S0, S0] -> [R,
/// R] gathers mesh dim 1 first, and [S0, S1] -> [S1, S0] costs two
/// all_to_alls, not a full gather. Seed 001's exception: StridedShard(d,
/// k * n) on m over one later mesh dim of n ranks sharding d as Shard (k =
/// 1) or StridedShard(d, k) keeps each piece inside the later shard, so
/// [SS(0, 2), S0] -> [R, S0] is one all_gather on mesh dim 0 (and
/// [P, S0] -> [SS(0, 2), S0] one reduce_scatter). A Partial can only become
/// Replicate or a Shard/StridedShard (reduce), and only a Replicate can
/// become a Partial (so S -> P goes through R, as in DTensor).
///
/// Errors (plan.error): the layouts do not fit the shape and mesh
/// (validate()), or mismatched mesh ranks.
RedistributePlan planRedistribute(const std::vector<int64_t> &globalShape,
                                  int64_t elementBytes,
                                  const std::vector<int64_t> &meshShape,
                                  const std::vector<Placement> &from,
                                  const std::vector<Placement> &to,
                                  const MeshCostModel &cost);

/// planRedistribute for many (from, to) pairs of one tensor on one mesh:
/// each layout's padded bytes are computed once across the plans, and a
/// search is resumed by the next pair from the same source over the same
/// candidates, also after searches over other candidates (propagation asks
/// for thousands of pairs per tensor type). Each plan() equals
/// planRedistribute's, bit for bit.
class RedistributePlanner {
public:
  RedistributePlanner(std::vector<int64_t> globalShape, int64_t elementBytes,
                      std::vector<int64_t> meshShape, MeshCostModel cost);

  /// planRedistribute(globalShape, elementBytes, meshShape, from, to, cost).
  RedistributePlan plan(const std::vector<Placement> &from,
                        const std::vector<Placement> &to);

  /// What a cost model needs of plan(from, to), without building its steps.
  struct Summary {
    /// The plan's seconds; +inf where plan() reports an error.
    double seconds;
    /// Bytes each rank sends over the steps.
    int64_t bytesPerRank;
    /// Steps that send any bytes (collectives).
    int64_t collectives;
  };
  Summary summarize(const std::vector<Placement> &from,
                    const std::vector<Placement> &to);

private:
  std::vector<int64_t> globalShape, meshShape;
  int64_t elementBytes;
  MeshCostModel cost;
  /// Per mesh dim, its collectives' byte-independent cost terms.
  std::vector<GroupCost> groups;
  /// Placements met so far; a layout's key is their indices as the digits
  /// of a base-kKeyBase number, mesh dim 0 least significant (layouts with
  /// an index past kKeyBase - 1 are not kept).
  std::vector<Placement> known;
  static constexpr uint64_t kKeyBase = 16;
  /// Padded local bytes by layout key (-1: not yet known): a table while
  /// there are kKeyBase^3 keys or fewer (meshes of up to 3 dims), else a map.
  std::vector<int64_t> paddedTable;
  std::unordered_map<uint64_t, int64_t> padded;

  /// How a search reached a node: its cost and steps, the node before it
  /// and the step from there.
  struct Visit {
    double seconds;
    size_t steps;
    size_t previous;
    RedistributeStep::Kind kind;
    size_t meshDim;
  };
  /// A search: its candidates, the step kind between each pair of them,
  /// their indices in `known`, and per node (a layout numbered by its
  /// candidates' indices, mesh dim 0 least significant) how it was reached,
  /// whether its cost is final and its padded bytes (-1: not yet known). A
  /// search from the same source over the same candidates resumes it.
  struct SearchState {
    std::vector<Placement> options;
    std::vector<std::optional<RedistributeStep::Kind>> kinds;
    std::vector<uint64_t> optionKeys;
    bool keyed = true;
    size_t source = 0, target = 0;
    std::vector<Visit> best;
    std::vector<char> settled;
    std::vector<int64_t> bytes;
    /// Per mesh dim m (from blockedOffsets[m]), the later mesh dims' digits
    /// and a candidate: 0 unknown, 1 free, 2 blocked (shardedLater).
    std::vector<char> blocked;
    std::vector<size_t> blockedOffsets;
    std::vector<std::pair<double, uint64_t>> queue;
  };
  /// The last search, and up to kParked earlier ones over other candidate
  /// sets: one source's targets alternate between a few sets (a target's
  /// own StridedShard or Partial adds a candidate), and each set's search
  /// is resumed instead of started again.
  SearchState state;
  std::vector<SearchState> parked;
  size_t nextEvicted = 0;
  static constexpr size_t kParked = 8;
  std::vector<Placement> current, scratch, scratchTarget, scratchOptions;
  /// validate()'s reason for the shape and mesh alone (found once).
  std::optional<std::string> fitError;
  /// validate(globalShape, meshShape, layout): the shape and mesh checked
  /// once per planner, the placements each time.
  std::string fits(const std::vector<Placement> &layout);

  /// Runs the search from `from` to `to`; the reason no plan exists, or
  /// empty.
  std::string search(const std::vector<Placement> &from,
                     const std::vector<Placement> &to);
  /// The index of `p` in `known`, added if new.
  uint64_t knownIndex(const Placement &p);
  size_t encode(const std::vector<Placement> &placements) const;
  void decodeInto(size_t node, std::vector<Placement> &placements) const;
  /// The padded local bytes of a node of the last search (computed on
  /// first use by computeBytes; the search's inner loop reads them).
  int64_t bytesOf(size_t node) {
    return state.bytes[node] >= 0 ? state.bytes[node] : computeBytes(node);
  }
  int64_t computeBytes(size_t node);
  /// collectiveCost of the step that reached `node` in the last search.
  std::pair<int64_t, double> stepCost(size_t node);
};

} // namespace spmd::layout

#endif // SPMD_LAYOUT_REDISTRIBUTE_H
