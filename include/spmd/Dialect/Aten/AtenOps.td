//===- AtenOps.td - aten operations ------------------------*- tablegen -*-===//

#ifndef SPMD_DIALECT_ATEN_ATENOPS_TD
#define SPMD_DIALECT_ATEN_ATENOPS_TD

include "spmd/Dialect/Aten/AtenDialect.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"

class Aten_Op<string mnemonic, list<Trait> traits = []>
    : Op<Aten_Dialect, mnemonic, !listconcat(traits, [Pure, InferTypeOpAdaptor])> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}

def Aten_MmOp : Aten_Op<"mm"> {
  let summary = "aten::mm(Tensor self, Tensor mat2) -> Tensor";
  let arguments = (ins AnyStaticShapeTensor:$self, AnyStaticShapeTensor:$mat2);
  let results = (outs AnyStaticShapeTensor:$result);
}

#endif // SPMD_DIALECT_ATEN_ATENOPS_TD
