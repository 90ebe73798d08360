// RUN: spmd-opt %s --spmd-lower-to-runtime -split-input-file | FileCheck %s

// A function with no aten op: the returned argument is still given a buffer
// of its own (a view), so the caller may free it independently.
// CHECK-LABEL: llvm.func @identity(
// CHECK-SAME: %[[A:.*]]: !llvm.ptr) -> !llvm.ptr
// CHECK: %[[V:.*]] = llvm.call @spmd_rt_view(%[[A]],
// CHECK: llvm.return %[[V]]
func.func @identity(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}

// -----

// The same on a per-rank program with a mesh and layouts.
spmd.mesh @mesh shape = [2] names = ["dp"]
// CHECK-LABEL: llvm.func @strided(
// CHECK: llvm.call @spmd_rt_view
func.func @strided(%x: tensor<4x2xf32> {spmd.layout = #spmd.layout<@mesh, [strided_shard<0, 2>]>}) -> (tensor<4x2xf32> {spmd.layout = #spmd.layout<@mesh, [strided_shard<0, 2>]>}) {
  return %x : tensor<4x2xf32>
}
