// RUN: spmd-opt %s --spmd-remat -split-input-file | FileCheck %s
// RUN: spmd-opt %s --spmd-remat=policy=selective -split-input-file | FileCheck %s --check-prefix=SEL
// RUN: not spmd-opt %s --spmd-remat=policy=some -split-input-file 2>&1 | FileCheck %s --check-prefix=POLICY
// POLICY: spmd-remat: policy must be full or selective, got 'some'

// Unit layers.0: a matmul, a relu and a dropout whose output (the unit's
// output, which the head reads in forward) is kept. Its backward reads the
// relu and the dropout mask: full recomputation clones the matmul, the
// relu and the mask right before the first backward op, with the mask's
// spmd.random_id, and the backward reads the clones; selective keeps the
// matmul's result.
// CHECK-LABEL: func.func @step
// CHECK: %[[MM:.*]] = aten.mm %arg0, %arg1 {spmd.module = "layers.0.fc", spmd.phase = "forward"}
// CHECK: %[[RELU:.*]] = aten.relu %[[MM]]
// CHECK: aten.bernoulli.p %[[RELU]] {p = {{.*}}, spmd.module = "layers.0.drop", spmd.phase = "forward", spmd.random_id = 0 : i64}
// CHECK: aten.relu %{{.*}} {spmd.module = "head", spmd.phase = "forward"}
// CHECK-NEXT: %[[MM2:.*]] = aten.mm %arg0, %arg1 {spmd.module = "layers.0.fc", spmd.phase = "backward"}
// CHECK-NEXT: %[[RELU2:.*]] = aten.relu %[[MM2]] {spmd.module = "layers.0.act", spmd.phase = "backward"}
// CHECK-NEXT: %[[MASK2:.*]] = aten.bernoulli.p %[[RELU2]] {p = {{.*}}, spmd.module = "layers.0.drop", spmd.phase = "backward", spmd.random_id = 0 : i64}
// CHECK-NEXT: %[[G:.*]] = aten.mul.Tensor %arg2, %[[MASK2]]
// CHECK-NEXT: aten.mul.Tensor %[[G]], %[[RELU2]]
// SEL-LABEL: func.func @step
// SEL: %[[MM:.*]] = aten.mm %arg0, %arg1 {spmd.module = "layers.0.fc", spmd.phase = "forward"}
// SEL: aten.relu %{{.*}} {spmd.module = "head", spmd.phase = "forward"}
// SEL-NEXT: %[[RELU2:.*]] = aten.relu %[[MM]] {spmd.module = "layers.0.act", spmd.phase = "backward"}
// SEL-NEXT: %[[MASK2:.*]] = aten.bernoulli.p %[[RELU2]]
// SEL-NEXT: aten.mul.Tensor %arg2, %[[MASK2]]
func.func @step(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %g: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>) {
  %0 = aten.mm %x, %w {spmd.module = "layers.0.fc", spmd.phase = "forward"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = aten.relu %0 {spmd.module = "layers.0.act", spmd.phase = "forward"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = aten.bernoulli.p %1 {p = 9.000000e-01 : f64, spmd.module = "layers.0.drop", spmd.phase = "forward"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = aten.mul.Tensor %1, %2 {spmd.module = "layers.0.drop", spmd.phase = "forward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = aten.relu %3 {spmd.module = "head", spmd.phase = "forward"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %5 = aten.mul.Tensor %g, %2 {spmd.module = "layers.0.drop", spmd.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %6 = aten.mul.Tensor %5, %1 {spmd.module = "layers.0.act", spmd.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %7 = aten.t %x {spmd.module = "layers.0.fc", spmd.phase = "backward"} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %8 = aten.mm %7, %6 {spmd.module = "layers.0.fc", spmd.phase = "backward"} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  return %4, %8 : tensor<4x8xf32>, tensor<8x8xf32>
}

// -----

// Gradient accumulation: two micro-steps, each a forward of layers.0 then
// its backward. Each micro-step's relu is recomputed before its own
// backward, from its own micro-batch (the second forward comes after the
// first backward, so one clone for both could not read it).
// CHECK-LABEL: func.func @micro
// CHECK: %[[F0:.*]] = aten.relu %arg0 {spmd.module = "layers.0.act", spmd.phase = "forward"}
// CHECK-NEXT: %[[R0:.*]] = aten.relu %arg0 {spmd.module = "layers.0.act", spmd.phase = "backward"}
// CHECK-NEXT: %[[B0:.*]] = aten.mul.Tensor %arg2, %[[R0]] {spmd.module = "layers.0.act", spmd.phase = "backward"}
// CHECK-NEXT: %[[F1:.*]] = aten.relu %arg1 {spmd.module = "layers.0.act", spmd.phase = "forward"}
// CHECK-NEXT: %[[R1:.*]] = aten.relu %arg1 {spmd.module = "layers.0.act", spmd.phase = "backward"}
// CHECK-NEXT: aten.mul.Tensor %arg2, %[[R1]] {spmd.module = "layers.0.act", spmd.phase = "backward"}
func.func @micro(%x0: tensor<4x8xf32>, %x1: tensor<4x8xf32>, %g: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = aten.relu %x0 {spmd.module = "layers.0.act", spmd.phase = "forward"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %1 = aten.mul.Tensor %g, %0 {spmd.module = "layers.0.act", spmd.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = aten.relu %x1 {spmd.module = "layers.0.act", spmd.phase = "forward"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = aten.mul.Tensor %g, %2 {spmd.module = "layers.0.act", spmd.phase = "backward"} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %1, %3 : tensor<4x8xf32>, tensor<4x8xf32>
}
