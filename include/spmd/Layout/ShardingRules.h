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

#include <string>
#include <vector>

namespace spmd::layout {

/// One way to run an op on one mesh dim: a placement for every operand and
/// the result.
struct OpStrategy {
  std::vector<Placement> operands;
  Placement result;

  /// E.g. "shard<0>, replicate -> shard<0>".
  std::string str() const;
};

/// An op in einsum form.
struct EinsumRule {
  /// One label string per operand and the result's, e.g. {"mk", "kn"} and
  /// "mn" for mm; an operand dim that broadcasts (size 1 against a larger
  /// result dim) must be written as '1': it is never sharded.
  std::vector<std::string> operands;
  std::string result;
  /// Labels that must stay whole (softmax's and layer norm's normalized
  /// dims): never sharded.
  std::string unshardable;
  /// Operands the op is linear in, for Partial(sum) pass-through: each one
  /// may be Partial(sum) while the others are Replicate (a bilinear op such
  /// as mm lists both; add lists the set of all operands, which may be
  /// Partial together).
  std::vector<std::vector<int>> linearGroups;
  /// Operands added to the product rather than multiplied into it (addmm's
  /// and baddbmm's `self`): where a contraction makes the result Partial,
  /// they must be Partial(sum) too, or every rank would add them once.
  std::vector<int> additive;

  /// The rule's strategies on one mesh dim, in a fixed order: all
  /// Replicate first, then one per shardable label (result labels, then
  /// contracted ones), then the Partial pass-throughs.
  std::vector<OpStrategy> strategies() const;
};

} // namespace spmd::layout

#endif // SPMD_LAYOUT_SHARDINGRULES_H
