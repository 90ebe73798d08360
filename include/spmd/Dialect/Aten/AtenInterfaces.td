//===- AtenInterfaces.td - aten op interfaces --------------*- tablegen -*-===//

#ifndef SPMD_DIALECT_ATEN_ATENINTERFACES_TD
#define SPMD_DIALECT_ATEN_ATENINTERFACES_TD

include "mlir/IR/OpBase.td"

def Aten_PermutationOpInterface : OpInterface<"PermutationOpInterface"> {
  let cppNamespace = "::spmd::aten";
  let description = [{
    An op that permutes the dims of its operand (t, transpose.int,
    permute): the sharding rule moves labels, the lowering copies with
    permuted strides, and a transpose of the last two dims feeding only
    matrix products costs nothing (BLAS reads the operand transposed).
  }];
  let methods = [
    InterfaceMethod<"Result dim i is operand dim result[i] (normalized).",
      "::llvm::SmallVector<int64_t>", "getPermutation">
  ];
}

#endif // SPMD_DIALECT_ATEN_ATENINTERFACES_TD
