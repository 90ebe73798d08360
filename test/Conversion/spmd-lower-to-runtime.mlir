// RUN: spmd-opt %s --spmd-lower-to-runtime -split-input-file | FileCheck %s

// A function with no aten op: the returned argument is still given a buffer
// of its own (a view), so the caller may free it independently.
// The entry function takes its buffers from an array and returns them in
// another (spmd-pack-entry-functions).
// CHECK-LABEL: llvm.func @identity(
// CHECK-SAME: %[[ARGS:.*]]: !llvm.ptr, %[[RES:.*]]: !llvm.ptr) {
// CHECK: %[[P:.*]] = llvm.getelementptr %[[ARGS]][0]
// CHECK: %[[A:.*]] = llvm.load %[[P]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[V:.*]] = llvm.call @spmd_rt_view(%[[A]],
// CHECK: %[[R:.*]] = llvm.getelementptr %[[RES]][0]
// CHECK: llvm.store %[[V]], %[[R]]
// CHECK: llvm.return{{$}}
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
