//===- Passes.h - partition stage passes ------------------------*- C++ -*-===//
//
// `--spmd-partition` (the per-rank program) and `--spmd-report` (its
// collectives and memory): Passes.td, docs/partition.md.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_PARTITION_PASSES_H
#define SPMD_PARTITION_PASSES_H

#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"

#include "mlir/Pass/Pass.h"

namespace spmd {

#define GEN_PASS_DECL
#include "spmd/Partition/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "spmd/Partition/Passes.h.inc"

} // namespace spmd

#endif // SPMD_PARTITION_PASSES_H
