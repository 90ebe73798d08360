//===- Passes.h - the parallelize entry point -------------------*- C++ -*-===//

#ifndef SPMD_PARALLEL_PASSES_H
#define SPMD_PARALLEL_PASSES_H

#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"

#include "mlir/Pass/Pass.h"

namespace spmd {

#define GEN_PASS_DECL
#include "spmd/Parallel/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "spmd/Parallel/Passes.h.inc"

} // namespace spmd

#endif // SPMD_PARALLEL_PASSES_H
