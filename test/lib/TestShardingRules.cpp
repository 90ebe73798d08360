//===- TestShardingRules.cpp - print the sharding rules of aten ops -------===//
//
// --spmd-test-print-sharding-rules: a remark on every aten op with its
// einsum rule and strategies (ShardingRuleOpInterface), or that it has none.
//
//===----------------------------------------------------------------------===//

#include "spmd/Dialect/Aten/Aten.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace {
struct TestPrintShardingRules
    : PassWrapper<TestPrintShardingRules, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestPrintShardingRules)

  StringRef getArgument() const final {
    return "spmd-test-print-sharding-rules";
  }
  StringRef getDescription() const final {
    return "Print each aten op's einsum sharding rule and strategies";
  }

  void runOnOperation() override {
    getOperation()->walk([](spmd::aten::ShardingRuleOpInterface op) {
      std::optional<spmd::layout::EinsumRule> rule = op.getShardingRule();
      if (!rule) {
        op.emitRemark("no sharding rule");
        return;
      }
      std::string text = llvm::join(rule->operands, ",") + "->" + rule->result;
      if (!rule->unshardable.empty())
        text += " whole " + rule->unshardable;
      text += ":";
      for (const spmd::layout::OpStrategy &s : rule->strategies())
        text += " [" + s.str() + "]";
      op.emitRemark(text);
    });
  }
};
} // namespace

namespace spmd::test {
void registerTestPasses() { PassRegistration<TestPrintShardingRules>(); }
} // namespace spmd::test
