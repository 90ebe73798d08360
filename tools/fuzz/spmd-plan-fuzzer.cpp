//===- spmd-plan-fuzzer.cpp - TP plans through tp and fsdp-tp -------------===//
//
// The input is a TP plan (JSON). It is written to a file and given as
// `plan=` to --spmd-parallelize in the tp (2 ranks) and fsdp-tp (2x2) modes
// on the captured encoder step (tools/fuzz/Inputs/encoder.mlir: attention,
// linears, layer norms), so parsing, resolution against the step's modules
// and parameters, and partitioning under the plan all see it. Seeds: the
// examples' and the tests' plans.
//
//===----------------------------------------------------------------------===//

#include "FuzzContext.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

using namespace mlir;

namespace {
std::string planPath;
std::string stepText;
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  spmd::fuzz::initialize();
  llvm::SmallString<128> path;
  if (llvm::sys::fs::createTemporaryFile("spmd-plan-fuzzer", "json", path)) {
    llvm::errs() << "spmd-plan-fuzzer: cannot create a temporary file\n";
    abort();
  }
  planPath = path.str().str();
  auto step = llvm::MemoryBuffer::getFile(SPMD_FUZZ_INPUTS_DIR "/encoder.mlir");
  if (!step) {
    llvm::errs() << "spmd-plan-fuzzer: cannot read " SPMD_FUZZ_INPUTS_DIR
                    "/encoder.mlir\n";
    abort();
  }
  stepText = (*step)->getBuffer().str();
  std::atexit([] { llvm::sys::fs::remove(planPath); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(planPath, ec);
    if (ec)
      abort();
    os.write(reinterpret_cast<const char *>(data), size);
  }
  std::unique_ptr<MLIRContext> context = spmd::fuzz::makeContext();
  OwningOpRef<ModuleOp> module = spmd::fuzz::parse(stepText, *context);
  if (!module)
    abort(); // the seed module must parse
  spmd::fuzz::runPipeline(*module, "spmd-parallelize{mode=tp mesh=2 plan=" +
                                       planPath + "},spmd-lower-to-runtime");
  spmd::fuzz::runPipeline(
      *module, "spmd-parallelize{mode=fsdp-tp mesh=2x2 plan=" + planPath + "}");
  return 0;
}
