//===- RedistributeTest.cpp - the redistribute planner --------------------===//
//
// Every plan is executed on simulated ranks: each rank holds a map from
// global element index to value, every step moves data between the ranks
// of its mesh-dim group as its collective would, and after each step the
// elements every rank holds must be exactly those its new layout assigns
// it (localIndexRanges). At the end the values must be the global tensor's
// (summed over the group for Partial placements).
//
//===----------------------------------------------------------------------===//

#include "spmd/Layout/Redistribute.h"

#include "gtest/gtest.h"

#include <limits>
#include <map>

using namespace spmd::layout;
using Kind = RedistributeStep::Kind;

namespace {

using Index = std::vector<int64_t>;
using Local = std::map<Index, double>;

Placement R() { return Placement::replicate(); }
Placement S(int64_t d) { return Placement::shard(d); }
Placement SS(int64_t d, int64_t sf) { return Placement::stridedShard(d, sf); }
Placement P() { return Placement::partial(); }

/// A distinct value per global element.
double globalValue(const Index &index) {
  double v = 0;
  for (int64_t i : index)
    v = v * 31 + static_cast<double>(i) + 1;
  return v;
}

/// The global indices a rank holds under `placements` (Partial holds all).
std::vector<Index> heldIndices(const std::vector<int64_t> &shape,
                               const std::vector<int64_t> &mesh,
                               const std::vector<Placement> &placements,
                               const std::vector<int64_t> &coords) {
  auto ranges = localIndexRanges(shape, mesh, placements, coords);
  std::vector<Index> out = {{}};
  for (const auto &dim : ranges) {
    std::vector<Index> next;
    for (const Index &prefix : out)
      for (const Interval &interval : dim)
        for (int64_t i = interval.begin; i < interval.end; ++i) {
          next.push_back(prefix);
          next.back().push_back(i);
        }
    out = std::move(next);
  }
  return out;
}

/// Weight of a rank's share of a Partial(sum) value on mesh dim m: shares
/// that differ per rank and sum to 1 over the group.
double share(int64_t coord, int64_t size) {
  return static_cast<double>(coord + 1) / (size * (size + 1) / 2.0);
}

class Simulation {
public:
  Simulation(std::vector<int64_t> shape, std::vector<int64_t> mesh,
             const std::vector<Placement> &placements)
      : shape(std::move(shape)), mesh(std::move(mesh)) {
    for (int64_t r = 0; r < numRanks(this->mesh); ++r) {
      auto coords = rankToCoords(r, this->mesh);
      double weight = 1;
      for (size_t m = 0; m < placements.size(); ++m)
        if (placements[m].kind == Placement::Kind::Partial)
          weight *= share(coords[m], this->mesh[m]);
      Local local;
      for (const Index &i :
           heldIndices(this->shape, this->mesh, placements, coords))
        local[i] = globalValue(i) * weight;
      ranks.push_back(local);
    }
  }

  /// Runs one step; returns a failure description or "".
  std::string apply(const RedistributeStep &step) {
    std::vector<Local> next(ranks.size());
    int64_t m = step.meshDim;
    for (int64_t r = 0; r < numRanks(mesh); ++r) {
      auto coords = rankToCoords(r, mesh);
      std::vector<const Local *> group;
      for (int64_t c = 0; c < mesh[m]; ++c) {
        auto member = coords;
        member[m] = c;
        group.push_back(&ranks[coordsToRank(member, mesh)]);
      }
      auto expected = heldIndices(shape, mesh, step.after, coords);
      Local &out = next[r];
      switch (step.kind) {
      case Kind::AllGather:
      case Kind::AllToAll:
        // Every needed element comes from exactly one group member.
        for (const Index &i : expected) {
          int holders = 0;
          for (const Local *member : group)
            if (auto it = member->find(i); it != member->end()) {
              out[i] = it->second;
              ++holders;
            }
          if (holders != 1)
            return "element held by " + std::to_string(holders) +
                   " members in " + step.str();
        }
        break;
      case Kind::AllReduce:
      case Kind::ReduceScatter:
        for (const Index &i : expected)
          for (const Local *member : group) {
            auto it = member->find(i);
            if (it == member->end())
              return "a member lacks an element to reduce in " + step.str();
            out[i] += it->second;
          }
        break;
      case Kind::LocalSlice:
        for (const Index &i : expected) {
          auto it = ranks[r].find(i);
          if (it == ranks[r].end())
            return "slice of an element the rank lacks in " + step.str();
          out[i] = it->second;
        }
        break;
      case Kind::LocalPartial:
        for (const auto &[i, v] : ranks[r])
          out[i] = coords[m] == 0 ? v : 0.0;
        break;
      }
      if (out.size() != expected.size())
        return "rank " + std::to_string(r) + " holds " +
               std::to_string(out.size()) + " elements, its layout " +
               std::to_string(expected.size()) + " after " + step.str();
    }
    ranks = std::move(next);
    return "";
  }

  /// Checks the final values against the global tensor; "" when right.
  std::string check(const std::vector<Placement> &placements) const {
    for (int64_t r = 0; r < numRanks(mesh); ++r) {
      auto coords = rankToCoords(r, mesh);
      for (const Index &i : heldIndices(shape, mesh, placements, coords)) {
        // Sum the Partial mesh dims' group (the rank's own value otherwise).
        double sum = 0;
        std::vector<int64_t> partialDims;
        for (size_t m = 0; m < placements.size(); ++m)
          if (placements[m].kind == Placement::Kind::Partial)
            partialDims.push_back(m);
        int64_t combos = 1;
        for (int64_t m : partialDims)
          combos *= mesh[m];
        for (int64_t c = 0; c < combos; ++c) {
          auto member = coords;
          int64_t rest = c;
          for (int64_t m : partialDims) {
            member[m] = rest % mesh[m];
            rest /= mesh[m];
          }
          const Local &local = ranks[coordsToRank(member, mesh)];
          auto it = local.find(i);
          if (it == local.end())
            return "rank lacks an element of its final layout";
          sum += it->second;
        }
        if (std::abs(sum - globalValue(i)) > 1e-9 * std::abs(globalValue(i)))
          return "rank " + std::to_string(r) + " has a wrong value";
      }
    }
    return "";
  }

private:
  std::vector<int64_t> shape, mesh;
  std::vector<Local> ranks;
};

/// Plans from -> to, runs the plan on simulated ranks and returns it.
RedistributePlan planAndRun(const std::vector<int64_t> &shape,
                            const std::vector<int64_t> &mesh,
                            const std::vector<Placement> &from,
                            const std::vector<Placement> &to) {
  RedistributePlan plan = planRedistribute(
      shape, 4, mesh, from, to, MeshCostModel::defaults(mesh.size()));
  EXPECT_EQ(plan.error, "");
  Simulation sim(shape, mesh, from);
  for (const RedistributeStep &step : plan.steps) {
    std::string failure = sim.apply(step);
    EXPECT_EQ(failure, "");
    if (!failure.empty())
      return plan;
  }
  EXPECT_EQ(sim.check(to), "");
  return plan;
}

std::vector<Kind> kinds(const RedistributePlan &plan) {
  std::vector<Kind> out;
  for (const auto &step : plan.steps)
    out.push_back(step.kind);
  return out;
}

TEST(Redistribute, OneDimTable) {
  // DESIGN.md §2, one mesh dim, uneven (5 rows on 4 ranks: 2, 2, 1, 0).
  EXPECT_EQ(kinds(planAndRun({5, 3}, {4}, {S(0)}, {R()})),
            std::vector<Kind>{Kind::AllGather});
  EXPECT_EQ(kinds(planAndRun({5, 3}, {4}, {P()}, {R()})),
            std::vector<Kind>{Kind::AllReduce});
  EXPECT_EQ(kinds(planAndRun({5, 3}, {4}, {P()}, {S(1)})),
            std::vector<Kind>{Kind::ReduceScatter});
  EXPECT_EQ(kinds(planAndRun({5, 3}, {4}, {S(0)}, {S(1)})),
            std::vector<Kind>{Kind::AllToAll});
  EXPECT_EQ(kinds(planAndRun({5, 3}, {4}, {R()}, {S(0)})),
            std::vector<Kind>{Kind::LocalSlice});
  EXPECT_EQ(kinds(planAndRun({5, 3}, {4}, {R()}, {P()})),
            std::vector<Kind>{Kind::LocalPartial});
  // Shard -> Partial goes through Replicate, as in DTensor.
  EXPECT_EQ(kinds(planAndRun({5, 3}, {3}, {S(0)}, {P()})),
            (std::vector<Kind>{Kind::AllGather, Kind::LocalPartial}));
  EXPECT_TRUE(planAndRun({5, 3}, {4}, {S(0)}, {S(0)}).steps.empty());
}

TEST(Redistribute, SwapWithoutFullGather) {
  // [S0, S1] -> [S1, S0] on 2x2: no rank ever holds the whole tensor
  // (gather dp, all_to_all tp, slice dp).
  RedistributePlan plan =
      planAndRun({8, 8}, {2, 2}, {S(0), S(1)}, {S(1), S(0)});
  for (const auto &step : plan.steps) {
    bool replicated = true;
    for (const Placement &p : step.after)
      replicated &= p.kind == Placement::Kind::Replicate;
    EXPECT_FALSE(replicated) << step.str();
  }
  EXPECT_EQ(kinds(plan), (std::vector<Kind>{Kind::AllGather, Kind::AllToAll,
                                            Kind::LocalSlice}));
}

TEST(Redistribute, NestedShardsGatherInnermostFirst) {
  // Two mesh dims shard dim 0: mesh dim 1's shard must go first.
  RedistributePlan plan = planAndRun({7, 2}, {2, 2}, {S(0), S(0)}, {R(), R()});
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].meshDim, 1);
  EXPECT_EQ(plan.steps[1].meshDim, 0);
}

TEST(Redistribute, StridedShard) {
  // FSDP over TP (seed 001): [SS(0, 2), S(0)] <-> [R, S(0)] and to Shard.
  planAndRun({12, 3}, {2, 2}, {SS(0, 2), S(0)}, {R(), S(0)});
  planAndRun({12, 3}, {2, 2}, {R(), S(0)}, {SS(0, 2), S(0)});
  planAndRun({12, 3}, {2, 2}, {SS(0, 2), S(0)}, {R(), R()});
  // Packed q|k|v: StridedShard(0, 3) <-> Shard(0), uneven.
  planAndRun({9, 4}, {2}, {SS(0, 3)}, {S(0)});
  planAndRun({10, 4}, {4}, {S(0)}, {SS(0, 3)});
  // The gradient's way back: one reduce_scatter on dp into the TP shard
  // (fsdp-tp), and one into a packed projection's StridedShard.
  EXPECT_EQ(kinds(planAndRun({12, 3}, {2, 2}, {P(), S(0)}, {SS(0, 2), S(0)})),
            std::vector<Kind>{Kind::ReduceScatter});
  EXPECT_EQ(kinds(planAndRun({9, 4}, {2}, {P()}, {SS(0, 3)})),
            std::vector<Kind>{Kind::ReduceScatter});
}

TEST(Redistribute, PartialOnTwoDims) {
  planAndRun({6, 5}, {2, 3}, {P(), P()}, {R(), R()});
  planAndRun({6, 5}, {2, 3}, {P(), S(1)}, {S(0), S(1)});
  planAndRun({6, 5}, {2, 3}, {S(0), P()}, {R(), S(0)});
}

/// Every pair of layouts on a 2x2 mesh (and a 2x3 one) for a 3-D tensor of
/// uneven sizes: a plan exists, and it moves the data correctly.
TEST(Redistribute, AllPairsSimulate) {
  std::vector<Placement> options = {R(), P(), S(0), S(1), S(2), SS(0, 2)};
  for (std::vector<int64_t> mesh : {std::vector<int64_t>{2, 2}, {2, 3}})
    for (const Placement &a0 : options)
      for (const Placement &a1 : options)
        for (const Placement &b0 : options)
          for (const Placement &b1 : options) {
            SCOPED_TRACE(a0.str() + "," + a1.str() + " -> " + b0.str() + "," +
                         b1.str());
            planAndRun({5, 3, 4}, mesh, {a0, a1}, {b0, b1});
          }
}

/// One planner reused for every pair of layouts (in both orders, so each
/// plan meets layouts an earlier one cached; the targets of one source in
/// a row, so most searches resume the last one, some after a target that
/// added candidates or failed) gives planRedistribute's plan, steps, bytes
/// and seconds, and the same errors; its summary gives the plan's seconds,
/// bytes and collectives (a summary searches to Replicate where the target
/// turns a mesh dim Partial: Partials of every reduce kind, on 2-D and 3-D
/// meshes).
static void checkPlannerReuse(const std::vector<int64_t> &shape,
                              const std::vector<int64_t> &mesh,
                              const std::vector<Placement> &options) {
  MeshCostModel model = MeshCostModel::defaults(mesh.size());
  RedistributePlanner planner(shape, 2, mesh, model);
  std::vector<std::vector<Placement>> layouts = {{}};
  for (size_t m = 0; m < mesh.size(); ++m) {
    std::vector<std::vector<Placement>> longer;
    for (const auto &prefix : layouts)
      for (const Placement &p : options) {
        longer.push_back(prefix);
        longer.back().push_back(p);
      }
    layouts = std::move(longer);
  }
  // Out of range: an error, not a plan.
  layouts.push_back(std::vector<Placement>(mesh.size(), R()));
  layouts.back()[0] = S(static_cast<int64_t>(shape.size()));
  for (bool reverse : {false, true})
    for (size_t i = 0; i < layouts.size(); ++i)
      for (size_t j = 0; j < layouts.size(); ++j) {
        const auto &from = layouts[reverse ? layouts.size() - 1 - i : i];
        const auto &to = layouts[reverse ? layouts.size() - 1 - j : j];
        RedistributePlan fresh =
            planRedistribute(shape, 2, mesh, from, to, model);
        RedistributePlan reused = planner.plan(from, to);
        ASSERT_EQ(fresh.error, reused.error);
        ASSERT_EQ(fresh.seconds, reused.seconds);
        ASSERT_EQ(fresh.steps.size(), reused.steps.size());
        int64_t sent = 0, collectives = 0;
        for (size_t k = 0; k < fresh.steps.size(); ++k) {
          ASSERT_EQ(fresh.steps[k].str(), reused.steps[k].str());
          sent += fresh.steps[k].bytesPerRank;
          collectives += fresh.steps[k].bytesPerRank > 0;
        }
        RedistributePlanner::Summary summary = planner.summarize(from, to);
        if (!fresh.error.empty()) {
          EXPECT_EQ(summary.seconds, std::numeric_limits<double>::infinity());
          continue;
        }
        EXPECT_EQ(summary.seconds, fresh.seconds);
        EXPECT_EQ(summary.bytesPerRank, sent);
        EXPECT_EQ(summary.collectives, collectives);
      }
}

TEST(Redistribute, PlannerReuseEqualsFreshPlans) {
  checkPlannerReuse({7, 6}, {2, 3},
                    {R(), P(), S(0), S(1), SS(0, 2), SS(1, 3),
                     Placement::partial(ReduceKind::Max)});
  checkPlannerReuse({6, 5, 4}, {2, 2, 3},
                    {R(), P(), S(0), S(2), SS(0, 2),
                     Placement::partial(ReduceKind::Avg)});
}

TEST(Redistribute, CostsAndErrors) {
  // Bytes: an all_gather of a [8, 4] f32 tensor on 4 ranks moves 3/4 of it.
  RedistributePlan plan = planRedistribute({8, 4}, 4, {4}, {S(0)}, {R()},
                                           MeshCostModel::defaults(1));
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].bytesPerRank, 96);
  EXPECT_GT(plan.seconds, 0);
  EXPECT_EQ(plan.steps[0].str(),
            "all_gather on mesh dim 0: [shard<0>] -> [replicate], 96 "
            "bytes/rank");
  // The slower inter-node dim is avoided when a cheaper route exists.
  MeshCostModel model = MeshCostModel::defaults(2);
  EXPECT_GT(model.latency[0], model.latency[1]);
  // Bad layouts are reported, not asserted.
  EXPECT_NE(
      planRedistribute({4}, 4, {2}, {S(1)}, {R()}, MeshCostModel::defaults(1))
          .error,
      "");
  EXPECT_NE(
      planRedistribute({4}, 4, {2}, {R()}, {R()}, MeshCostModel::defaults(2))
          .error,
      "");
  // A search too large to keep (8 candidates on each of 8 mesh dims) is
  // refused with a reason.
  std::vector<Placement> replicated(8, R()), sharded(8, R());
  sharded[0] = S(6);
  RedistributePlan huge =
      planRedistribute({2, 2, 2, 2, 2, 2, 2}, 4, std::vector<int64_t>(8, 2),
                       replicated, sharded, MeshCostModel::defaults(8));
  EXPECT_NE(huge.error.find("too many layouts to search"), std::string::npos)
      << huge.error;
}

} // namespace
