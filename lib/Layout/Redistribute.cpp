//===- Redistribute.cpp - the redistribute planner ------------------------===//
//
// Dijkstra over layouts: a node is a placement per mesh dim, an edge one
// step on one mesh dim (DESIGN.md §2 table). Meshes have few dims and
// tensors few dims, so the graph is small (a few hundred nodes for a 3-D
// mesh and a 4-D tensor).
//
//===----------------------------------------------------------------------===//

#include "spmd/Layout/Redistribute.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>
#include <optional>
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

std::string RedistributeStep::str() const {
  return std::string(kindName(kind)) + " on mesh dim " +
         std::to_string(meshDim) + ": " + placementsStr(before) + " -> " +
         placementsStr(after) + ", " + std::to_string(bytesPerRank) +
         " bytes/rank";
}

namespace {

/// True when a mesh dim after `meshDim` shards tensor dim `dim` so that
/// the placement `p` of `meshDim` may not change to or from a shard of
/// `dim`: the pieces of `meshDim`'s group would not be contiguous in the
/// later shards. Seed 001's exception: StridedShard(dim, k * n) over one
/// later mesh dim of n ranks that shards `dim` as Shard (k = 1) or
/// StridedShard(dim, k) takes each group member's piece inside the later
/// shard (FSDP over a TP shard), so the change gathers or scatters within
/// it.
bool shardedLater(const std::vector<Placement> &placements,
                  const std::vector<int64_t> &meshShape, size_t meshDim,
                  const Placement &p) {
  int64_t later = -1;
  for (size_t m = meshDim + 1; m < placements.size(); ++m)
    if (placements[m].isShardLike() && placements[m].dim == p.dim) {
      if (later >= 0)
        return true;
      later = static_cast<int64_t>(m);
    }
  if (later < 0)
    return false;
  const Placement &inner = placements[later];
  int64_t k =
      inner.kind == Placement::Kind::StridedShard ? inner.splitFactor : 1;
  return p.kind != Placement::Kind::StridedShard ||
         p.splitFactor != k * meshShape[later];
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
  // A StridedShard target is a reduce_scatter of blocks reordered first
  // (the partitioner's index tables); seed 001's FSDP gradient over a TP
  // shard needs it.
  if (a.kind == P::Partial && b.isShardLike())
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

/// The placements a mesh dim may take on the way, into `out`: Replicate,
/// the source's and target's placements, and a Shard of every tensor dim.
void candidates(size_t rank, const std::vector<Placement> &from,
                const std::vector<Placement> &to, std::vector<Placement> &out) {
  out.assign(1, Placement::replicate());
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
}

} // namespace

RedistributePlan spmd::layout::planRedistribute(
    const std::vector<int64_t> &globalShape, int64_t elementBytes,
    const std::vector<int64_t> &meshShape, const std::vector<Placement> &from,
    const std::vector<Placement> &to, const MeshCostModel &cost) {
  return RedistributePlanner(globalShape, elementBytes, meshShape, cost)
      .plan(from, to);
}

RedistributePlanner::RedistributePlanner(std::vector<int64_t> globalShape,
                                         int64_t elementBytes,
                                         std::vector<int64_t> meshShape,
                                         MeshCostModel cost)
    : globalShape(std::move(globalShape)), meshShape(std::move(meshShape)),
      elementBytes(elementBytes), cost(std::move(cost)) {
  // A cost model of another rank than the mesh's gets none: search()
  // reports the mismatch before any step is costed.
  const size_t meshRank = this->meshShape.size();
  if (this->cost.latency.size() == meshRank &&
      this->cost.bandwidth.size() == meshRank)
    for (size_t m = 0; m < meshRank; ++m)
      groups.emplace_back(this->meshShape[m], this->cost.latency[m],
                          this->cost.bandwidth[m]);
  if (meshRank <= 3) {
    size_t keys = 1;
    for (size_t m = 0; m < meshRank; ++m)
      keys *= kKeyBase;
    paddedTable.assign(keys, -1);
  }
}

std::string RedistributePlanner::fits(const std::vector<Placement> &layout) {
  if (!fitError)
    fitError = validate(
        globalShape, meshShape,
        std::vector<Placement>(meshShape.size(), Placement::replicate()));
  return !fitError->empty()
             ? *fitError
             : validatePlacements(globalShape.size(), meshShape.size(), layout);
}

uint64_t RedistributePlanner::knownIndex(const Placement &p) {
  for (size_t i = 0; i < known.size(); ++i)
    if (known[i] == p)
      return i;
  known.push_back(p);
  return known.size() - 1;
}

size_t
RedistributePlanner::encode(const std::vector<Placement> &placements) const {
  size_t node = 0;
  for (size_t m = meshShape.size(); m-- > 0;) {
    size_t index = 0;
    while (state.options[index] != placements[m])
      ++index;
    node = node * state.options.size() + index;
  }
  return node;
}

void RedistributePlanner::decodeInto(size_t node,
                                     std::vector<Placement> &placements) const {
  placements.resize(meshShape.size());
  for (size_t m = 0; m < meshShape.size(); ++m, node /= state.options.size())
    placements[m] = state.options[node % state.options.size()];
}

int64_t RedistributePlanner::computeBytes(size_t node) {
  if (!state.keyed) {
    decodeInto(node, scratch);
    return state.bytes[node] =
               paddedBytes(globalShape, elementBytes, meshShape, scratch);
  }
  uint64_t key = 0, scale = 1;
  size_t rest = node;
  for (size_t m = 0; m < meshShape.size();
       ++m, rest /= state.options.size(), scale *= kKeyBase)
    key += state.optionKeys[rest % state.options.size()] * scale;
  int64_t &known = key < paddedTable.size()
                       ? paddedTable[key]
                       : padded.try_emplace(key, -1).first->second;
  if (known < 0) {
    decodeInto(node, scratch);
    known = paddedBytes(globalShape, elementBytes, meshShape, scratch);
  }
  return state.bytes[node] = known;
}

std::pair<int64_t, double> RedistributePlanner::stepCost(size_t node) {
  const Visit &visit = state.best[node];
  return collectiveCost(visit.kind, groups[visit.meshDim],
                        std::max(bytesOf(visit.previous), bytesOf(node)));
}

std::string RedistributePlanner::search(const std::vector<Placement> &from,
                                        const std::vector<Placement> &to) {
  constexpr double kUnreached = std::numeric_limits<double>::infinity();
  for (const auto *layout : {&from, &to}) {
    std::string why = fits(*layout);
    if (!why.empty())
      return (layout == &from ? "source layout: " : "target layout: ") + why;
  }
  const size_t meshRank = meshShape.size();
  if (cost.latency.size() != meshRank || cost.bandwidth.size() != meshRank)
    return "the cost model has " + std::to_string(cost.latency.size()) +
           " mesh dims, the mesh " + std::to_string(meshRank);
  std::vector<Placement> &wanted = scratchOptions;
  candidates(globalShape.size(), from, to, wanted);
  // A search from the same source over the same candidates (a target that
  // adds none) goes on where the last one stopped: Dijkstra settles nodes
  // in the same order whatever it stops at, so the result is the one a
  // fresh search finds.
  // (A new state's candidates are empty; a search's never are.)
  bool sameOptions = wanted == state.options;
  if (!sameOptions && !state.options.empty()) {
    // Park this search; take up the one over `wanted` if there is one, else
    // start over in the slot of the longest parked.
    auto over =
        std::find_if(parked.begin(), parked.end(),
                     [&](const SearchState &s) { return s.options == wanted; });
    if (over != parked.end()) {
      std::swap(state, *over);
      sameOptions = true;
    } else if (parked.size() < kParked) {
      parked.push_back(std::move(state));
      state = SearchState();
    } else {
      std::swap(state, parked[nextEvicted]);
      nextEvicted = (nextEvicted + 1) % kParked;
    }
  }
  bool resume = sameOptions && encode(from) == state.source;
  if (!sameOptions) {
    // A search keeps ~60 bytes per layout, and the queue numbers them in 32
    // bits: meshes of many dims with many candidates each (more than 2^22
    // layouts) are refused, not searched.
    constexpr uint64_t kMaxLayouts = uint64_t{1} << 22;
    uint64_t layouts = 1;
    for (size_t m = 0; m < meshRank && layouts <= kMaxLayouts; ++m)
      layouts *= wanted.size();
    if (layouts > kMaxLayouts)
      return "too many layouts to search (" + std::to_string(wanted.size()) +
             " placements on each of " + std::to_string(meshRank) +
             " mesh dims)";
    state.options = wanted;
    const size_t base = state.options.size();
    // The step kind between each pair of candidates, and each candidate's
    // index among the placements this planner has met, found once.
    state.kinds.resize(base * base);
    state.optionKeys.resize(base);
    state.keyed = true;
    for (size_t a = 0; a < base; ++a) {
      state.optionKeys[a] = knownIndex(state.options[a]);
      state.keyed = state.keyed && state.optionKeys[a] < kKeyBase;
      for (size_t b = 0; b < base; ++b)
        state.kinds[a * base + b] =
            stepKind(state.options[a], state.options[b]);
    }
    // Every layout has a slot: there are base^meshRank of them (a few dozen
    // for 2-D meshes). Their bytes hold while the candidates do.
    size_t nodes = 1;
    for (size_t m = 0; m < meshRank; ++m)
      nodes *= base;
    state.bytes.assign(nodes, -1);
    // shardedLater's answers by (mesh dim, the later mesh dims' digits,
    // candidate): they depend on nothing else.
    state.blocked.clear();
    state.blockedOffsets.clear();
    for (size_t m = 0, later = nodes; m < meshRank; ++m) {
      state.blockedOffsets.push_back(state.blocked.size());
      state.blocked.resize(state.blocked.size() + later, 0);
      later /= base;
    }
  }
  if (!resume) {
    state.best.assign(state.bytes.size(),
                      Visit{kUnreached, 0, 0, Kind::LocalSlice, 0});
    state.settled.assign(state.bytes.size(), false);
    state.queue.clear();
    state.source = encode(from);
    state.best[state.source] = Visit{0, 0, state.source, Kind::LocalSlice, 0};
    state.queue.push_back({0, state.source});
  }
  state.target = encode(to);

  // Dijkstra; the priority orders by cost, then steps, then node number, so
  // ties are broken the same way on every run. A visit keeps only how it
  // was reached; the steps are rebuilt along the cheapest path at the end.
  const size_t base = state.options.size();
  // An entry's second member holds the steps above the node number (both
  // fit 32 bits: at most kMaxLayouts nodes), so the pair orders as (cost,
  // steps, node).
  using Entry = std::pair<double, uint64_t>;
  std::greater<Entry> later;
  while (!state.settled[state.target] && !state.queue.empty()) {
    std::pop_heap(state.queue.begin(), state.queue.end(), later);
    auto [seconds, stepsAndNode] = state.queue.back();
    size_t steps = stepsAndNode >> 32, node = stepsAndNode & 0xffffffffu;
    state.queue.pop_back();
    if (state.settled[node])
      continue; // a stale queue entry
    state.settled[node] = true;
    bool decoded = false;
    int64_t currentBytes = bytesOf(node);
    size_t stride = 1;
    for (size_t m = 0; m < meshRank; ++m, stride *= base) {
      size_t digit = node / stride % base;
      char *row = &state.blocked[state.blockedOffsets[m] +
                                 node / (stride * base) * base];
      auto isBlocked = [&](size_t b) {
        if (!row[b]) {
          if (!decoded)
            decodeInto(node, current);
          decoded = true;
          row[b] = 1 + shardedLater(current, meshShape, m, state.options[b]);
        }
        return row[b] == 2;
      };
      if (state.options[digit].isShardLike() && isBlocked(digit))
        continue;
      for (size_t b = 0; b < base; ++b) {
        // A settled node's cost is final: no step improves it (Dijkstra).
        size_t to = node - digit * stride + b * stride;
        std::optional<Kind> kind = state.kinds[digit * base + b];
        if (!kind || state.settled[to] ||
            (state.options[b].isShardLike() && isBlocked(b)))
          continue;
        // Every candidate fits the tensor and the mesh (checked above for
        // the source and target, by construction for the others, which
        // maxLocalShape asserts).
        double stepSeconds = collectiveCost(*kind, groups[m],
                                            std::max(currentBytes, bytesOf(to)))
                                 .second;
        double total = seconds + stepSeconds;
        if (std::make_tuple(state.best[to].seconds, state.best[to].steps) <=
            std::make_tuple(total, steps + 1))
          continue;
        state.best[to] = Visit{total, steps + 1, node, *kind, m};
        state.queue.push_back({total, uint64_t{steps + 1} << 32 | to});
        std::push_heap(state.queue.begin(), state.queue.end(), later);
      }
    }
  }
  if (state.best[state.target].seconds == kUnreached)
    return "no sequence of steps turns " + placementsStr(from) + " into " +
           placementsStr(to);
  return "";
}

RedistributePlan RedistributePlanner::plan(const std::vector<Placement> &from,
                                           const std::vector<Placement> &to) {
  RedistributePlan plan;
  plan.error = search(from, to);
  if (!plan.error.empty())
    return plan;
  for (size_t node = state.target; node != state.source;) {
    const Visit &visit = state.best[node];
    RedistributeStep step{
        visit.kind, static_cast<int64_t>(visit.meshDim), {}, {}};
    decodeInto(visit.previous, step.before);
    decodeInto(node, step.after);
    std::tie(step.bytesPerRank, step.seconds) = stepCost(node);
    plan.steps.insert(plan.steps.begin(), step);
    node = visit.previous;
  }
  plan.seconds = state.best[state.target].seconds;
  return plan;
}

RedistributePlanner::Summary
RedistributePlanner::summarize(const std::vector<Placement> &from,
                               const std::vector<Placement> &to) {
  Summary summary = {std::numeric_limits<double>::infinity(), 0, 0};
  // A mesh dim that becomes Partial is entered from Replicate (the only
  // step into a Partial) by its last step: a plan that enters it earlier
  // and leaves it again (all_reduce or reduce_scatter) does better staying
  // Replicate, and while it is Partial the other dims' steps move the
  // bytes and meet the blocking rule they would meet at Replicate. So the
  // plan costs what the plan to Replicate there costs, plus free local
  // steps, and the search to that layout shares its candidates (and its
  // resumed search) with the other targets of the same source.
  if (!fits(to).empty())
    return summary;
  std::vector<Placement> &reach = scratchTarget;
  reach = to;
  for (size_t m = 0; m < reach.size() && m < from.size(); ++m)
    if (reach[m].kind == Placement::Kind::Partial && from[m] != reach[m])
      reach[m] = Placement::replicate();
  if (!search(from, reach).empty())
    return summary;
  summary.seconds = state.best[state.target].seconds;
  for (size_t node = state.target; node != state.source;
       node = state.best[node].previous) {
    int64_t sent = stepCost(node).first;
    summary.bytesPerRank += sent;
    summary.collectives += sent > 0;
  }
  return summary;
}

GroupCost::GroupCost(int64_t n, double alpha, double bandwidth)
    : n(n), bandwidth(bandwidth) {
  // ceil(log2(n)), exactly.
  int rounds = 0;
  while ((int64_t{1} << rounds) < n)
    ++rounds;
  latency = rounds * alpha;
  share = static_cast<double>(n - 1) / static_cast<double>(n);
}

std::pair<int64_t, double>
spmd::layout::collectiveCost(RedistributeStep::Kind kind,
                             const GroupCost &group, int64_t largeBytes) {
  using Kind = RedistributeStep::Kind;
  if (kind == Kind::LocalSlice || kind == Kind::LocalPartial || group.n <= 1)
    return {0, 0};
  double moved = group.share * static_cast<double>(largeBytes);
  if (kind == Kind::AllReduce)
    moved *= 2;
  return {static_cast<int64_t>(moved), group.latency + moved / group.bandwidth};
}

std::pair<int64_t, double>
spmd::layout::collectiveCost(RedistributeStep::Kind kind, int64_t n,
                             int64_t largeBytes, double alpha,
                             double bandwidth) {
  return collectiveCost(kind, GroupCost(n, alpha, bandwidth), largeBytes);
}
