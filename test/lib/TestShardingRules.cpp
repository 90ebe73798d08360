//===- TestShardingRules.cpp - print the sharding rules of aten ops -------===//
//
// --spmd-test-print-sharding-rules: a remark on every aten op with its
// einsum rule and strategies (ShardingRuleOpInterface), or that it has none.
// --spmd-test-print-strategies: every strategy of every aten op on the
// module's mesh (enumerateStrategies), on stdout, per function:
//   @fn aten.mm
//     0: [replicate] [replicate] -> [replicate]
// (one placement list per operand, `->`, one per result); the per-op
// differential test (test/Partition/op-matrix-*.test) forces each one.
//
//===----------------------------------------------------------------------===//

#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"
#include "spmd/Propagate/Strategy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

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
    getOperation()->walk([](spmd::ShardingRuleOpInterface op) {
      std::optional<spmd::layout::EinsumRule> rule = op.getShardingRule();
      if (!rule) {
        op.emitRemark("no sharding rule");
        return;
      }
      std::string text = llvm::join(rule->operands, ",") + "->" +
                         llvm::join(rule->results, ",");
      if (!rule->unshardable.empty())
        text += " whole " + rule->unshardable;
      if (!rule->evenOnly.empty())
        text += " even " + rule->evenOnly;
      text += ":";
      for (const spmd::layout::OpStrategy &s : rule->strategies())
        text += " [" + s.str() + "]";
      op.emitRemark(text);
    });
  }
};

struct TestPrintStrategies
    : PassWrapper<TestPrintStrategies, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestPrintStrategies)

  StringRef getArgument() const final { return "spmd-test-print-strategies"; }
  StringRef getDescription() const final {
    return "Print every strategy of every aten op on the module's mesh";
  }

  void runOnOperation() override {
    spmd::MeshOp meshOp =
        spmd::getOnlyMesh(getOperation(), "spmd-test-print-strategies");
    if (!meshOp)
      return signalPassFailure();
    ArrayRef<int64_t> mesh = meshOp.getShape();
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      fn.walk([&](spmd::ShardingRuleOpInterface op) {
        llvm::outs() << "@" << fn.getSymName() << " "
                     << op->getName().getStringRef() << "\n";
        FailureOr<std::vector<spmd::MeshStrategy>> all =
            spmd::enumerateStrategies(op, mesh);
        if (failed(all))
          return;
        for (auto [i, s] : llvm::enumerate(*all)) {
          llvm::outs() << "  " << i << ":";
          for (const spmd::Placements &p : s.operands)
            llvm::outs() << " " << spmd::layout::placementsStr(p);
          llvm::outs() << " ->";
          for (const spmd::Placements &p : s.results)
            llvm::outs() << " " << spmd::layout::placementsStr(p);
          llvm::outs() << "\n";
        }
      });
    }
  }
};
} // namespace

namespace spmd::test {
void registerTestPasses() {
  PassRegistration<TestPrintShardingRules>();
  PassRegistration<TestPrintStrategies>();
}
} // namespace spmd::test
