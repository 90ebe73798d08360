//===- AtenSharding.cpp - einsum sharding rules of aten ops ---------------===//
//
// ShardingRuleOpInterface: each op's rule in einsum form (ShardingRules.h).
// Labels a, b, c, ... name the result's dims; an operand dim broadcast from
// size 1 is '1'. Linear groups follow the op's algebra (a Partial(sum)
// operand gives a Partial(sum) result exactly when the op is linear in it).
//
//===----------------------------------------------------------------------===//

#include "spmd/Dialect/Aten/Aten.h"

#include "llvm/ADT/TypeSwitch.h"

#include "spmd/Dialect/Aten/AtenInterfaces.cpp.inc"

using namespace mlir;
using spmd::layout::EinsumRule;
namespace aten = spmd::aten;

namespace {

int64_t rankOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}

/// Labels of the result of rank `rank`: "abc...".
std::string resultLabels(int64_t rank) {
  std::string labels;
  for (int64_t i = 0; i < rank; ++i)
    labels += static_cast<char>('a' + i);
  return labels;
}

/// The labels of `operand` broadcast to a result of `result` type labelled
/// `labels`: right-aligned; a dim of size 1 against a larger result dim is
/// '1'.
std::string broadcastLabels(Value operand, Type result, StringRef labels) {
  auto type = cast<RankedTensorType>(operand.getType());
  auto resultType = cast<RankedTensorType>(result);
  std::string out;
  int64_t offset = resultType.getRank() - type.getRank();
  for (int64_t d = 0; d < type.getRank(); ++d)
    out += type.getDimSize(d) == 1 && resultType.getDimSize(d + offset) != 1
               ? '1'
               : labels[d + offset];
  return out;
}

/// Elementwise with broadcasting.
EinsumRule broadcastRule(Operation *op, std::vector<std::vector<int>> linear) {
  Type result = op->getResult(0).getType();
  EinsumRule rule;
  rule.result = resultLabels(cast<RankedTensorType>(result).getRank());
  for (Value operand : op->getOperands())
    rule.operands.push_back(broadcastLabels(operand, result, rule.result));
  rule.linearGroups = std::move(linear);
  return rule;
}

/// A reduction of the dims in `dims` (result keeps them as size 1 when
/// `keepdim`).
EinsumRule sumRule(int64_t rank, ArrayRef<int64_t> dims, bool keepdim) {
  EinsumRule rule;
  std::string in = resultLabels(rank);
  rule.operands = {in};
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = llvm::any_of(
        dims, [&](int64_t r) { return aten::normalizeDim(r, rank) == d; });
    if (!reduced)
      rule.result += in[d];
    else if (keepdim)
      rule.result += '1';
  }
  rule.linearGroups = {{0}};
  return rule;
}

/// Softmax family along `dim`: elementwise on the other dims.
EinsumRule normalizedRule(Operation *op, int64_t dim,
                          std::vector<std::vector<int>> linear) {
  EinsumRule rule = broadcastRule(op, std::move(linear));
  int64_t rank = rankOf(op->getResult(0));
  rule.unshardable = rule.result.substr(aten::normalizeDim(dim, rank), 1);
  return rule;
}

EinsumRule matmulRule(bool batched, bool withSelf) {
  EinsumRule rule;
  std::string b = batched ? "b" : "";
  rule.result = b + "mn";
  rule.operands = {b + "mk", b + "kn"};
  rule.linearGroups = {{0}, {1}};
  if (withSelf) {
    // `self` broadcasts to the result; it is added, not multiplied.
    rule.operands.insert(rule.operands.begin(), rule.result);
    rule.linearGroups = {{0, 1}, {0, 2}};
    rule.additive = {0};
  }
  return rule;
}

} // namespace

std::optional<EinsumRule> aten::detail::shardingRule(Operation *op) {
  using Rule = std::optional<EinsumRule>;
  auto elementwise = [&](std::vector<std::vector<int>> linear) -> Rule {
    return broadcastRule(op, std::move(linear));
  };
  return llvm::TypeSwitch<Operation *, Rule>(op)
      // Sums and differences of Partial(sum) values are Partial(sum).
      .Case<AddTensorOp, SubTensorOp>([&](Operation *) {
        return elementwise({{0, 1}});
      })
      // Linear in each factor alone.
      .Case<MulTensorOp>([&](Operation *) {
        return elementwise({{0}, {1}});
      })
      .Case<DivTensorOp, MulScalarOp, DivScalarOp, NegOp, CloneOp, DetachOp,
            ThresholdBackwardOp, GeluBackwardOp, NativeDropoutBackwardOp>(
          [&](Operation *) { return elementwise({{0}}); })
      // self + v * t1 * t2 (or / t2): linear in (self, t1), and for addcmul
      // in (self, t2).
      .Case<AddcmulOp>([&](Operation *) {
        return elementwise({{0, 1}, {0, 2}});
      })
      .Case<AddcdivOp>([&](Operation *) {
        return elementwise({{0, 1}});
      })
      // Adding a constant, powers and nonlinear functions: no Partial.
      .Case<AddScalarOp, RsubScalarOp, PowScalarOp, ReciprocalOp, SqrtOp,
            ReluOp, GeluOp>([&](Operation *) { return elementwise({}); })
      .Case([&](TriuOp) -> Rule {
        // Which elements are zeroed depends on their global position in the
        // last two dims.
        EinsumRule rule = broadcastRule(op, {});
        rule.unshardable = rule.result.substr(rule.result.size() - 2);
        return rule;
      })
      .Case([&](MmOp) { return Rule(matmulRule(false, false)); })
      .Case([&](BmmOp) { return Rule(matmulRule(true, false)); })
      .Case<AddmmOp, BaddbmmOp>([&](Operation *) -> Rule {
        EinsumRule rule = matmulRule(isa<BaddbmmOp>(op), true);
        rule.operands[0] = broadcastLabels(
            op->getOperand(0), op->getResult(0).getType(), rule.result);
        return rule;
      })
      .Case([&](SumOp o) -> Rule {
        int64_t rank = rankOf(o.getSelf());
        return sumRule(rank, llvm::to_vector(llvm::seq<int64_t>(0, rank)),
                       false);
      })
      .Case([&](SumDimIntListOp o) -> Rule {
        return sumRule(rankOf(o.getSelf()), o.getDim(), o.getKeepdim());
      })
      .Case<SoftmaxOp, LogSoftmaxOp>([&](Operation *) -> Rule {
        return normalizedRule(
            op, op->getAttrOfType<IntegerAttr>("dim").getInt(), {});
      })
      // Linear in grad_output.
      .Case<SoftmaxBackwardDataOp, LogSoftmaxBackwardDataOp>(
          [&](Operation *) -> Rule {
            return normalizedRule(
                op, op->getAttrOfType<IntegerAttr>("dim").getInt(), {{0}});
          })
      .Default([](Operation *) -> Rule { return std::nullopt; });
}
