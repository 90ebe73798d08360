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
    unsharded op's result. Every aten op has the interface; ops whose rule
    is not an einsum (views, concatenation, layer norm, embedding, losses,
    factories, random ops) return no rule yet.
  }];
  let methods = [
    InterfaceMethod<[{
        The op's rule, computed from its operand and result types and
        attributes; std::nullopt when it has none (see above).
      }], "::std::optional<::spmd::layout::EinsumRule>", "getShardingRule",
      (ins), "", [{
        return ::spmd::aten::detail::shardingRule($_op.getOperation());
      }]>
  ];
}

#endif // SPMD_DIALECT_ATEN_ATENINTERFACES_TD
