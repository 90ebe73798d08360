//===- AtenInterfaces.td - aten op interfaces --------------*- tablegen -*-===//

#ifndef SPMD_DIALECT_ATEN_ATENINTERFACES_TD
#define SPMD_DIALECT_ATEN_ATENINTERFACES_TD

include "mlir/IR/OpBase.td"

def Aten_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::spmd::aten";
  let description = [{
    How an aten op may be sharded on one mesh dim, as an einsum rule
    (spmd/Layout/ShardingRules.h, DTensor's `einop` rule): its strategies
    are the placements of the operands and the result that compute the
    unsharded op's results. Every aten op has a rule: views map groups of
    dims (DTensor's view rules, merged or split dims sharded only evenly),
    layer norm and the softmax family keep their normalized dims whole,
    embeddings keep the vocabulary whole, the losses contract the batch,
    factories and random ops (drawn by global element index) shard their
    result freely.
  }];
  let methods = [
    InterfaceMethod<[{
        The op's rule, computed from its operand and result types and
        attributes; std::nullopt for an op without one (none today).
      }], "::std::optional<::spmd::layout::EinsumRule>", "getShardingRule",
      (ins), "", [{
        return ::spmd::aten::detail::shardingRule($_op.getOperation());
      }]>
  ];
}

#endif // SPMD_DIALECT_ATEN_ATENINTERFACES_TD
