//===- Passes.h - propagation stage passes ----------------------*- C++ -*-===//
//
// `--spmd-propagate`: sharding propagation and resharding on the global
// program (Passes.td, docs/propagation.md).
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_PROPAGATE_PASSES_H
#define SPMD_PROPAGATE_PASSES_H

#include "spmd/Dialect/SPMD/SPMD.h"

#include "mlir/Pass/Pass.h"

namespace spmd {

#define GEN_PASS_DECL
#include "spmd/Propagate/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "spmd/Propagate/Passes.h.inc"

} // namespace spmd

#endif // SPMD_PROPAGATE_PASSES_H
