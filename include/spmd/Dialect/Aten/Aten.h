//===- Aten.h - aten dialect ------------------------------------*- C++ -*-===//
//
// The aten dialect: PyTorch ATen operators on builtin ranked tensors.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_DIALECT_ATEN_ATEN_H
#define SPMD_DIALECT_ATEN_ATEN_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "spmd/Dialect/Aten/AtenDialect.h.inc"

#define GET_OP_CLASSES
#include "spmd/Dialect/Aten/AtenOps.h.inc"

#endif // SPMD_DIALECT_ATEN_ATEN_H
