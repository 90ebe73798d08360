//===- Redistribute.cpp - the redistribute planner ------------------------===//
//
// Dijkstra over layouts: a node is a placement per mesh dim, an edge one
// step on one mesh dim (DESIGN.md §2 table). Meshes have few dims and
// tensors few dims, so the graph is small (a few hundred nodes for a 3-D
// mesh and a 4-D tensor).
//
//===----------------------------------------------------------------------===//

#include "spmd/Layout/Redistribute.h"

#include <map>
#include <optional>
#include <queue>
#include <tuple>

using namespace spmd::layout;
using Kind = RedistributeStep::Kind;

MeshCostModel MeshCostModel::defaults(size_t meshRank) {
  MeshCostModel model;
  for (size_t m = 0; m < meshRank; ++m) {
    bool intraNode = m + 1 == meshRank;
    model.latency.push_back(intraNode ? 5e-6 : 20e-6);
    model.bandwidth.push_back(intraNode ? 150e9 : 25e9);
  }
  return model;
}

const char *RedistributeStep::kindName(Kind kind) {
  switch (kind) {
  case Kind::AllGather:
    return "all_gather";
  case Kind::AllReduce:
    return "all_reduce";
  case Kind::ReduceScatter:
    return "reduce_scatter";
  case Kind::AllToAll:
    return "all_to_all";
  case Kind::LocalSlice:
    return "local_slice";
  case Kind::LocalPartial:
    return "local_partial";
  }
  return "?";
}

static std::string placementsStr(const std::vector<Placement> &placements) {
  std::string s = "[";
  for (size_t i = 0; i < placements.size(); ++i)
    s += (i ? ", " : "") + placements[i].str();
  return s + "]";
}

std::string RedistributeStep::str() const {
  return std::string(kindName(kind)) + " on mesh dim " +
         std::to_string(meshDim) + ": " + placementsStr(before) + " -> " +
         placementsStr(after) + ", " + std::to_string(bytesPerRank) +
         " bytes/rank";
}

namespace {

/// True when a mesh dim after `meshDim` shards tensor dim `dim`: then the
/// placement of `meshDim` may not change to or from a shard of `dim`.
bool shardedLater(const std::vector<Placement> &placements, size_t meshDim,
                  int64_t dim) {
  for (size_t m = meshDim + 1; m < placements.size(); ++m)
    if (placements[m].isShardLike() && placements[m].dim == dim)
      return true;
  return false;
}

/// The step kind that changes `a` into `b` on one mesh dim, if there is one.
std::optional<Kind> stepKind(const Placement &a, const Placement &b) {
  using P = Placement::Kind;
  if (a == b)
    return std::nullopt;
  if (a.isShardLike() && b.kind == P::Replicate)
    return Kind::AllGather;
  if (a.kind == P::Partial && b.kind == P::Replicate)
    return Kind::AllReduce;
  if (a.kind == P::Partial && b.kind == P::Shard)
    return Kind::ReduceScatter;
  if (a.kind == P::Shard && b.kind == P::Shard)
    return Kind::AllToAll;
  if (a.kind == P::Replicate && b.isShardLike())
    return Kind::LocalSlice;
  if (a.kind == P::Replicate && b.kind == P::Partial)
    return Kind::LocalPartial;
  return std::nullopt;
}

/// Bytes of the largest local piece (what padded collectives move).
int64_t paddedBytes(const std::vector<int64_t> &shape, int64_t elementBytes,
                    const std::vector<int64_t> &mesh,
                    const std::vector<Placement> &placements) {
  int64_t bytes = elementBytes;
  for (int64_t d : maxLocalShape(shape, mesh, placements))
    bytes *= d;
  return bytes;
}

/// Fills in the bytes and seconds of `step` (ring algorithms: n - 1
/// messages; all_reduce is a reduce_scatter then an all_gather).
void costStep(RedistributeStep &step, const std::vector<int64_t> &shape,
              int64_t elementBytes, const std::vector<int64_t> &mesh,
              const MeshCostModel &cost) {
  double n = static_cast<double>(mesh[step.meshDim]);
  if (step.kind == Kind::LocalSlice || step.kind == Kind::LocalPartial ||
      n == 1)
    return;
  // The larger side of the step: gathered result, reduced input, or the
  // exchanged piece.
  int64_t large = std::max(paddedBytes(shape, elementBytes, mesh, step.before),
                           paddedBytes(shape, elementBytes, mesh, step.after));
  double alpha = cost.latency[step.meshDim];
  double beta = 1.0 / cost.bandwidth[step.meshDim];
  double messages = n - 1, moved = (n - 1) / n * static_cast<double>(large);
  if (step.kind == Kind::AllReduce) {
    messages *= 2;
    moved *= 2;
  }
  step.bytesPerRank = static_cast<int64_t>(moved);
  step.seconds = messages * alpha + moved * beta;
}

/// The placements a mesh dim may take on the way: Replicate, the source's
/// and target's placements, and a Shard of every tensor dim.
std::vector<Placement> candidates(size_t rank,
                                  const std::vector<Placement> &from,
                                  const std::vector<Placement> &to) {
  std::vector<Placement> out = {Placement::replicate()};
  for (size_t d = 0; d < rank; ++d)
    out.push_back(Placement::shard(static_cast<int64_t>(d)));
  auto add = [&](const Placement &p) {
    for (const Placement &q : out)
      if (q == p)
        return;
    out.push_back(p);
  };
  for (const Placement &p : from)
    add(p);
  for (const Placement &p : to)
    add(p);
  return out;
}

std::string key(const std::vector<Placement> &placements) {
  return placementsStr(placements);
}

} // namespace

RedistributePlan spmd::layout::planRedistribute(
    const std::vector<int64_t> &globalShape, int64_t elementBytes,
    const std::vector<int64_t> &meshShape, const std::vector<Placement> &from,
    const std::vector<Placement> &to, const MeshCostModel &cost) {
  RedistributePlan plan;
  for (const auto *layout : {&from, &to}) {
    std::string why = validate(globalShape, meshShape, *layout);
    if (!why.empty()) {
      plan.error =
          (layout == &from ? "source layout: " : "target layout: ") + why;
      return plan;
    }
  }
  if (cost.latency.size() != meshShape.size() ||
      cost.bandwidth.size() != meshShape.size()) {
    plan.error = "the cost model has " + std::to_string(cost.latency.size()) +
                 " mesh dims, the mesh " + std::to_string(meshShape.size());
    return plan;
  }
  std::vector<Placement> options = candidates(globalShape.size(), from, to);

  // Dijkstra; the priority orders by cost, then steps, then key, so ties are
  // broken the same way on every run.
  using Entry = std::tuple<double, size_t, std::string>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
  struct Visit {
    double seconds;
    size_t steps;
    std::vector<Placement> placements;
    std::string previous;
    RedistributeStep step;
  };
  std::map<std::string, Visit> best;
  best.emplace(key(from), Visit{0, 0, from, "", {}});
  queue.emplace(0, 0, key(from));
  std::string target = key(to);
  while (!queue.empty()) {
    auto [seconds, steps, node] = queue.top();
    queue.pop();
    if (node == target)
      break;
    const Visit &visit = best.at(node);
    if (std::make_tuple(seconds, steps) >
        std::make_tuple(visit.seconds, visit.steps))
      continue; // a stale queue entry
    std::vector<Placement> current = visit.placements;
    for (size_t m = 0; m < meshShape.size(); ++m) {
      const Placement &a = current[m];
      for (const Placement &b : options) {
        std::optional<Kind> kind = stepKind(a, b);
        if (!kind)
          continue;
        if ((a.isShardLike() && shardedLater(current, m, a.dim)) ||
            (b.isShardLike() && shardedLater(current, m, b.dim)))
          continue;
        RedistributeStep step{*kind, static_cast<int64_t>(m), current, current};
        step.after[m] = b;
        if (!validate(globalShape, meshShape, step.after).empty())
          continue;
        costStep(step, globalShape, elementBytes, meshShape, cost);
        std::string next = key(step.after);
        double total = seconds + step.seconds;
        auto it = best.find(next);
        if (it != best.end() &&
            std::make_tuple(it->second.seconds, it->second.steps) <=
                std::make_tuple(total, steps + 1))
          continue;
        best[next] = Visit{total, steps + 1, step.after, node, step};
        queue.emplace(total, steps + 1, next);
      }
    }
  }
  auto found = best.find(target);
  if (found == best.end()) {
    plan.error = "no sequence of steps turns " + key(from) + " into " + target;
    return plan;
  }
  for (std::string node = target; node != key(from);) {
    const Visit &visit = best.at(node);
    plan.steps.insert(plan.steps.begin(), visit.step);
    node = visit.previous;
  }
  plan.seconds = found->second.seconds;
  return plan;
}
