//===- ModePlugin.cpp - an out-of-tree ParallelMode as a pass plugin ------===//
//
// `spmd-opt --load-pass-plugin=.../SPMDTestModePlugin.so
// --spmd-parallelize="mode=test-replicate mesh=N"`: a mode built outside the
// tree registers itself when MLIR loads the plugin. Every argument stays
// Replicate (the spmd-propagate default); transformAndCompile marks the
// module so the test sees that the plugin's code ran. It resolves spmd's
// symbols from spmd-opt, which exports them.
//
//===----------------------------------------------------------------------===//

#include "spmd/Parallel/ParallelMode.h"

#include "mlir/IR/Builders.h"
#include "mlir/Tools/Plugins/PassPlugin.h"

using namespace mlir;

namespace {
class TestReplicateMode : public spmd::ParallelMode {
public:
  LogicalResult partition(ModuleOp module,
                          const spmd::ParallelOptions &options) override {
    spmd::ParallelOptions named = options;
    named.meshNames = {"world"};
    return spmd::annotateAndPartition(
        module, named,
        [](StringRef, StringRef, RankedTensorType)
            -> std::optional<std::vector<spmd::layout::Placement>> {
          return std::nullopt;
        });
  }
  LogicalResult transformAndCompile(ModuleOp module,
                                    const spmd::ParallelOptions &) override {
    module->setAttr("spmd.test_plugin_mode",
                    UnitAttr::get(module.getContext()));
    return success();
  }
};
} // namespace

extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "SPMDTestModePlugin", "v1", [] {
            spmd::registerParallelMode("test-replicate", [] {
              return std::make_unique<TestReplicateMode>();
            });
          }};
}
