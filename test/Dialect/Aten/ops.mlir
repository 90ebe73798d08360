// RUN: spmd-opt %s | FileCheck %s
// RUN: spmd-opt %s | spmd-opt | FileCheck %s
// RUN: spmd-opt %s --mlir-print-op-generic | spmd-opt | FileCheck %s

// Every aten op, with shapes and dtypes from PyTorch 1.13 training steps
// (MLP, TransformerEncoderLayer with d_model 192, Embedding, cross-entropy,
// Adam). Each CHECK pins the printed op: operands, attributes and types.

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @elementwise(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x2x192xf32>, %[[B:[^:]*]]: tensor<192xf32>, %[[M:[^:]*]]: tensor<8x2x192xi1>, %[[S:[^:]*]]: tensor<8x8xf32>, %[[H:[^:]*]]: tensor<4x8xbf16>, %[[HB:[^:]*]]: tensor<8xbf16>)
func.func @elementwise(%x: tensor<8x2x192xf32>, %b: tensor<192xf32>,
                       %mask: tensor<8x2x192xi1>, %scores: tensor<8x8xf32>,
                       %h: tensor<4x8xbf16>, %hb: tensor<8xbf16>) {
  // Bias add: [8, 2, 192] + [192].
  // CHECK: %[[ADD:.*]] = aten.add.Tensor %[[X]], %[[B]] : (tensor<8x2x192xf32>, tensor<192xf32>) -> tensor<8x2x192xf32>
  %0 = aten.add.Tensor %x, %b : (tensor<8x2x192xf32>, tensor<192xf32>) -> tensor<8x2x192xf32>
  // An explicit default alpha is elided.
  // CHECK: aten.add.Tensor %[[ADD]], %[[X]] : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %1 = aten.add.Tensor %0, %x {alpha = 1.0 : f64} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: aten.sub.Tensor %[[X]], %[[B]] {alpha = 2.000000e+00 : f64} : (tensor<8x2x192xf32>, tensor<192xf32>) -> tensor<8x2x192xf32>
  %2 = aten.sub.Tensor %x, %b {alpha = 2.0 : f64} : (tensor<8x2x192xf32>, tensor<192xf32>) -> tensor<8x2x192xf32>
  // Dropout mask multiply: f32 * i1 -> f32.
  // CHECK: aten.mul.Tensor %[[X]], %[[M]] : (tensor<8x2x192xf32>, tensor<8x2x192xi1>) -> tensor<8x2x192xf32>
  %3 = aten.mul.Tensor %x, %mask : (tensor<8x2x192xf32>, tensor<8x2x192xi1>) -> tensor<8x2x192xf32>
  // CHECK: aten.div.Tensor %[[B]], %[[X]] : (tensor<192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %4 = aten.div.Tensor %b, %x : (tensor<192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: %[[RELU:.*]] = aten.relu %[[X]] : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %5 = aten.relu %x : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: aten.threshold_backward %[[X]], %[[RELU]] {threshold = 0 : i64} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %6 = aten.threshold_backward %x, %5 {threshold = 0 : i64} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: aten.threshold_backward %[[X]], %[[RELU]] {threshold = 5.000000e-01 : f64} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %7 = aten.threshold_backward %x, %5 {threshold = 0.5 : f64} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: aten.neg %[[B]] : (tensor<192xf32>) -> tensor<192xf32>
  %8 = aten.neg %b : (tensor<192xf32>) -> tensor<192xf32>
  // CHECK: aten.reciprocal %[[B]] : (tensor<192xf32>) -> tensor<192xf32>
  %9 = aten.reciprocal %b : (tensor<192xf32>) -> tensor<192xf32>
  // CHECK: aten.sqrt %[[B]] : (tensor<192xf32>) -> tensor<192xf32>
  %10 = aten.sqrt %b : (tensor<192xf32>) -> tensor<192xf32>
  // CHECK: aten.clone %[[X]] : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %11 = aten.clone %x : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: aten.detach %[[M]] : (tensor<8x2x192xi1>) -> tensor<8x2x192xi1>
  %12 = aten.detach %mask : (tensor<8x2x192xi1>) -> tensor<8x2x192xi1>
  // Tensor.to(dtype): the cast of the bf16 communication hook.
  // CHECK: aten._to_copy %[[X]] {dtype = bf16} : (tensor<8x2x192xf32>) -> tensor<8x2x192xbf16>
  %cast = aten._to_copy %x {dtype = bf16} : (tensor<8x2x192xf32>) -> tensor<8x2x192xbf16>
  // CHECK: %[[GELU:.*]] = aten.gelu %[[X]] {approximate = "tanh"} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %13 = aten.gelu %x {approximate = "tanh"} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // The default approximate = "none" is elided.
  // CHECK: aten.gelu %[[X]] : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %14 = aten.gelu %x {approximate = "none"} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: aten.gelu_backward %[[GELU]], %[[X]] {approximate = "tanh"} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %15 = aten.gelu_backward %13, %x {approximate = "tanh"} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: aten.gelu_backward %[[GELU]], %[[X]] : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %16 = aten.gelu_backward %13, %x : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // Causal mask.
  // CHECK: aten.triu %[[S]] {diagonal = 1 : i64} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %17 = aten.triu %scores {diagonal = 1 : i64} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  // CHECK: aten.triu %[[S]] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %18 = aten.triu %scores : (tensor<8x8xf32>) -> tensor<8x8xf32>
  // CHECK: aten.add.Tensor %[[H]], %[[HB]] : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  %19 = aten.add.Tensor %h, %hb : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  // CHECK: aten.gelu %[[H]] : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %20 = aten.gelu %h : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  // CHECK: aten.abs %[[X]] : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %21 = aten.abs %x : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: aten.maximum %[[X]], %[[B]] : (tensor<8x2x192xf32>, tensor<192xf32>) -> tensor<8x2x192xf32>
  %22 = aten.maximum %x, %b : (tensor<8x2x192xf32>, tensor<192xf32>) -> tensor<8x2x192xf32>
  // CHECK: aten.maximum %[[HB]], %[[H]] : (tensor<8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %23 = aten.maximum %hb, %h : (tensor<8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  // CHECK: %[[SILU:.*]] = aten.silu %[[X]] : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %24 = aten.silu %x : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: aten.silu_backward %[[SILU]], %[[X]] : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %25 = aten.silu_backward %24, %x : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: aten.silu %[[H]] : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %26 = aten.silu %h : (tensor<4x8xbf16>) -> tensor<4x8xbf16>
  // CHECK: aten.silu_backward %[[HB]], %[[H]] : (tensor<8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %27 = aten.silu_backward %hb, %h : (tensor<8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  return
}

// Type promotion (at::result_type): tensors with dims decide within a
// category; 0-D tensors only lift the category.
// CHECK-LABEL: func.func @type_promotion(
// CHECK-SAME: %[[F4:[^:]*]]: tensor<4xf32>, %[[D0:[^:]*]]: tensor<f64>, %[[I4:[^:]*]]: tensor<4xi64>, %[[F0:[^:]*]]: tensor<f32>, %[[J4:[^:]*]]: tensor<4xi32>, %[[I0:[^:]*]]: tensor<i64>, %[[B4:[^:]*]]: tensor<4xi1>, %[[BF:[^:]*]]: tensor<4xbf16>, %[[HF:[^:]*]]: tensor<4xf16>)
func.func @type_promotion(%f4: tensor<4xf32>, %d0: tensor<f64>,
                          %i4: tensor<4xi64>, %f0: tensor<f32>,
                          %j4: tensor<4xi32>, %i0: tensor<i64>,
                          %b4: tensor<4xi1>, %bf: tensor<4xbf16>,
                          %hf: tensor<4xf16>) {
  // Dims win: f32[4] + f64[] -> f32.
  // CHECK: aten.add.Tensor %[[F4]], %[[D0]] : (tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
  %0 = aten.add.Tensor %f4, %d0 : (tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
  // Category lift: i64[4] + f32[] -> f32.
  // CHECK: aten.add.Tensor %[[I4]], %[[F0]] : (tensor<4xi64>, tensor<f32>) -> tensor<4xf32>
  %1 = aten.add.Tensor %i4, %f0 : (tensor<4xi64>, tensor<f32>) -> tensor<4xf32>
  // The lifted category takes the 0-D tensor's dtype: i64[4] * f64[] -> f64.
  // CHECK: aten.mul.Tensor %[[I4]], %[[D0]] : (tensor<4xi64>, tensor<f64>) -> tensor<4xf64>
  %2 = aten.mul.Tensor %i4, %d0 : (tensor<4xi64>, tensor<f64>) -> tensor<4xf64>
  // Same category: i32[4] + i64[] -> i32.
  // CHECK: aten.add.Tensor %[[J4]], %[[I0]] : (tensor<4xi32>, tensor<i64>) -> tensor<4xi32>
  %3 = aten.add.Tensor %j4, %i0 : (tensor<4xi32>, tensor<i64>) -> tensor<4xi32>
  // Bool lifts to integer: i1[4] + i64[] -> i64.
  // CHECK: aten.add.Tensor %[[B4]], %[[I0]] : (tensor<4xi1>, tensor<i64>) -> tensor<4xi64>
  %4 = aten.add.Tensor %b4, %i0 : (tensor<4xi1>, tensor<i64>) -> tensor<4xi64>
  // Both with dims: the wider wins.
  // CHECK: aten.sub.Tensor %[[J4]], %[[I4]] : (tensor<4xi32>, tensor<4xi64>) -> tensor<4xi64>
  %5 = aten.sub.Tensor %j4, %i4 : (tensor<4xi32>, tensor<4xi64>) -> tensor<4xi64>
  // Both 0-D: ordinary promotion.
  // CHECK: aten.mul.Tensor %[[F0]], %[[D0]] : (tensor<f32>, tensor<f64>) -> tensor<f64>
  %6 = aten.mul.Tensor %f0, %d0 : (tensor<f32>, tensor<f64>) -> tensor<f64>
  // CHECK: aten.add.Tensor %[[BF]], %[[F0]] : (tensor<4xbf16>, tensor<f32>) -> tensor<4xbf16>
  %7 = aten.add.Tensor %bf, %f0 : (tensor<4xbf16>, tensor<f32>) -> tensor<4xbf16>
  // CHECK: aten.add.Tensor %[[BF]], %[[HF]] : (tensor<4xbf16>, tensor<4xf16>) -> tensor<4xf32>
  %8 = aten.add.Tensor %bf, %hf : (tensor<4xbf16>, tensor<4xf16>) -> tensor<4xf32>
  // CHECK: aten.mul.Tensor %[[BF]], %[[F4]] : (tensor<4xbf16>, tensor<4xf32>) -> tensor<4xf32>
  %9 = aten.mul.Tensor %bf, %f4 : (tensor<4xbf16>, tensor<4xf32>) -> tensor<4xf32>
  // True division of integers and bools gives f32.
  // CHECK: aten.div.Tensor %[[I4]], %[[I4]] : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xf32>
  %10 = aten.div.Tensor %i4, %i4 : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xf32>
  // CHECK: aten.div.Tensor %[[B4]], %[[B4]] : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xf32>
  %11 = aten.div.Tensor %b4, %b4 : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xf32>
  // CHECK: aten.div.Tensor %[[I4]], %[[D0]] : (tensor<4xi64>, tensor<f64>) -> tensor<4xf64>
  %12 = aten.div.Tensor %i4, %d0 : (tensor<4xi64>, tensor<f64>) -> tensor<4xf64>
  // CHECK: aten.addcmul %[[F4]], %[[I4]], %[[D0]] : (tensor<4xf32>, tensor<4xi64>, tensor<f64>) -> tensor<4xf32>
  %13 = aten.addcmul %f4, %i4, %d0 : (tensor<4xf32>, tensor<4xi64>, tensor<f64>) -> tensor<4xf32>
  // CHECK: aten.threshold_backward %[[HF]], %[[F4]] {threshold = 0 : i64} : (tensor<4xf16>, tensor<4xf32>) -> tensor<4xf32>
  %14 = aten.threshold_backward %hf, %f4 {threshold = 0 : i64} : (tensor<4xf16>, tensor<4xf32>) -> tensor<4xf32>
  // Unary float ops compute integers in f32.
  // CHECK: aten.sqrt %[[I4]] : (tensor<4xi64>) -> tensor<4xf32>
  %15 = aten.sqrt %i4 : (tensor<4xi64>) -> tensor<4xf32>
  // CHECK: aten.reciprocal %[[J4]] : (tensor<4xi32>) -> tensor<4xf32>
  %16 = aten.reciprocal %j4 : (tensor<4xi32>) -> tensor<4xf32>
  // CHECK: aten.neg %[[I4]] : (tensor<4xi64>) -> tensor<4xi64>
  %17 = aten.neg %i4 : (tensor<4xi64>) -> tensor<4xi64>
  // CHECK: aten.relu %[[J4]] : (tensor<4xi32>) -> tensor<4xi32>
  %18 = aten.relu %j4 : (tensor<4xi32>) -> tensor<4xi32>
  // CHECK: aten.abs %[[J4]] : (tensor<4xi32>) -> tensor<4xi32>
  %19 = aten.abs %j4 : (tensor<4xi32>) -> tensor<4xi32>
  // maximum promotes like add: i64[4] with f32[] -> f32; bools stay bools.
  // CHECK: aten.maximum %[[I4]], %[[F0]] : (tensor<4xi64>, tensor<f32>) -> tensor<4xf32>
  %20 = aten.maximum %i4, %f0 : (tensor<4xi64>, tensor<f32>) -> tensor<4xf32>
  // CHECK: aten.maximum %[[B4]], %[[B4]] : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %21 = aten.maximum %b4, %b4 : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  // CHECK: aten.maximum %[[J4]], %[[I4]] : (tensor<4xi32>, tensor<4xi64>) -> tensor<4xi64>
  %22 = aten.maximum %j4, %i4 : (tensor<4xi32>, tensor<4xi64>) -> tensor<4xi64>
  return
}

//===----------------------------------------------------------------------===//
// Tensor-scalar ops
//===----------------------------------------------------------------------===//

// A Scalar is a wrapped number: only a float scalar lifts an integer tensor
// (to f32); an integer scalar lifts a bool tensor to i64.
// CHECK-LABEL: func.func @scalar_ops(
// CHECK-SAME: %[[P:[^:]*]]: tensor<64x64xf32>, %[[STEP:[^:]*]]: tensor<f32>, %[[I:[^:]*]]: tensor<2x8xi64>, %[[B:[^:]*]]: tensor<2x8xi1>, %[[H:[^:]*]]: tensor<64x64xbf16>)
func.func @scalar_ops(%p: tensor<64x64xf32>, %step: tensor<f32>,
                      %i: tensor<2x8xi64>, %mask: tensor<2x8xi1>,
                      %h: tensor<64x64xbf16>) {
  // CHECK: aten.add.Scalar %[[STEP]] {other = 1 : i64} : (tensor<f32>) -> tensor<f32>
  %0 = aten.add.Scalar %step {other = 1 : i64} : (tensor<f32>) -> tensor<f32>
  // CHECK: aten.add.Scalar %[[I]] {alpha = 2.000000e+00 : f64, other = 1 : i64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  %1 = aten.add.Scalar %i {other = 1 : i64, alpha = 2.0 : f64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  // CHECK: aten.add.Scalar %[[B]] {other = 1 : i64} : (tensor<2x8xi1>) -> tensor<2x8xi64>
  %2 = aten.add.Scalar %mask {other = 1 : i64} : (tensor<2x8xi1>) -> tensor<2x8xi64>
  // CHECK: aten.mul.Scalar %[[P]] {other = 9.000000e-01 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %3 = aten.mul.Scalar %p {other = 0.9 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  // CHECK: aten.mul.Scalar %[[I]] {other = 5.000000e-01 : f64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  %4 = aten.mul.Scalar %i {other = 0.5 : f64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  // CHECK: aten.mul.Scalar %[[I]] {other = 3 : i64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  %5 = aten.mul.Scalar %i {other = 3 : i64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  // A float scalar does not widen a float tensor.
  // CHECK: aten.mul.Scalar %[[H]] {other = 1.250000e-01 : f64} : (tensor<64x64xbf16>) -> tensor<64x64xbf16>
  %6 = aten.mul.Scalar %h {other = 0.125 : f64} : (tensor<64x64xbf16>) -> tensor<64x64xbf16>
  // CHECK: aten.div.Scalar %[[P]] {other = 8.000000e+00 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %7 = aten.div.Scalar %p {other = 8.0 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  // True division: i64 / 2 -> f32.
  // CHECK: aten.div.Scalar %[[I]] {other = 2 : i64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  %8 = aten.div.Scalar %i {other = 2 : i64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  // CHECK: aten.rsub.Scalar %[[STEP]] {other = 1 : i64} : (tensor<f32>) -> tensor<f32>
  %9 = aten.rsub.Scalar %step {other = 1 : i64} : (tensor<f32>) -> tensor<f32>
  // CHECK: aten.rsub.Scalar %[[I]] {alpha = 3.000000e+00 : f64, other = 1 : i64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  %10 = aten.rsub.Scalar %i {other = 1 : i64, alpha = 3.0 : f64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  // CHECK: aten.rsub.Scalar %[[I]] {other = 1.000000e+00 : f64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  %11 = aten.rsub.Scalar %i {other = 1.0 : f64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  // Adam's bias correction 1 - beta1 ** step with a tensor step.
  // CHECK: aten.pow.Scalar %[[STEP]] {self = 9.000000e-01 : f64} : (tensor<f32>) -> tensor<f32>
  %12 = aten.pow.Scalar %step {self = 0.9 : f64} : (tensor<f32>) -> tensor<f32>
  // CHECK: aten.pow.Scalar %[[I]] {self = 2 : i64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  %13 = aten.pow.Scalar %i {self = 2 : i64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  // CHECK: aten.pow.Scalar %[[I]] {self = 2.000000e+00 : f64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  %14 = aten.pow.Scalar %i {self = 2.0 : f64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  // CHECK: aten.pow.Scalar %[[B]] {self = 2 : i64} : (tensor<2x8xi1>) -> tensor<2x8xi64>
  %15 = aten.pow.Scalar %mask {self = 2 : i64} : (tensor<2x8xi1>) -> tensor<2x8xi64>
  // linalg_vector_norm's decomposition: x ** 2, then s ** 0.5.
  // CHECK: aten.pow.Tensor_Scalar %[[P]] {exponent = 2.000000e+00 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %16 = aten.pow.Tensor_Scalar %p {exponent = 2.0 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  // CHECK: aten.pow.Tensor_Scalar %[[STEP]] {exponent = 5.000000e-01 : f64} : (tensor<f32>) -> tensor<f32>
  %17 = aten.pow.Tensor_Scalar %step {exponent = 0.5 : f64} : (tensor<f32>) -> tensor<f32>
  // CHECK: aten.pow.Tensor_Scalar %[[I]] {exponent = 3 : i64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  %18 = aten.pow.Tensor_Scalar %i {exponent = 3 : i64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  // CHECK: aten.pow.Tensor_Scalar %[[I]] {exponent = 2.000000e+00 : f64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  %19 = aten.pow.Tensor_Scalar %i {exponent = 2.0 : f64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  // A negative float exponent of an integer tensor is allowed (f32).
  // CHECK: aten.pow.Tensor_Scalar %[[I]] {exponent = -1.000000e+00 : f64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  %20 = aten.pow.Tensor_Scalar %i {exponent = -1.0 : f64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  // CHECK: aten.pow.Tensor_Scalar %[[B]] {exponent = 2 : i64} : (tensor<2x8xi1>) -> tensor<2x8xi64>
  %21 = aten.pow.Tensor_Scalar %mask {exponent = 2 : i64} : (tensor<2x8xi1>) -> tensor<2x8xi64>
  // CHECK: aten.pow.Tensor_Scalar %[[H]] {exponent = -2 : i64} : (tensor<64x64xbf16>) -> tensor<64x64xbf16>
  %22 = aten.pow.Tensor_Scalar %h {exponent = -2 : i64} : (tensor<64x64xbf16>) -> tensor<64x64xbf16>
  // clamp: either bound may be absent; the bounds promote like Scalars.
  // clip_grad_norm_'s clamp(coef, max=1.0):
  // CHECK: aten.clamp %[[STEP]] {max = 1.000000e+00 : f64} : (tensor<f32>) -> tensor<f32>
  %23 = aten.clamp %step {max = 1.0 : f64} : (tensor<f32>) -> tensor<f32>
  // CHECK: aten.clamp %[[P]] {max = 5.000000e-01 : f64, min = -5.000000e-01 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %24 = aten.clamp %p {min = -0.5 : f64, max = 0.5 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  // CHECK: aten.clamp %[[I]] {min = 0 : i64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  %25 = aten.clamp %i {min = 0 : i64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  // CHECK: aten.clamp %[[I]] {max = 2.500000e+00 : f64, min = 0 : i64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  %26 = aten.clamp %i {min = 0 : i64, max = 2.5 : f64} : (tensor<2x8xi64>) -> tensor<2x8xf32>
  // CHECK: aten.clamp %[[B]] {min = 0 : i64} : (tensor<2x8xi1>) -> tensor<2x8xi64>
  %27 = aten.clamp %mask {min = 0 : i64} : (tensor<2x8xi1>) -> tensor<2x8xi64>
  // CHECK: aten.clamp %[[H]] {max = 1 : i64} : (tensor<64x64xbf16>) -> tensor<64x64xbf16>
  %28 = aten.clamp %h {max = 1 : i64} : (tensor<64x64xbf16>) -> tensor<64x64xbf16>
  return
}

// One Adam step on a [64, 64] parameter with 0-D tensor hyperparameters
// (capturable): 0-D f32 tensors broadcast against the parameter.
// CHECK-LABEL: func.func @adam_step(
// CHECK-SAME: %[[P:[^:]*]]: tensor<64x64xf32>, %[[G:[^:]*]]: tensor<64x64xf32>, %[[M:[^:]*]]: tensor<64x64xf32>, %[[V:[^:]*]]: tensor<64x64xf32>, %[[STEP:[^:]*]]: tensor<f32>, %[[LR:[^:]*]]: tensor<f32>)
func.func @adam_step(%p: tensor<64x64xf32>, %g: tensor<64x64xf32>,
                     %m: tensor<64x64xf32>, %v: tensor<64x64xf32>,
                     %step: tensor<f32>, %lr: tensor<f32>)
    -> (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) {
  // CHECK: %[[STEP1:.*]] = aten.add.Scalar %[[STEP]] {other = 1 : i64} : (tensor<f32>) -> tensor<f32>
  %step1 = aten.add.Scalar %step {other = 1 : i64} : (tensor<f32>) -> tensor<f32>
  // CHECK: %[[M1:.*]] = aten.mul.Scalar %[[M]] {other = 9.000000e-01 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %m1 = aten.mul.Scalar %m {other = 0.9 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  // CHECK: %[[M2:.*]] = aten.add.Tensor %[[M1]], %[[G]] {alpha = 1.000000e-01 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %m2 = aten.add.Tensor %m1, %g {alpha = 0.1 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  // CHECK: %[[V1:.*]] = aten.mul.Scalar %[[V]] {other = 0.99899999999999999 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %v1 = aten.mul.Scalar %v {other = 0.999 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  // CHECK: %[[V2:.*]] = aten.addcmul %[[V1]], %[[G]], %[[G]] {value = 1.000000e-03 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %v2 = aten.addcmul %v1, %g, %g {value = 0.001 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  // CHECK: %[[POW:.*]] = aten.pow.Scalar %[[STEP1]] {self = 9.000000e-01 : f64} : (tensor<f32>) -> tensor<f32>
  %pow1 = aten.pow.Scalar %step1 {self = 0.9 : f64} : (tensor<f32>) -> tensor<f32>
  // CHECK: %[[BC1:.*]] = aten.rsub.Scalar %[[POW]] {other = 1 : i64} : (tensor<f32>) -> tensor<f32>
  %bc1 = aten.rsub.Scalar %pow1 {other = 1 : i64} : (tensor<f32>) -> tensor<f32>
  // CHECK: %[[SS:.*]] = aten.div.Tensor %[[LR]], %[[BC1]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %ss = aten.div.Tensor %lr, %bc1 : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // CHECK: %[[NSS:.*]] = aten.neg %[[SS]] : (tensor<f32>) -> tensor<f32>
  %nss = aten.neg %ss : (tensor<f32>) -> tensor<f32>
  // CHECK: %[[SQ:.*]] = aten.sqrt %[[V2]] : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %sq = aten.sqrt %v2 : (tensor<64x64xf32>) -> tensor<64x64xf32>
  // CHECK: %[[DEN:.*]] = aten.add.Scalar %[[SQ]] {other = 1.000000e-08 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %den = aten.add.Scalar %sq {other = 1.0e-8 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  // CHECK: %[[UPD:.*]] = aten.div.Tensor %[[M2]], %[[DEN]] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %upd = aten.div.Tensor %m2, %den : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  // CHECK: %[[STEPV:.*]] = aten.mul.Tensor %[[UPD]], %[[NSS]] : (tensor<64x64xf32>, tensor<f32>) -> tensor<64x64xf32>
  %stepv = aten.mul.Tensor %upd, %nss : (tensor<64x64xf32>, tensor<f32>) -> tensor<64x64xf32>
  // CHECK: %[[P1:.*]] = aten.add.Tensor %[[P]], %[[STEPV]] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %p1 = aten.add.Tensor %p, %stepv : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  // The non-capturable form: param.addcdiv_(exp_avg, denom, value=-step_size).
  // CHECK: %[[P2:.*]] = aten.addcdiv %[[P1]], %[[M2]], %[[DEN]] {value = -1.000000e-03 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %p2 = aten.addcdiv %p1, %m2, %den {value = -1.0e-3 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  // CHECK: return %[[P2]], %[[M2]], %[[V2]] : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
  return %p2, %m2, %v2 : tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>
}

//===----------------------------------------------------------------------===//
// Random
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @random(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x2x192xf32>, %[[G:[^:]*]]: tensor<8x2x192xf32>, %[[H:[^:]*]]: tensor<4x8xbf16>)
func.func @random(%x: tensor<8x2x192xf32>, %g: tensor<8x2x192xf32>,
                  %h: tensor<4x8xbf16>) {
  // Dropout's keep mask: empty_like + bernoulli_(1 - p).
  // CHECK: aten.bernoulli.p %[[X]] {p = 9.000000e-01 : f64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %0 = aten.bernoulli.p %x {p = 0.9 : f64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: %[[OUT:.*]], %[[MASK:.*]] = aten.native_dropout %[[X]] {p = 1.000000e-01 : f64, train = true} : (tensor<8x2x192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x192xi1>)
  %1:2 = aten.native_dropout %x {p = 0.1 : f64, train = true} : (tensor<8x2x192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x192xi1>)
  // CHECK: aten.native_dropout_backward %[[G]], %[[MASK]] {scale = 1.1111111111111112 : f64} : (tensor<8x2x192xf32>, tensor<8x2x192xi1>) -> tensor<8x2x192xf32>
  %2 = aten.native_dropout_backward %g, %1#1 {scale = 1.1111111111111112 : f64} : (tensor<8x2x192xf32>, tensor<8x2x192xi1>) -> tensor<8x2x192xf32>
  // CHECK: aten.native_dropout %[[H]] {p = 0.000000e+00 : f64, train = false} : (tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xi1>)
  %3:2 = aten.native_dropout %h {p = 0.0 : f64, train = false} : (tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xi1>)
  return
}

//===----------------------------------------------------------------------===//
// Factories
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @factories(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x2x192xf32>, %[[L:[^:]*]]: tensor<f32>)
func.func @factories(%x: tensor<8x2x192xf32>, %loss: tensor<f32>) {
  // The seed of backward: ones_like(loss).
  // CHECK: aten.ones_like %[[L]] : (tensor<f32>) -> tensor<f32>
  %0 = aten.ones_like %loss : (tensor<f32>) -> tensor<f32>
  // CHECK: aten.ones_like %[[X]] {dtype = i64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xi64>
  %1 = aten.ones_like %x {dtype = i64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xi64>
  // CHECK: aten.ones_like %[[X]] {dtype = bf16} : (tensor<8x2x192xf32>) -> tensor<8x2x192xbf16>
  %2 = aten.ones_like %x {dtype = bf16} : (tensor<8x2x192xf32>) -> tensor<8x2x192xbf16>
  // CHECK: aten.ones_like %[[X]] {dtype = i1} : (tensor<8x2x192xf32>) -> tensor<8x2x192xi1>
  %3 = aten.ones_like %x {dtype = i1} : (tensor<8x2x192xf32>) -> tensor<8x2x192xi1>
  // Causal attention mask: full(-inf) then triu.
  // CHECK: aten.full {dtype = f32, fill_value = 0xFFF0000000000000 : f64, size = array<i64: 8, 8>} : () -> tensor<8x8xf32>
  %4 = aten.full {size = array<i64: 8, 8>, fill_value = 0xFFF0000000000000 : f64, dtype = f32} : () -> tensor<8x8xf32>
  // CHECK: aten.full {dtype = i64, fill_value = 0 : i64, size = array<i64>} : () -> tensor<i64>
  %5 = aten.full {size = array<i64>, fill_value = 0 : i64, dtype = i64} : () -> tensor<i64>
  // CHECK: aten.full {dtype = f16, fill_value = 1.000000e+00 : f64, size = array<i64: 0, 4>} : () -> tensor<0x4xf16>
  %6 = aten.full {size = array<i64: 0, 4>, fill_value = 1.0 : f64, dtype = f16} : () -> tensor<0x4xf16>
  // Position ids.
  // CHECK: aten.arange {dtype = i64, end = 8 : i64} : () -> tensor<8xi64>
  %7 = aten.arange {end = 8 : i64, dtype = i64} : () -> tensor<8xi64>
  // CHECK: aten.arange {dtype = f32, end = 2.500000e+00 : f64} : () -> tensor<3xf32>
  %8 = aten.arange {end = 2.5 : f64, dtype = f32} : () -> tensor<3xf32>
  // For i64 ATen counts in int64: the end is truncated (2.5 -> 2).
  // CHECK: aten.arange {dtype = i64, end = 2.500000e+00 : f64} : () -> tensor<2xi64>
  %9 = aten.arange {end = 2.5 : f64, dtype = i64} : () -> tensor<2xi64>
  // CHECK: aten.arange {dtype = i32, end = 2.500000e+00 : f64} : () -> tensor<3xi32>
  %10 = aten.arange {end = 2.5 : f64, dtype = i32} : () -> tensor<3xi32>
  // CHECK: aten.arange {dtype = i64, end = 0 : i64} : () -> tensor<0xi64>
  %11 = aten.arange {end = 0 : i64, dtype = i64} : () -> tensor<0xi64>
  return
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @linalg(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x16xf32>, %[[W:[^:]*]]: tensor<32x16xf32>, %[[B:[^:]*]]: tensor<32xf32>, %[[G:[^:]*]]: tensor<4x32xf32>, %[[Q:[^:]*]]: tensor<8x8x16xf32>, %[[K:[^:]*]]: tensor<8x16x8xf32>, %[[AM:[^:]*]]: tensor<1x8x8xf32>, %[[H:[^:]*]]: tensor<4x16xbf16>, %[[HW:[^:]*]]: tensor<16x32xbf16>)
func.func @linalg(%x: tensor<4x16xf32>, %w: tensor<32x16xf32>,
                  %b: tensor<32xf32>, %g: tensor<4x32xf32>,
                  %q: tensor<8x8x16xf32>, %k: tensor<8x16x8xf32>,
                  %amask: tensor<1x8x8xf32>, %h: tensor<4x16xbf16>,
                  %hw: tensor<16x32xbf16>) {
  // nn.Linear(16, 32): addmm(bias, x, w.t()).
  // CHECK: %[[WT:.*]] = aten.t %[[W]] : (tensor<32x16xf32>) -> tensor<16x32xf32>
  %wt = aten.t %w : (tensor<32x16xf32>) -> tensor<16x32xf32>
  // CHECK: aten.addmm %[[B]], %[[X]], %[[WT]] : (tensor<32xf32>, tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  %0 = aten.addmm %b, %x, %wt : (tensor<32xf32>, tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  // CHECK: aten.addmm %[[G]], %[[X]], %[[WT]] {alpha = 2.000000e+00 : f64, beta = 5.000000e-01 : f64} : (tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  %1 = aten.addmm %g, %x, %wt {beta = 0.5 : f64, alpha = 2.0 : f64} : (tensor<4x32xf32>, tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  // Backward: grad_input = g @ w, grad_weight = g.t() @ x.
  // CHECK: aten.mm %[[G]], %[[W]] : (tensor<4x32xf32>, tensor<32x16xf32>) -> tensor<4x16xf32>
  %2 = aten.mm %g, %w : (tensor<4x32xf32>, tensor<32x16xf32>) -> tensor<4x16xf32>
  // CHECK: %[[GT:.*]] = aten.t %[[G]] : (tensor<4x32xf32>) -> tensor<32x4xf32>
  %gt = aten.t %g : (tensor<4x32xf32>) -> tensor<32x4xf32>
  // CHECK: aten.mm %[[GT]], %[[X]] : (tensor<32x4xf32>, tensor<4x16xf32>) -> tensor<32x16xf32>
  %3 = aten.mm %gt, %x : (tensor<32x4xf32>, tensor<4x16xf32>) -> tensor<32x16xf32>
  // CHECK: aten.mm %[[H]], %[[HW]] : (tensor<4x16xbf16>, tensor<16x32xbf16>) -> tensor<4x32xbf16>
  %4 = aten.mm %h, %hw : (tensor<4x16xbf16>, tensor<16x32xbf16>) -> tensor<4x32xbf16>
  // Attention scores: [8, 8, 16] x [8, 16, 8].
  // CHECK: aten.bmm %[[Q]], %[[K]] : (tensor<8x8x16xf32>, tensor<8x16x8xf32>) -> tensor<8x8x8xf32>
  %5 = aten.bmm %q, %k : (tensor<8x8x16xf32>, tensor<8x16x8xf32>) -> tensor<8x8x8xf32>
  // With an additive mask [1, 8, 8] broadcast over the batch.
  // CHECK: aten.baddbmm %[[AM]], %[[Q]], %[[K]] {alpha = 2.500000e-01 : f64} : (tensor<1x8x8xf32>, tensor<8x8x16xf32>, tensor<8x16x8xf32>) -> tensor<8x8x8xf32>
  %6 = aten.baddbmm %amask, %q, %k {alpha = 0.25 : f64} : (tensor<1x8x8xf32>, tensor<8x8x16xf32>, tensor<8x16x8xf32>) -> tensor<8x8x8xf32>
  // CHECK: aten.baddbmm %[[AM]], %[[Q]], %[[K]] {alpha = 1.250000e-01 : f64, beta = 0.000000e+00 : f64} : (tensor<1x8x8xf32>, tensor<8x8x16xf32>, tensor<8x16x8xf32>) -> tensor<8x8x8xf32>
  %7 = aten.baddbmm %amask, %q, %k {beta = 0.0 : f64, alpha = 0.125 : f64} : (tensor<1x8x8xf32>, tensor<8x8x16xf32>, tensor<8x16x8xf32>) -> tensor<8x8x8xf32>
  return
}

//===----------------------------------------------------------------------===//
// Shape and layout
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @shape(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x2x192xf32>, %[[Y:[^:]*]]: tensor<16x64xf32>, %[[V:[^:]*]]: tensor<10x4xf32>, %[[W:[^:]*]]: tensor<32x16xf32>, %[[B:[^:]*]]: tensor<192xf32>, %[[S:[^:]*]]: tensor<f32>, %[[I:[^:]*]]: tensor<2x8xi64>)
func.func @shape(%x: tensor<8x2x192xf32>, %y: tensor<16x64xf32>,
                 %v: tensor<10x4xf32>, %w: tensor<32x16xf32>,
                 %b: tensor<192xf32>, %s: tensor<f32>,
                 %ids: tensor<2x8xi64>) {
  // CHECK: aten.view %[[X]] {size = array<i64: -1, 192>} : (tensor<8x2x192xf32>) -> tensor<16x192xf32>
  %0 = aten.view %x {size = array<i64: -1, 192>} : (tensor<8x2x192xf32>) -> tensor<16x192xf32>
  // Split heads: [8, 2, 192] -> [8, 2, 3, 64].
  // CHECK: aten.view %[[X]] {size = array<i64: 8, 2, 3, 64>} : (tensor<8x2x192xf32>) -> tensor<8x2x3x64xf32>
  %1 = aten.view %x {size = array<i64: 8, 2, 3, 64>} : (tensor<8x2x192xf32>) -> tensor<8x2x3x64xf32>
  // CHECK: aten.view %[[S]] {size = array<i64: 1, -1>} : (tensor<f32>) -> tensor<1x1xf32>
  %2 = aten.view %s {size = array<i64: 1, -1>} : (tensor<f32>) -> tensor<1x1xf32>
  // CHECK: aten.view %[[I]] {size = array<i64: -1>} : (tensor<2x8xi64>) -> tensor<16xi64>
  %3 = aten.view %ids {size = array<i64: -1>} : (tensor<2x8xi64>) -> tensor<16xi64>
  // CHECK: aten._unsafe_view %[[Y]] {size = array<i64: 2, 8, 64>} : (tensor<16x64xf32>) -> tensor<2x8x64xf32>
  %4 = aten._unsafe_view %y {size = array<i64: 2, 8, 64>} : (tensor<16x64xf32>) -> tensor<2x8x64xf32>
  // CHECK: aten._reshape_alias %[[X]] {size = array<i64: 16, 192>, stride = array<i64: 192, 1>} : (tensor<8x2x192xf32>) -> tensor<16x192xf32>
  %5 = aten._reshape_alias %x {size = array<i64: 16, 192>, stride = array<i64: 192, 1>} : (tensor<8x2x192xf32>) -> tensor<16x192xf32>
  // t: 2-D transposes, 1-D and 0-D are unchanged.
  // CHECK: aten.t %[[W]] : (tensor<32x16xf32>) -> tensor<16x32xf32>
  %6 = aten.t %w : (tensor<32x16xf32>) -> tensor<16x32xf32>
  // CHECK: aten.t %[[B]] : (tensor<192xf32>) -> tensor<192xf32>
  %7 = aten.t %b : (tensor<192xf32>) -> tensor<192xf32>
  // CHECK: aten.t %[[S]] : (tensor<f32>) -> tensor<f32>
  %8 = aten.t %s : (tensor<f32>) -> tensor<f32>
  // CHECK: aten.transpose.int %[[X]] {dim0 = -2 : i64, dim1 = -1 : i64} : (tensor<8x2x192xf32>) -> tensor<8x192x2xf32>
  %9 = aten.transpose.int %x {dim0 = -2 : i64, dim1 = -1 : i64} : (tensor<8x2x192xf32>) -> tensor<8x192x2xf32>
  // CHECK: aten.transpose.int %[[X]] {dim0 = 0 : i64, dim1 = 1 : i64} : (tensor<8x2x192xf32>) -> tensor<2x8x192xf32>
  %10 = aten.transpose.int %x {dim0 = 0 : i64, dim1 = 1 : i64} : (tensor<8x2x192xf32>) -> tensor<2x8x192xf32>
  // CHECK: aten.transpose.int %[[X]] {dim0 = -1 : i64, dim1 = 2 : i64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  %11 = aten.transpose.int %x {dim0 = -1 : i64, dim1 = 2 : i64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  // CHECK: aten.transpose.int %[[S]] {dim0 = 0 : i64, dim1 = -1 : i64} : (tensor<f32>) -> tensor<f32>
  %12 = aten.transpose.int %s {dim0 = 0 : i64, dim1 = -1 : i64} : (tensor<f32>) -> tensor<f32>
  // CHECK: aten.permute %[[X]] {dims = array<i64: 1, 0, 2>} : (tensor<8x2x192xf32>) -> tensor<2x8x192xf32>
  %13 = aten.permute %x {dims = array<i64: 1, 0, 2>} : (tensor<8x2x192xf32>) -> tensor<2x8x192xf32>
  // CHECK: aten.permute %[[X]] {dims = array<i64: -1, 0, -2>} : (tensor<8x2x192xf32>) -> tensor<192x8x2xf32>
  %14 = aten.permute %x {dims = array<i64: -1, 0, -2>} : (tensor<8x2x192xf32>) -> tensor<192x8x2xf32>
  // CHECK: aten.unsqueeze %[[I]] {dim = -1 : i64} : (tensor<2x8xi64>) -> tensor<2x8x1xi64>
  %15 = aten.unsqueeze %ids {dim = -1 : i64} : (tensor<2x8xi64>) -> tensor<2x8x1xi64>
  // CHECK: aten.unsqueeze %[[X]] {dim = 0 : i64} : (tensor<8x2x192xf32>) -> tensor<1x8x2x192xf32>
  %16 = aten.unsqueeze %x {dim = 0 : i64} : (tensor<8x2x192xf32>) -> tensor<1x8x2x192xf32>
  // CHECK: aten.unsqueeze %[[S]] {dim = 0 : i64} : (tensor<f32>) -> tensor<1xf32>
  %17 = aten.unsqueeze %s {dim = 0 : i64} : (tensor<f32>) -> tensor<1xf32>
  // sum backward: expand a [192] gradient with a new leading dim and -1.
  // CHECK: aten.expand %[[B]] {size = array<i64: 16, -1>} : (tensor<192xf32>) -> tensor<16x192xf32>
  %18 = aten.expand %b {size = array<i64: 16, -1>} : (tensor<192xf32>) -> tensor<16x192xf32>
  // CHECK: aten.expand %[[S]] {implicit = true, size = array<i64: 64, 64>} : (tensor<f32>) -> tensor<64x64xf32>
  %19 = aten.expand %s {size = array<i64: 64, 64>, implicit = true} : (tensor<f32>) -> tensor<64x64xf32>
  // CHECK: %[[U:.*]] = aten.unsqueeze %[[B]] {dim = 0 : i64} : (tensor<192xf32>) -> tensor<1x192xf32>
  %u = aten.unsqueeze %b {dim = 0 : i64} : (tensor<192xf32>) -> tensor<1x192xf32>
  // CHECK: aten.expand %[[U]] {size = array<i64: 8, 2, -1, 192>} : (tensor<1x192xf32>) -> tensor<8x2x1x192xf32>
  %20 = aten.expand %u {size = array<i64: 8, 2, -1, 192>} : (tensor<1x192xf32>) -> tensor<8x2x1x192xf32>
  // CHECK: aten.expand %[[U]] {size = array<i64: 0, 192>} : (tensor<1x192xf32>) -> tensor<0x192xf32>
  %21 = aten.expand %u {size = array<i64: 0, 192>} : (tensor<1x192xf32>) -> tensor<0x192xf32>
  // q, k, v out of the fused in-projection: split [8, 2, 192] by 64 on the
  // last dim.
  // CHECK: %[[QKV:.*]]:3 = aten.split.Tensor %[[X]] {dim = -1 : i64, split_size = 64 : i64} : (tensor<8x2x192xf32>) -> (tensor<8x2x64xf32>, tensor<8x2x64xf32>, tensor<8x2x64xf32>)
  %22:3 = aten.split.Tensor %x {split_size = 64 : i64, dim = -1 : i64} : (tensor<8x2x192xf32>) -> (tensor<8x2x64xf32>, tensor<8x2x64xf32>, tensor<8x2x64xf32>)
  // CHECK: aten.split_with_sizes %[[X]] {dim = -1 : i64, split_sizes = array<i64: 64, 128>} : (tensor<8x2x192xf32>) -> (tensor<8x2x64xf32>, tensor<8x2x128xf32>)
  %sws:2 = aten.split_with_sizes %x {split_sizes = array<i64: 64, 128>, dim = -1 : i64} : (tensor<8x2x192xf32>) -> (tensor<8x2x64xf32>, tensor<8x2x128xf32>)
  // An uneven last piece: 10 by 4 -> 4, 4, 2 (dim defaults to 0).
  // CHECK: aten.split.Tensor %[[V]] {split_size = 4 : i64} : (tensor<10x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>)
  %23:3 = aten.split.Tensor %v {split_size = 4 : i64} : (tensor<10x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>)
  // A split size past the length gives one piece.
  // CHECK: aten.split.Tensor %[[V]] {dim = 1 : i64, split_size = 8 : i64} : (tensor<10x4xf32>) -> tensor<10x4xf32>
  %24 = aten.split.Tensor %v {split_size = 8 : i64, dim = 1 : i64} : (tensor<10x4xf32>) -> tensor<10x4xf32>
  // CHECK: aten.cat %[[QKV]]#0, %[[QKV]]#1, %[[QKV]]#2 {dim = -1 : i64} : (tensor<8x2x64xf32>, tensor<8x2x64xf32>, tensor<8x2x64xf32>) -> tensor<8x2x192xf32>
  %25 = aten.cat %22#0, %22#1, %22#2 {dim = -1 : i64} : (tensor<8x2x64xf32>, tensor<8x2x64xf32>, tensor<8x2x64xf32>) -> tensor<8x2x192xf32>
  return
}

// cat along the default dim 0, a single tensor, and mixed dtypes.
// CHECK-LABEL: func.func @cat(
// CHECK-SAME: %[[A:[^:]*]]: tensor<4x4xf32>, %[[B:[^:]*]]: tensor<2x4xf32>, %[[I:[^:]*]]: tensor<2x4xi64>, %[[H:[^:]*]]: tensor<2x4xbf16>)
func.func @cat(%a: tensor<4x4xf32>, %b: tensor<2x4xf32>,
               %i: tensor<2x4xi64>, %h: tensor<2x4xbf16>) {
  // CHECK: aten.cat %[[A]], %[[B]] : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<6x4xf32>
  %0 = aten.cat %a, %b : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<6x4xf32>
  // CHECK: aten.cat %[[A]] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = aten.cat %a {dim = 0 : i64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  // Mixed dtypes promote: i64 with bf16 -> bf16.
  // CHECK: aten.cat %[[I]], %[[H]] {dim = -1 : i64} : (tensor<2x4xi64>, tensor<2x4xbf16>) -> tensor<2x8xbf16>
  %2 = aten.cat %i, %h {dim = -1 : i64} : (tensor<2x4xi64>, tensor<2x4xbf16>) -> tensor<2x8xbf16>
  return
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reductions(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x2x192xf32>, %[[Y:[^:]*]]: tensor<16x64xf32>, %[[I:[^:]*]]: tensor<4xi32>, %[[M:[^:]*]]: tensor<4xi1>, %[[S:[^:]*]]: tensor<f32>)
func.func @reductions(%x: tensor<8x2x192xf32>, %y: tensor<16x64xf32>,
                      %i: tensor<4xi32>, %m: tensor<4xi1>, %s: tensor<f32>) {
  // CHECK: aten.sum %[[Y]] : (tensor<16x64xf32>) -> tensor<f32>
  %0 = aten.sum %y : (tensor<16x64xf32>) -> tensor<f32>
  // CHECK: aten.sum %[[Y]] {dtype = f64} : (tensor<16x64xf32>) -> tensor<f64>
  %1 = aten.sum %y {dtype = f64} : (tensor<16x64xf32>) -> tensor<f64>
  // Integers and bools sum to i64.
  // CHECK: aten.sum %[[I]] : (tensor<4xi32>) -> tensor<i64>
  %2 = aten.sum %i : (tensor<4xi32>) -> tensor<i64>
  // CHECK: aten.sum %[[M]] : (tensor<4xi1>) -> tensor<i64>
  %3 = aten.sum %m : (tensor<4xi1>) -> tensor<i64>
  // CHECK: aten.sum %[[S]] : (tensor<f32>) -> tensor<f32>
  %4 = aten.sum %s : (tensor<f32>) -> tensor<f32>
  // Bias gradient: sum over batch and sequence.
  // CHECK: aten.sum.dim_IntList %[[X]] {dim = array<i64: 0, 1>} : (tensor<8x2x192xf32>) -> tensor<192xf32>
  %5 = aten.sum.dim_IntList %x {dim = array<i64: 0, 1>} : (tensor<8x2x192xf32>) -> tensor<192xf32>
  // CHECK: aten.sum.dim_IntList %[[X]] {dim = array<i64: 0, 1>, keepdim = true} : (tensor<8x2x192xf32>) -> tensor<1x1x192xf32>
  %6 = aten.sum.dim_IntList %x {dim = array<i64: 0, 1>, keepdim = true} : (tensor<8x2x192xf32>) -> tensor<1x1x192xf32>
  // CHECK: aten.sum.dim_IntList %[[X]] {dim = array<i64: -1>, keepdim = true} : (tensor<8x2x192xf32>) -> tensor<8x2x1xf32>
  %7 = aten.sum.dim_IntList %x {dim = array<i64: -1>, keepdim = true} : (tensor<8x2x192xf32>) -> tensor<8x2x1xf32>
  // CHECK: aten.sum.dim_IntList %[[Y]] {dim = array<i64: 0>} : (tensor<16x64xf32>) -> tensor<64xf32>
  %8 = aten.sum.dim_IntList %y {dim = array<i64: 0>, keepdim = false} : (tensor<16x64xf32>) -> tensor<64xf32>
  // An empty dim list reduces every dim.
  // CHECK: aten.sum.dim_IntList %[[Y]] {dim = array<i64>} : (tensor<16x64xf32>) -> tensor<f32>
  %9 = aten.sum.dim_IntList %y {dim = array<i64>} : (tensor<16x64xf32>) -> tensor<f32>
  // CHECK: aten.sum.dim_IntList %[[Y]] {dim = array<i64>, keepdim = true} : (tensor<16x64xf32>) -> tensor<1x1xf32>
  %10 = aten.sum.dim_IntList %y {dim = array<i64>, keepdim = true} : (tensor<16x64xf32>) -> tensor<1x1xf32>
  // CHECK: aten.sum.dim_IntList %[[Y]] {dim = array<i64: 1>, dtype = bf16} : (tensor<16x64xf32>) -> tensor<16xbf16>
  %11 = aten.sum.dim_IntList %y {dim = array<i64: 1>, dtype = bf16} : (tensor<16x64xf32>) -> tensor<16xbf16>
  // CHECK: aten.sum.dim_IntList %[[I]] {dim = array<i64: 0>} : (tensor<4xi32>) -> tensor<i64>
  %12 = aten.sum.dim_IntList %i {dim = array<i64: 0>} : (tensor<4xi32>) -> tensor<i64>
  // mean keeps the float type unless `dtype` is given.
  // CHECK: aten.mean.dim %[[X]] {dim = array<i64: -1>, keepdim = true} : (tensor<8x2x192xf32>) -> tensor<8x2x1xf32>
  %mean = aten.mean.dim %x {dim = array<i64: -1>, keepdim = true} : (tensor<8x2x192xf32>) -> tensor<8x2x1xf32>
  // CHECK: aten.mean.dim %[[Y]] {dim = array<i64>, dtype = f64} : (tensor<16x64xf32>) -> tensor<f64>
  %meanAll = aten.mean.dim %y {dim = array<i64>, dtype = f64} : (tensor<16x64xf32>) -> tensor<f64>
  // amax keeps integer types; no dim list reduces every dim.
  // CHECK: aten.amax %[[I]] : (tensor<4xi32>) -> tensor<i32>
  %amax = aten.amax %i : (tensor<4xi32>) -> tensor<i32>
  // CHECK: aten.amax %[[X]] {dim = array<i64: 1, 2>} : (tensor<8x2x192xf32>) -> tensor<8xf32>
  %amaxDims = aten.amax %x {dim = array<i64: 1, 2>} : (tensor<8x2x192xf32>) -> tensor<8xf32>
  // CHECK: aten.sum.dim_IntList %[[S]] {dim = array<i64: 0>, keepdim = true} : (tensor<f32>) -> tensor<f32>
  %13 = aten.sum.dim_IntList %s {dim = array<i64: 0>, keepdim = true} : (tensor<f32>) -> tensor<f32>
  return
}

//===----------------------------------------------------------------------===//
// Normalization and losses
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @softmax(
// CHECK-SAME: %[[A:[^:]*]]: tensor<8x8x8xf32>, %[[G:[^:]*]]: tensor<8x8x8xf32>, %[[L:[^:]*]]: tensor<16x100xf32>, %[[GL:[^:]*]]: tensor<16x100xf32>, %[[H:[^:]*]]: tensor<8x8x8xf16>)
func.func @softmax(%attn: tensor<8x8x8xf32>, %g: tensor<8x8x8xf32>,
                   %logits: tensor<16x100xf32>, %gl: tensor<16x100xf32>,
                   %h: tensor<8x8x8xf16>) {
  // CHECK: %[[P:.*]] = aten._softmax %[[A]] {dim = -1 : i64, half_to_float = false} : (tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  %p = aten._softmax %attn {dim = -1 : i64, half_to_float = false} : (tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  // CHECK: aten._softmax_backward_data %[[G]], %[[P]] {dim = -1 : i64, input_dtype = f32} : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  %0 = aten._softmax_backward_data %g, %p {dim = -1 : i64, input_dtype = f32} : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  // CHECK: %[[LP:.*]] = aten._log_softmax %[[L]] {dim = 1 : i64, half_to_float = false} : (tensor<16x100xf32>) -> tensor<16x100xf32>
  %lp = aten._log_softmax %logits {dim = 1 : i64, half_to_float = false} : (tensor<16x100xf32>) -> tensor<16x100xf32>
  // CHECK: aten._log_softmax_backward_data %[[GL]], %[[LP]] {dim = 1 : i64, input_dtype = f32} : (tensor<16x100xf32>, tensor<16x100xf32>) -> tensor<16x100xf32>
  %1 = aten._log_softmax_backward_data %gl, %lp {dim = 1 : i64, input_dtype = f32} : (tensor<16x100xf32>, tensor<16x100xf32>) -> tensor<16x100xf32>
  // AMP: softmax of an f16 input computed in f32; its gradient is f16.
  // CHECK: %[[HP:.*]] = aten._softmax %[[H]] {dim = -1 : i64, half_to_float = true} : (tensor<8x8x8xf16>) -> tensor<8x8x8xf32>
  %hp = aten._softmax %h {dim = -1 : i64, half_to_float = true} : (tensor<8x8x8xf16>) -> tensor<8x8x8xf32>
  // CHECK: aten._softmax_backward_data %[[G]], %[[HP]] {dim = -1 : i64, input_dtype = f16} : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf16>
  %2 = aten._softmax_backward_data %g, %hp {dim = -1 : i64, input_dtype = f16} : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf16>
  // CHECK: %[[HL:.*]] = aten._log_softmax %[[H]] {dim = 2 : i64, half_to_float = false} : (tensor<8x8x8xf16>) -> tensor<8x8x8xf16>
  %hl = aten._log_softmax %h {dim = 2 : i64, half_to_float = false} : (tensor<8x8x8xf16>) -> tensor<8x8x8xf16>
  // CHECK: aten._log_softmax_backward_data %[[HL]], %[[HL]] {dim = 2 : i64, input_dtype = f16} : (tensor<8x8x8xf16>, tensor<8x8x8xf16>) -> tensor<8x8x8xf16>
  %3 = aten._log_softmax_backward_data %hl, %hl {dim = 2 : i64, input_dtype = f16} : (tensor<8x8x8xf16>, tensor<8x8x8xf16>) -> tensor<8x8x8xf16>
  // ATen's meta rule: any other input_dtype keeps grad_output's dtype.
  // CHECK: aten._log_softmax_backward_data %[[GL]], %[[LP]] {dim = 1 : i64, input_dtype = f64} : (tensor<16x100xf32>, tensor<16x100xf32>) -> tensor<16x100xf32>
  %4 = aten._log_softmax_backward_data %gl, %lp {dim = 1 : i64, input_dtype = f64} : (tensor<16x100xf32>, tensor<16x100xf32>) -> tensor<16x100xf32>
  return
}

// CHECK-LABEL: func.func @layer_norm(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x2x192xf32>, %[[W:[^:]*]]: tensor<192xf32>, %[[B:[^:]*]]: tensor<192xf32>, %[[G:[^:]*]]: tensor<8x2x192xf32>, %[[W2:[^:]*]]: tensor<2x192xf32>)
func.func @layer_norm(%x: tensor<8x2x192xf32>, %w: tensor<192xf32>,
                      %b: tensor<192xf32>, %g: tensor<8x2x192xf32>,
                      %w2: tensor<2x192xf32>) {
  // CHECK: %[[OUT:.*]], %[[MEAN:.*]], %[[RSTD:.*]] = aten.native_layer_norm %[[X]] weight %[[W]] bias %[[B]] {eps = 1.000000e-05 : f64, normalized_shape = array<i64: 192>} : (tensor<8x2x192xf32>, tensor<192xf32>, tensor<192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>)
  %0:3 = aten.native_layer_norm %x weight %w bias %b {normalized_shape = array<i64: 192>, eps = 1.0e-5 : f64} : (tensor<8x2x192xf32>, tensor<192xf32>, tensor<192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>)
  // CHECK: aten.native_layer_norm_backward %[[G]], %[[X]], %[[MEAN]], %[[RSTD]] weight %[[W]] bias %[[B]] {normalized_shape = array<i64: 192>, output_mask = array<i1: true, true, true>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>, tensor<192xf32>, tensor<192xf32>) -> (tensor<8x2x192xf32>, tensor<192xf32>, tensor<192xf32>)
  %1:3 = aten.native_layer_norm_backward %g, %x, %0#1, %0#2 weight %w bias %b {normalized_shape = array<i64: 192>, output_mask = array<i1: true, true, true>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>, tensor<192xf32>, tensor<192xf32>) -> (tensor<8x2x192xf32>, tensor<192xf32>, tensor<192xf32>)
  // Without affine parameters (elementwise_affine=False), over two dims.
  // CHECK: %[[OUT2:.*]], %[[MEAN2:.*]], %[[RSTD2:.*]] = aten.native_layer_norm %[[X]] {eps = 1.000000e-05 : f64, normalized_shape = array<i64: 2, 192>} : (tensor<8x2x192xf32>) -> (tensor<8x2x192xf32>, tensor<8x1x1xf32>, tensor<8x1x1xf32>)
  %2:3 = aten.native_layer_norm %x {normalized_shape = array<i64: 2, 192>, eps = 1.0e-5 : f64} : (tensor<8x2x192xf32>) -> (tensor<8x2x192xf32>, tensor<8x1x1xf32>, tensor<8x1x1xf32>)
  // CHECK: aten.native_layer_norm_backward %[[G]], %[[X]], %[[MEAN2]], %[[RSTD2]] {normalized_shape = array<i64: 2, 192>, output_mask = array<i1: true, false, false>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x1x1xf32>, tensor<8x1x1xf32>) -> (tensor<8x2x192xf32>, tensor<2x192xf32>, tensor<2x192xf32>)
  %3:3 = aten.native_layer_norm_backward %g, %x, %2#1, %2#2 {normalized_shape = array<i64: 2, 192>, output_mask = array<i1: true, false, false>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x1x1xf32>, tensor<8x1x1xf32>) -> (tensor<8x2x192xf32>, tensor<2x192xf32>, tensor<2x192xf32>)
  // Weight without bias (bias=False): the optional operands stay apart.
  // CHECK: %[[OUT3:.*]], %[[MEAN3:.*]], %[[RSTD3:.*]] = aten.native_layer_norm %[[X]] weight %[[W2]] {eps = 1.000000e-05 : f64, normalized_shape = array<i64: 2, 192>} : (tensor<8x2x192xf32>, tensor<2x192xf32>) -> (tensor<8x2x192xf32>, tensor<8x1x1xf32>, tensor<8x1x1xf32>)
  %4:3 = aten.native_layer_norm %x weight %w2 {normalized_shape = array<i64: 2, 192>, eps = 1.0e-5 : f64} : (tensor<8x2x192xf32>, tensor<2x192xf32>) -> (tensor<8x2x192xf32>, tensor<8x1x1xf32>, tensor<8x1x1xf32>)
  // CHECK: aten.native_layer_norm_backward %[[G]], %[[X]], %[[MEAN3]], %[[RSTD3]] weight %[[W2]] {normalized_shape = array<i64: 2, 192>, output_mask = array<i1: true, true, false>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x1x1xf32>, tensor<8x1x1xf32>, tensor<2x192xf32>) -> (tensor<8x2x192xf32>, tensor<2x192xf32>, tensor<2x192xf32>)
  %5:3 = aten.native_layer_norm_backward %g, %x, %4#1, %4#2 weight %w2 {normalized_shape = array<i64: 2, 192>, output_mask = array<i1: true, true, false>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x1x1xf32>, tensor<8x1x1xf32>, tensor<2x192xf32>) -> (tensor<8x2x192xf32>, tensor<2x192xf32>, tensor<2x192xf32>)
  // Bias without weight.
  // CHECK: aten.native_layer_norm %[[X]] bias %[[B]] {eps = 1.000000e-05 : f64, normalized_shape = array<i64: 192>} : (tensor<8x2x192xf32>, tensor<192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>)
  %6:3 = aten.native_layer_norm %x bias %b {normalized_shape = array<i64: 192>, eps = 1.0e-5 : f64} : (tensor<8x2x192xf32>, tensor<192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>)
  return
}

// CHECK-LABEL: func.func @embedding(
// CHECK-SAME: %[[W:[^:]*]]: tensor<100x64xf32>, %[[I:[^:]*]]: tensor<2x8xi64>, %[[G:[^:]*]]: tensor<2x8x64xf32>, %[[J:[^:]*]]: tensor<16xi32>, %[[GJ:[^:]*]]: tensor<16x64xf32>)
func.func @embedding(%w: tensor<100x64xf32>, %ids: tensor<2x8xi64>,
                     %g: tensor<2x8x64xf32>, %ids32: tensor<16xi32>,
                     %gj: tensor<16x64xf32>) {
  // CHECK: aten.embedding %[[W]], %[[I]] : (tensor<100x64xf32>, tensor<2x8xi64>) -> tensor<2x8x64xf32>
  %0 = aten.embedding %w, %ids : (tensor<100x64xf32>, tensor<2x8xi64>) -> tensor<2x8x64xf32>
  // CHECK: aten.embedding %[[W]], %[[J]] {padding_idx = 0 : i64, scale_grad_by_freq = true} : (tensor<100x64xf32>, tensor<16xi32>) -> tensor<16x64xf32>
  %1 = aten.embedding %w, %ids32 {padding_idx = 0 : i64, scale_grad_by_freq = true, sparse = false} : (tensor<100x64xf32>, tensor<16xi32>) -> tensor<16x64xf32>
  // CHECK: aten.embedding_dense_backward %[[G]], %[[I]] {num_weights = 100 : i64, padding_idx = -1 : i64, scale_grad_by_freq = false} : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<100x64xf32>
  %2 = aten.embedding_dense_backward %g, %ids {num_weights = 100 : i64, padding_idx = -1 : i64, scale_grad_by_freq = false} : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<100x64xf32>
  // CHECK: aten.embedding_dense_backward %[[GJ]], %[[J]] {num_weights = 100 : i64, padding_idx = 0 : i64, scale_grad_by_freq = true} : (tensor<16x64xf32>, tensor<16xi32>) -> tensor<100x64xf32>
  %3 = aten.embedding_dense_backward %gj, %ids32 {num_weights = 100 : i64, padding_idx = 0 : i64, scale_grad_by_freq = true} : (tensor<16x64xf32>, tensor<16xi32>) -> tensor<100x64xf32>
  return
}

// Cross-entropy = log_softmax + nll_loss over 100 classes, batch 16.
// CHECK-LABEL: func.func @nll_loss(
// CHECK-SAME: %[[LP:[^:]*]]: tensor<16x100xf32>, %[[T:[^:]*]]: tensor<16xi64>, %[[CW:[^:]*]]: tensor<100xf32>, %[[GO:[^:]*]]: tensor<f32>, %[[GN:[^:]*]]: tensor<16xf32>, %[[LP1:[^:]*]]: tensor<100xf32>, %[[T0:[^:]*]]: tensor<i64>)
func.func @nll_loss(%lp: tensor<16x100xf32>, %target: tensor<16xi64>,
                    %cw: tensor<100xf32>, %gout: tensor<f32>,
                    %gnone: tensor<16xf32>, %lp1: tensor<100xf32>,
                    %t0: tensor<i64>) {
  // CHECK: %[[LOSS:.*]], %[[TW:.*]] = aten.nll_loss_forward %[[LP]], %[[T]] {ignore_index = -100 : i64, reduction = 1 : i64} : (tensor<16x100xf32>, tensor<16xi64>) -> (tensor<f32>, tensor<f32>)
  %0:2 = aten.nll_loss_forward %lp, %target {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<16x100xf32>, tensor<16xi64>) -> (tensor<f32>, tensor<f32>)
  // CHECK: aten.nll_loss_backward %[[GO]], %[[LP]], %[[T]], %[[TW]] {ignore_index = -100 : i64, reduction = 1 : i64} : (tensor<f32>, tensor<16x100xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x100xf32>
  %1 = aten.nll_loss_backward %gout, %lp, %target, %0#1 {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<16x100xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x100xf32>
  // Class weights, reduction none: a per-sample loss.
  // CHECK: %[[LOSS2:.*]], %[[TW2:.*]] = aten.nll_loss_forward %[[LP]], %[[T]] weight %[[CW]] {ignore_index = -100 : i64, reduction = 0 : i64} : (tensor<16x100xf32>, tensor<16xi64>, tensor<100xf32>) -> (tensor<16xf32>, tensor<f32>)
  %2:2 = aten.nll_loss_forward %lp, %target weight %cw {reduction = 0 : i64, ignore_index = -100 : i64} : (tensor<16x100xf32>, tensor<16xi64>, tensor<100xf32>) -> (tensor<16xf32>, tensor<f32>)
  // CHECK: aten.nll_loss_backward %[[GN]], %[[LP]], %[[T]] weight %[[CW]], %[[TW2]] {ignore_index = -100 : i64, reduction = 0 : i64} : (tensor<16xf32>, tensor<16x100xf32>, tensor<16xi64>, tensor<100xf32>, tensor<f32>) -> tensor<16x100xf32>
  %3 = aten.nll_loss_backward %gnone, %lp, %target weight %cw, %2#1 {reduction = 0 : i64, ignore_index = -100 : i64} : (tensor<16xf32>, tensor<16x100xf32>, tensor<16xi64>, tensor<100xf32>, tensor<f32>) -> tensor<16x100xf32>
  // CHECK: aten.nll_loss_forward %[[LP]], %[[T]] {ignore_index = 0 : i64, reduction = 2 : i64} : (tensor<16x100xf32>, tensor<16xi64>) -> (tensor<f32>, tensor<f32>)
  %4:2 = aten.nll_loss_forward %lp, %target {reduction = 2 : i64, ignore_index = 0 : i64} : (tensor<16x100xf32>, tensor<16xi64>) -> (tensor<f32>, tensor<f32>)
  // An unbatched input [C] with a 0-D target gives a 0-D loss even with
  // reduction none.
  // CHECK: %[[LOSS3:.*]], %[[TW3:.*]] = aten.nll_loss_forward %[[LP1]], %[[T0]] {ignore_index = -100 : i64, reduction = 0 : i64} : (tensor<100xf32>, tensor<i64>) -> (tensor<f32>, tensor<f32>)
  %5:2 = aten.nll_loss_forward %lp1, %t0 {reduction = 0 : i64, ignore_index = -100 : i64} : (tensor<100xf32>, tensor<i64>) -> (tensor<f32>, tensor<f32>)
  // CHECK: aten.nll_loss_backward %[[GO]], %[[LP1]], %[[T0]], %[[TW3]] {ignore_index = -100 : i64, reduction = 0 : i64} : (tensor<f32>, tensor<100xf32>, tensor<i64>, tensor<f32>) -> tensor<100xf32>
  %6 = aten.nll_loss_backward %gout, %lp1, %t0, %5#1 {reduction = 0 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<100xf32>, tensor<i64>, tensor<f32>) -> tensor<100xf32>
  return
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// nn.MultiheadAttention(192, 4 heads) on [2, 8] tokens as PyTorch 2.15's CPU
// kernel takes it, [B, H, L, E]; GPT's causal attention with L != S and a
// scale; an additive 2-D mask; logsumexp is f64 for f64 inputs.
// CHECK-LABEL: func.func @attention(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<2x4x8x48xf32>, %[[K:[^:]*]]: tensor<2x4x6x48xf32>, %[[V:[^:]*]]: tensor<2x4x6x48xf32>, %[[M:[^:]*]]: tensor<8x6xf32>, %[[G:[^:]*]]: tensor<2x4x8x48xf32>, %[[D:[^:]*]]: tensor<1x2x3x4xf64>)
func.func @attention(%q: tensor<2x4x8x48xf32>, %k: tensor<2x4x6x48xf32>,
                     %v: tensor<2x4x6x48xf32>, %m: tensor<8x6xf32>,
                     %g: tensor<2x4x8x48xf32>, %d: tensor<1x2x3x4xf64>) {
  // CHECK: %[[O0:.*]], %[[L0:.*]] = aten._scaled_dot_product_flash_attention_for_cpu %[[Q]], %[[K]], %[[V]] : (tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v : (tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  // CHECK: %[[O1:.*]], %[[L1:.*]] = aten._scaled_dot_product_flash_attention_for_cpu %[[Q]], %[[K]], %[[V]] {is_causal = true, scale = 1.250000e-01 : f64} : (tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  %1:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v {is_causal = true, scale = 0.125 : f64} : (tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  // CHECK: aten._scaled_dot_product_flash_attention_for_cpu_backward %[[G]], %[[Q]], %[[K]], %[[V]], %[[O1]], %[[L1]] {dropout_p = 0.000000e+00 : f64, is_causal = true, scale = 1.250000e-01 : f64} : (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>)
  %2:3 = aten._scaled_dot_product_flash_attention_for_cpu_backward %g, %q, %k, %v, %1#0, %1#1 {dropout_p = 0.0 : f64, is_causal = true, scale = 0.125 : f64} : (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>)
  // CHECK: %[[O3:.*]], %[[L3:.*]] = aten._scaled_dot_product_flash_attention_for_cpu %[[Q]], %[[K]], %[[V]] attn_mask %[[M]] : (tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>, tensor<8x6xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  %3:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v attn_mask %m : (tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>, tensor<8x6xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  // CHECK: aten._scaled_dot_product_flash_attention_for_cpu_backward %[[G]], %[[Q]], %[[K]], %[[V]], %[[O3]], %[[L3]] attn_mask %[[M]] {dropout_p = 0.000000e+00 : f64, is_causal = false} : (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8xf32>, tensor<8x6xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>)
  %4:3 = aten._scaled_dot_product_flash_attention_for_cpu_backward %g, %q, %k, %v, %3#0, %3#1 attn_mask %m {dropout_p = 0.0 : f64, is_causal = false} : (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8xf32>, tensor<8x6xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x48xf32>)
  // CHECK: aten._scaled_dot_product_flash_attention_for_cpu %[[D]], %[[D]], %[[D]] : (tensor<1x2x3x4xf64>, tensor<1x2x3x4xf64>, tensor<1x2x3x4xf64>) -> (tensor<1x2x3x4xf64>, tensor<1x2x3xf64>)
  %5:2 = aten._scaled_dot_product_flash_attention_for_cpu %d, %d, %d : (tensor<1x2x3x4xf64>, tensor<1x2x3x4xf64>, tensor<1x2x3x4xf64>) -> (tensor<1x2x3x4xf64>, tensor<1x2x3xf64>)
  return
}
