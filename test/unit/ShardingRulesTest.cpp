//===- ShardingRulesTest.cpp - op strategies, checked by running them -----===//
//
// Every strategy of every rule below is run on simulated ranks of a 1-D
// mesh (2, 3 and 4 ranks, sizes that do not divide): each rank runs the
// runtime's CPU kernel on its local pieces, the local results are
// assembled by the result placement (Shard: concatenated by index ranges,
// Replicate: every rank's must be whole, Partial: summed) and compared with
// the kernel on the unsharded inputs (DTensor's OpInfo-style check).
//
//===----------------------------------------------------------------------===//

#include "spmd/Layout/ShardingRules.h"
#include "spmd/Runtime/Runtime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <functional>

using namespace spmd::layout;

namespace {

using Shape = std::vector<int64_t>;

/// A float tensor: shape and row-major values.
struct Tensor {
  Shape shape;
  std::vector<float> data;
};

int64_t numel(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Tensor randomTensor(const Shape &shape, int seed) {
  Tensor t{shape, std::vector<float>(numel(shape))};
  for (size_t i = 0; i < t.data.size(); ++i)
    t.data[i] = std::sin(0.7f * static_cast<float>(i) + seed) +
                0.1f * static_cast<float>(seed);
  return t;
}

/// Calls `f(local index, global index)` for the elements the index maps
/// select (one list of global indices per dim).
void forEachMapped(const Shape &global, const std::vector<Shape> &maps,
                   const std::function<void(int64_t, int64_t)> &f) {
  size_t rank = maps.size();
  Shape local;
  for (const Shape &m : maps) {
    if (m.empty())
      return;
    local.push_back(m.size());
  }
  Shape idx(rank, 0);
  while (true) {
    int64_t l = 0, g = 0;
    for (size_t d = 0; d < rank; ++d) {
      l = l * local[d] + idx[d];
      g = g * global[d] + maps[d][idx[d]];
    }
    f(l, g);
    size_t d = rank;
    while (d > 0 && ++idx[d - 1] == local[d - 1])
      idx[--d] = 0;
    if (d == 0)
      return;
  }
}

std::vector<Shape> indexMaps(const Shape &shape, int64_t ranks,
                             const Placement &p, int64_t rank) {
  auto ranges = localIndexRanges(shape, {ranks}, {p}, {rank});
  std::vector<Shape> maps;
  for (const auto &dim : ranges) {
    maps.emplace_back();
    for (const Interval &interval : dim)
      for (int64_t i = interval.begin; i < interval.end; ++i)
        maps.back().push_back(i);
  }
  return maps;
}

/// The piece of `t` rank `rank` holds under `p` (Partial: a share of it).
Tensor localPiece(const Tensor &t, int64_t ranks, const Placement &p,
                  int64_t rank) {
  if (p.kind == Placement::Kind::Partial) {
    Tensor share = t;
    float w = static_cast<float>(rank + 1) / (ranks * (ranks + 1) / 2.0f);
    for (float &v : share.data)
      v *= w;
    return share;
  }
  Tensor piece{localShape(t.shape, {ranks}, {p}, {rank}), {}};
  piece.data.resize(numel(piece.shape));
  forEachMapped(t.shape, indexMaps(t.shape, ranks, p, rank),
                [&](int64_t l, int64_t g) { piece.data[l] = t.data[g]; });
  return piece;
}

/// Runs a kernel on input tensors into an output of `outShape`.
using Kernel =
    std::function<void(SpmdBuffer *out, std::vector<SpmdBuffer *> inputs)>;

Tensor run(const Kernel &kernel, const std::vector<Tensor> &inputs,
           const Shape &outShape) {
  std::vector<SpmdBuffer *> buffers;
  for (const Tensor &t : inputs) {
    buffers.push_back(spmd_rt_alloc(SPMD_F32, t.shape.size(), t.shape.data()));
    std::memcpy(buffers.back()->data, t.data.data(), t.data.size() * 4);
  }
  SpmdBuffer *out = spmd_rt_alloc(SPMD_F32, outShape.size(), outShape.data());
  kernel(out, buffers);
  Tensor result{outShape, std::vector<float>(numel(outShape))};
  std::memcpy(result.data.data(), out->data, result.data.size() * 4);
  for (SpmdBuffer *b : buffers)
    spmd_rt_free(b);
  spmd_rt_free(out);
  return result;
}

struct Case {
  std::string name;
  EinsumRule rule;
  std::vector<Shape> shapes; // global operand shapes
  Shape result;
  Kernel kernel;
};

/// Runs every strategy of `c` on `ranks` simulated ranks.
void checkCase(const Case &c, int64_t ranks) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < c.shapes.size(); ++i)
    inputs.push_back(randomTensor(c.shapes[i], static_cast<int>(i) + 1));
  Tensor want = run(c.kernel, inputs, c.result);
  float scale = 1e-6f;
  for (float v : want.data)
    scale = std::max(scale, std::abs(v));

  for (const OpStrategy &s : c.rule.strategies()) {
    SCOPED_TRACE(c.name + " on " + std::to_string(ranks) +
                 " ranks: " + s.str());
    Tensor got{c.result, std::vector<float>(numel(c.result), 0.0f)};
    for (int64_t r = 0; r < ranks; ++r) {
      std::vector<Tensor> local;
      for (size_t i = 0; i < inputs.size(); ++i)
        local.push_back(localPiece(inputs[i], ranks, s.operands[i], r));
      bool sharded = s.results[0].isShardLike();
      Shape outShape = sharded
                           ? localShape(c.result, {ranks}, {s.results[0]}, {r})
                           : c.result;
      Tensor out = run(c.kernel, local, outShape);
      if (sharded) {
        forEachMapped(c.result, indexMaps(c.result, ranks, s.results[0], r),
                      [&](int64_t l, int64_t g) { got.data[g] = out.data[l]; });
      } else if (s.results[0].kind == Placement::Kind::Partial) {
        for (size_t i = 0; i < out.data.size(); ++i)
          got.data[i] += out.data[i];
      } else {
        for (size_t i = 0; i < out.data.size(); ++i)
          ASSERT_NEAR(out.data[i], want.data[i], 1e-4f * scale)
              << "replicated result differs on rank " << r;
        got = out;
      }
    }
    for (size_t i = 0; i < want.data.size(); ++i)
      ASSERT_NEAR(got.data[i], want.data[i], 1e-4f * scale) << "element " << i;
  }
}

std::vector<Case> cases() {
  auto binary = [](auto fn) {
    return [fn](SpmdBuffer *out, std::vector<SpmdBuffer *> in) {
      fn(out, in[0], in[1]);
    };
  };
  auto unary = [](auto fn) {
    return
        [fn](SpmdBuffer *out, std::vector<SpmdBuffer *> in) { fn(out, in[0]); };
  };
  return {
      {"mm",
       {{"mk", "kn"}, {"mn"}, "", {{0}, {1}}},
       {{5, 7}, {7, 6}},
       {5, 6},
       binary(spmd_rt_mm)},
      {"bmm",
       {{"bmk", "bkn"}, {"bmn"}, "", {{0}, {1}}},
       {{3, 5, 7}, {3, 7, 2}},
       {3, 5, 2},
       binary(spmd_rt_bmm)},
      {"addmm",
       {{"n", "mk", "kn"}, {"mn"}, "", {{0, 1}, {0, 2}}, {0}},
       {{6}, {5, 7}, {7, 6}},
       {5, 6},
       [](SpmdBuffer *out, std::vector<SpmdBuffer *> in) {
         spmd_rt_addmm(out, in[0], in[1], in[2], 1.0, 1.0);
       }},
      {"add.Tensor (broadcast)",
       {{"ab", "1b"}, {"ab"}, "", {{0, 1}}},
       {{5, 7}, {1, 7}},
       {5, 7},
       [](SpmdBuffer *out, std::vector<SpmdBuffer *> in) {
         spmd_rt_add_tensor(out, in[0], in[1], 1.0);
       }},
      {"mul.Tensor",
       {{"ab", "ab"}, {"ab"}, "", {{0}, {1}}},
       {{5, 7}, {5, 7}},
       {5, 7},
       binary(spmd_rt_mul_tensor)},
      {"sum.dim_IntList [1]",
       {{"abc"}, {"ac"}, "", {{0}}},
       {{3, 5, 6}},
       {3, 6},
       [](SpmdBuffer *out, std::vector<SpmdBuffer *> in) {
         int64_t dims[] = {1};
         spmd_rt_sum(out, in[0], 1, dims);
       }},
      {"_softmax dim 1",
       {{"ab"}, {"ab"}, "b", {}},
       {{5, 7}},
       {5, 7},
       [](SpmdBuffer *out, std::vector<SpmdBuffer *> in) {
         spmd_rt_softmax(out, in[0], 1);
       }},
      {"relu", {{"ab"}, {"ab"}, "", {}}, {{5, 7}}, {5, 7}, unary(spmd_rt_relu)},
  };
}

TEST(ShardingRules, Strategies) {
  EinsumRule mm{{"mk", "kn"}, {"mn"}, "", {{0}, {1}}};
  std::vector<std::string> got;
  for (const OpStrategy &s : mm.strategies())
    got.push_back(s.str());
  EXPECT_EQ(got, (std::vector<std::string>{
                     "replicate, replicate -> replicate",
                     "shard<0>, replicate -> shard<0>",
                     "replicate, shard<1> -> shard<1>",
                     "shard<1>, shard<0> -> partial<sum>",
                     "partial<sum>, replicate -> partial<sum>",
                     "replicate, partial<sum> -> partial<sum>"}));
  EinsumRule softmax{{"ab"}, {"ab"}, "b", {}};
  EXPECT_EQ(softmax.strategies().size(), 2u);
}

TEST(ShardingRules, RearrangementsPassEveryPartial) {
  // A transpose moves elements: a Partial of any reduction passes through
  // (the max over ranks of a transpose is the transpose of the maxima).
  EinsumRule transpose{{"ab"}, {"ba"}, "", {{0}}};
  transpose.movesElements = true;
  std::vector<std::string> got;
  for (const OpStrategy &s : transpose.strategies())
    got.push_back(s.str());
  EXPECT_EQ(got, (std::vector<std::string>{
                     "replicate -> replicate", "shard<1> -> shard<0>",
                     "shard<0> -> shard<1>", "partial<sum> -> partial<sum>",
                     "partial<avg> -> partial<avg>",
                     "partial<max> -> partial<max>",
                     "partial<min> -> partial<min>"}));
  // A pointwise op that is linear passes only its own kind.
  EinsumRule scale{{"ab"}, {"ab"}, "", {{0}}};
  EXPECT_EQ(scale.strategies().back().str(), "partial<sum> -> partial<sum>");
}

TEST(ShardingRules, EveryStrategyMatchesTheUnshardedOp) {
  for (const Case &c : cases())
    for (int64_t ranks : {2, 3, 4})
      checkCase(c, ranks);
}

} // namespace
