//===- spmd-opt-fuzzer.cpp - MLIR input through every ParallelMode --------===//
//
// The input is MLIR text. It is parsed and verified with spmd-opt's dialects;
// a single-device step (no spmd.mesh) then goes through --spmd-parallelize
// in every built-in mode (ddp on 4 ranks, fsdp on 3 for uneven shards, tp on
// 2 and fsdp-tp on 2x2 with each example plan), and ddp's program through
// --spmd-lower-to-runtime; a program with a mesh goes through propagate,
// partition and lowering. Seeds: the lit tests' inputs and captured
// examples (tools/fuzz/make_corpus.py).
//
//===----------------------------------------------------------------------===//

#include "FuzzContext.h"

#include "spmd/Dialect/SPMD/SPMD.h"

#include <cstddef>
#include <cstdint>
#include <string>

using namespace mlir;

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  spmd::fuzz::initialize();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::unique_ptr<MLIRContext> context = spmd::fuzz::makeContext();
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  OwningOpRef<ModuleOp> module = spmd::fuzz::parse(text, *context);
  if (!module)
    return 0;
  spmd::fuzz::runPipeline(*module, "spmd-lower-to-runtime");
  if (!module->getOps<spmd::MeshOp>().empty()) {
    spmd::fuzz::runPipeline(*module, "spmd-propagate,spmd-partition,"
                                     "spmd-report,spmd-lower-to-runtime");
    return 0;
  }
  spmd::fuzz::runPipeline(*module, "spmd-parallelize{mode=ddp mesh=4},"
                                   "spmd-report,spmd-lower-to-runtime");
  spmd::fuzz::runPipeline(*module, "spmd-parallelize{mode=fsdp mesh=3}");
  for (const char *plan : {"mlp.tp.json", "encoder.tp.json", "gpt.tp.json"}) {
    std::string path = std::string(SPMD_EXAMPLES_DIR) + "/" + plan;
    spmd::fuzz::runPipeline(*module, "spmd-parallelize{mode=tp mesh=2 "
                                     "plan=" +
                                         path + "}");
    spmd::fuzz::runPipeline(*module, "spmd-parallelize{mode=fsdp-tp "
                                     "mesh=2x2 plan=" +
                                         path + "}");
  }
  return 0;
}
