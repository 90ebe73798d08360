//===- ShardingRules.h - op sharding strategies by einsum rule --*- C++ -*-===//
//
// The strategies of an op on one mesh dim, derived from an einsum-style
// description of the op (DTensor's `einop` rule, torch/distributed/_tensor/
// ops/common_rules.py): every tensor dim gets a label; a label kept in the
// result may be sharded in every operand that has it (the result is
// sharded the same way); a label that is summed away may be sharded in
// every operand that has it (the result is Partial(sum)); operands in which
// the op is linear may carry a Partial(sum) through. Strategies on an N-D
// mesh combine one strategy per mesh dim (the propagation's job).
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_LAYOUT_SHARDINGRULES_H
#define SPMD_LAYOUT_SHARDINGRULES_H

#include "spmd/Layout/LayoutMath.h"

#include <algorithm>
#include <string>
#include <vector>

namespace spmd::layout {

/// One way to run an op on one mesh dim: a placement for every operand and
/// every result.
struct OpStrategy {
  std::vector<Placement> operands;
  std::vector<Placement> results;
  /// The strategy shards a dim that a view merges with or splits into other
  /// dims: it is exact only when every shard is full (torch.chunk pieces of
  /// the merged dim and of the outer dim then coincide), so the sharded
  /// dims must divide evenly by the mesh dims that shard them.
  bool evenShards = false;
  /// When positive, the strategy shards a piece (an atom of a view) of
  /// this many elements, named by its global position (StridedShard(d, P),
  /// P the product of the atoms before it): the mesh dims sharding it must
  /// divide it, and on an N-D mesh the factor is made local to the earlier
  /// mesh dims' shards (spmd::enumerateStrategies).
  int64_t divides = 0;

  /// E.g. "shard<0>, replicate -> shard<0>" (results comma-separated).
  std::string str() const;
};

/// An op in einsum form.
struct EinsumRule {
  /// One label string per operand and the result's, e.g. {"mk", "kn"} and
  /// "mn" for mm; an operand dim that broadcasts (size 1 against a larger
  /// result dim) must be written as '1': it is never sharded.
  std::vector<std::string> operands;
  /// One label string per result (layer norm: output, mean and rstd).
  std::vector<std::string> results;
  /// Labels that must stay whole (softmax's and layer norm's normalized
  /// dims): never sharded.
  std::string unshardable;
  /// Operands the op is linear in, for Partial(reduce) pass-through: each
  /// one may be Partial while the others are Replicate (a bilinear op such
  /// as mm lists both; add lists the set of all operands, which may be
  /// Partial together). Every result is then Partial(reduce).
  std::vector<std::vector<int>> linearGroups;
  /// Operands added to the product rather than multiplied into it (addmm's
  /// and baddbmm's `self`): where a contraction makes the result Partial,
  /// they must be Partial(sum) too, or every rank would add them once.
  std::vector<int> additive;
  /// Labels that may be sharded only evenly (OpStrategy::evenShards): the
  /// outer dim of a group of dims that a view merges or splits.
  std::string evenOnly;
  /// Labels of dims made of equal groups that must stay whole on a rank,
  /// with their group count (a grouped convolution's channels): the mesh
  /// dims sharding the label must divide the count (OpStrategy::divides),
  /// so the shards are even and hold whole groups.
  std::vector<std::pair<char, int64_t>> groupedLabels;
  /// Results that a contraction over a sharded label leaves Replicate rather
  /// than Partial(sum) because the op reduces them itself (the mean
  /// nll_loss's total_weight, which the partitioner all-reduces).
  std::vector<int> selfReduced;
  /// The reduction a contraction leaves pending and that linear operands
  /// carry through: Partial(sum) for sums and products, Partial(max) for
  /// amax, Partial(avg) for mean (DTensor's reduction_op of the op). An avg
  /// is exact only over equal shards: its reduced labels are `evenOnly`.
  ReduceKind reduce = ReduceKind::Sum;
  /// The op only copies or moves elements (views, permutes, cat, split,
  /// select): a Partial of every reduction kind passes through its linear
  /// groups, not only Partial(reduce), as DTensor keeps Partial placements
  /// through its view and tensor-manipulation ops. A max over ranks of a
  /// concatenation is the concatenation of the maxima.
  bool movesElements = false;
  /// Strategies that labels cannot express, appended as they are: views
  /// that move a sharded piece of a dim into another dim (Shard(k) <->
  /// StridedShard(j, product of the outer sizes)).
  std::vector<OpStrategy> extra;

  /// The rule's strategies on one mesh dim, in a fixed order: all
  /// Replicate first, then one per shardable label (result labels in result
  /// order, then contracted ones), then the Partial pass-throughs, then
  /// `extra` (the pass-throughs of Partial(reduce) first, then, for an op
  /// that movesElements, those of the other kinds). A result that lacks a
  /// sharded label is Partial(reduce) (the label is reduced away).
  std::vector<OpStrategy> strategies() const;

  /// The identity on a tensor of `rank` dims: every placement passes
  /// through, Partial(sum) included (spmd.sharding_constraint).
  static EinsumRule identity(int64_t rank);
};

} // namespace spmd::layout

#endif // SPMD_LAYOUT_SHARDINGRULES_H
