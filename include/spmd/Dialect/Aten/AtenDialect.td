//===- AtenDialect.td - aten dialect definition ------------*- tablegen -*-===//

#ifndef SPMD_DIALECT_ATEN_ATENDIALECT_TD
#define SPMD_DIALECT_ATEN_ATENDIALECT_TD

include "mlir/IR/OpBase.td"

def Aten_Dialect : Dialect {
  let name = "aten";
  let cppNamespace = "::spmd::aten";
  let summary = "PyTorch ATen operators on builtin ranked tensors";
  let description = [{
    One op per ATen operator overload that spmd-capture's graphs of training
    steps (forward, backward and optimizer update) use: PyTorch 2.x's Core
    ATen opset and the composite ops capture keeps whole (docs/capture.md).
    Op names follow the overload: `aten.add.Tensor`, `aten.sum.dim_IntList`;
    the `default` overload drops its suffix (`aten.mm`).

    Tensors are builtin statically shaped ranked tensors (`f32`, `bf16`,
    `f16`, `f64`, `i64`, `i32`, `i1` for `torch.bool`); scalars and int lists
    are attributes. Every op infers its result types the way ATen computes
    them (broadcasting, type promotion, reductions, views), and the verifier
    rejects results that differ.
  }];
}

#endif // SPMD_DIALECT_ATEN_ATENDIALECT_TD
