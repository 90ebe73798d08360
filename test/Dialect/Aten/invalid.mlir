// RUN: spmd-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// Operand and result type constraints
//===----------------------------------------------------------------------===//

func.func @dynamic_shape(%x: tensor<?x192xf32>) {
  // expected-error @+1 {{'aten.relu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit float or 64-bit signless integer or 32-bit signless integer or 1-bit signless integer values, but got 'tensor<?x192xf32>'}}
  %0 = aten.relu %x : (tensor<?x192xf32>) -> tensor<?x192xf32>
  return
}

// -----

func.func @unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{'aten.clone' op operand #0 must be statically shaped tensor of}}
  %0 = aten.clone %x : (tensor<*xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @dynamic_result(%x: tensor<8x192xf32>) {
  // expected-error @+1 {{'aten.view' op result #0 must be statically shaped tensor of}}
  %0 = aten.view %x {size = array<i64: -1, 192>} : (tensor<8x192xf32>) -> tensor<?x192xf32>
  return
}

// -----

func.func @unsupported_i8(%x: tensor<4xi8>) {
  // expected-error @+1 {{'aten.neg' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit float or 64-bit signless integer or 32-bit signless integer or 1-bit signless integer values, but got 'tensor<4xi8>'}}
  %0 = aten.neg %x : (tensor<4xi8>) -> tensor<4xi8>
  return
}

// -----

func.func @unsupported_f8(%x: tensor<4x16xf8E4M3FN>, %w: tensor<16x32xf8E4M3FN>) {
  // expected-error @+1 {{'aten.mm' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit float values, but got 'tensor<4x16xf8E4M3FN>'}}
  %0 = aten.mm %x, %w : (tensor<4x16xf8E4M3FN>, tensor<16x32xf8E4M3FN>) -> tensor<4x32xf8E4M3FN>
  return
}

// -----

func.func @unsigned(%x: tensor<4xui32>) {
  // expected-error @+1 {{'aten.sum' op operand #0 must be statically shaped tensor of}}
  %0 = aten.sum %x : (tensor<4xui32>) -> tensor<i64>
  return
}

// -----

func.func @float_op_on_integers(%x: tensor<4xi64>) {
  // expected-error @+1 {{'aten.gelu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit float values, but got 'tensor<4xi64>'}}
  %0 = aten.gelu %x : (tensor<4xi64>) -> tensor<4xi64>
  return
}

// -----

func.func @float_indices(%w: tensor<100x64xf32>, %ids: tensor<2x8xf32>) {
  // expected-error @+1 {{'aten.embedding' op operand #1 must be statically shaped tensor of 64-bit signless integer or 32-bit signless integer values, but got 'tensor<2x8xf32>'}}
  %0 = aten.embedding %w, %ids : (tensor<100x64xf32>, tensor<2x8xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @dropout_mask_not_bool(%g: tensor<8x2x192xf32>, %m: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.native_dropout_backward' op operand #1 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<8x2x192xf32>'}}
  %0 = aten.native_dropout_backward %g, %m {scale = 1.1111111111111112 : f64} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @dropout_mask_unranked(%g: tensor<8x2x192xf32>, %m: tensor<*xi1>) {
  // expected-error @+1 {{'aten.native_dropout_backward' op operand #1 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<*xi1>'}}
  %0 = aten.native_dropout_backward %g, %m {scale = 1.1111111111111112 : f64} : (tensor<8x2x192xf32>, tensor<*xi1>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @dropout_mask_dynamic(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.native_dropout' op result #1 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<?x2x192xi1>'}}
  %0:2 = aten.native_dropout %x {p = 0.1 : f64, train = true} : (tensor<8x2x192xf32>) -> (tensor<8x2x192xf32>, tensor<?x2x192xi1>)
  return
}

// -----

func.func @scalar_attr_kind(%x: tensor<4xf32>) {
  // expected-error @+1 {{'aten.mul.Scalar' op attribute 'other' failed to satisfy constraint}}
  %0 = aten.mul.Scalar %x {other = 2 : i32} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @missing_attr(%x: tensor<4xf32>) {
  // expected-error @+1 {{'aten.bernoulli.p' op requires attribute 'p'}}
  %0 = aten.bernoulli.p %x : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Declared result types
//===----------------------------------------------------------------------===//

func.func @add_wrong_shape(%x: tensor<8x2x192xf32>, %b: tensor<192xf32>) {
  // expected-error @+1 {{'aten.add.Tensor' op expected result type 'tensor<8x2x192xf32>', got 'tensor<192xf32>'}}
  %0 = aten.add.Tensor %x, %b : (tensor<8x2x192xf32>, tensor<192xf32>) -> tensor<192xf32>
  return
}

// -----

// A 0-D f64 does not widen an f32 tensor with dims.
func.func @add_zero_dim_does_not_widen(%x: tensor<4xf32>, %s: tensor<f64>) {
  // expected-error @+1 {{'aten.add.Tensor' op expected result type 'tensor<4xf32>', got 'tensor<4xf64>'}}
  %0 = aten.add.Tensor %x, %s : (tensor<4xf32>, tensor<f64>) -> tensor<4xf64>
  return
}

// -----

// A 0-D float lifts an integer tensor.
func.func @add_zero_dim_lifts_category(%x: tensor<4xi64>, %s: tensor<f32>) {
  // expected-error @+1 {{'aten.add.Tensor' op expected result type 'tensor<4xf32>', got 'tensor<4xi64>'}}
  %0 = aten.add.Tensor %x, %s : (tensor<4xi64>, tensor<f32>) -> tensor<4xi64>
  return
}

// -----

func.func @div_integers(%x: tensor<4xi64>) {
  // expected-error @+1 {{'aten.div.Tensor' op expected result type 'tensor<4xf32>', got 'tensor<4xi64>'}}
  %0 = aten.div.Tensor %x, %x : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return
}

// -----

func.func @div_scalar_integer(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{'aten.div.Scalar' op expected result type 'tensor<2x8xf32>', got 'tensor<2x8xi64>'}}
  %0 = aten.div.Scalar %x {other = 2 : i64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  return
}

// -----

func.func @mul_scalar_float_lifts(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{'aten.mul.Scalar' op expected result type 'tensor<2x8xf32>', got 'tensor<2x8xf64>'}}
  %0 = aten.mul.Scalar %x {other = 5.000000e-01 : f64} : (tensor<2x8xi64>) -> tensor<2x8xf64>
  return
}

// -----

func.func @rsub_scalar_keeps_float(%x: tensor<f32>) {
  // expected-error @+1 {{'aten.rsub.Scalar' op expected result type 'tensor<f32>', got 'tensor<i64>'}}
  %0 = aten.rsub.Scalar %x {other = 1 : i64} : (tensor<f32>) -> tensor<i64>
  return
}

// -----

func.func @pow_scalar(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{'aten.pow.Scalar' op expected result type 'tensor<2x8xf32>', got 'tensor<2x8xi64>'}}
  %0 = aten.pow.Scalar %x {self = 2.0 : f64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  return
}

// -----

func.func @pow_tensor_scalar_lifts(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{'aten.pow.Tensor_Scalar' op expected result type 'tensor<2x8xf32>', got 'tensor<2x8xi64>'}}
  %0 = aten.pow.Tensor_Scalar %x {exponent = 0.5 : f64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  return
}

// -----

func.func @pow_tensor_scalar_negative_integer(%x: tensor<4xi32>) {
  // expected-error @+1 {{'aten.pow.Tensor_Scalar' op Integers to negative integer powers are not allowed}}
  %0 = aten.pow.Tensor_Scalar %x {exponent = -1 : i64} : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @pow_tensor_scalar_negative_integer_of_bools(%x: tensor<4xi1>) {
  // expected-error @+1 {{'aten.pow.Tensor_Scalar' op Integers to negative integer powers are not allowed}}
  %0 = aten.pow.Tensor_Scalar %x {exponent = -2 : i64} : (tensor<4xi1>) -> tensor<4xi64>
  return
}

// -----

func.func @clamp_without_bounds(%x: tensor<4xf32>) {
  // expected-error @+1 {{'aten.clamp' op at least one of 'min' or 'max' must be given}}
  %0 = aten.clamp %x : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @clamp_float_bound_lifts(%x: tensor<4xi64>) {
  // expected-error @+1 {{'aten.clamp' op expected result type 'tensor<4xf32>', got 'tensor<4xi64>'}}
  %0 = aten.clamp %x {min = 0 : i64, max = 2.5 : f64} : (tensor<4xi64>) -> tensor<4xi64>
  return
}

// -----

func.func @clamp_bool_bound(%x: tensor<4xf32>) {
  // expected-error @+1 {{'aten.clamp' op attribute 'max' failed to satisfy constraint}}
  %0 = aten.clamp %x {max = true} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @abs_of_bools(%x: tensor<4xi1>) {
  // expected-error @+1 {{'aten.abs' op operand #0 must be statically shaped tensor of}}
  %0 = aten.abs %x : (tensor<4xi1>) -> tensor<4xi1>
  return
}

// -----

func.func @maximum_promotes(%x: tensor<4xi64>, %y: tensor<4xf32>) {
  // expected-error @+1 {{'aten.maximum' op expected result type 'tensor<4xf32>', got 'tensor<4xi64>'}}
  %0 = aten.maximum %x, %y : (tensor<4xi64>, tensor<4xf32>) -> tensor<4xi64>
  return
}

// -----

func.func @sqrt_integer(%x: tensor<4xi64>) {
  // expected-error @+1 {{'aten.sqrt' op expected result type 'tensor<4xf32>', got 'tensor<4xi64>'}}
  %0 = aten.sqrt %x : (tensor<4xi64>) -> tensor<4xi64>
  return
}

// -----

func.func @reciprocal_integer(%x: tensor<4xi32>) {
  // expected-error @+1 {{'aten.reciprocal' op expected result type 'tensor<4xf32>', got 'tensor<4xi32>'}}
  %0 = aten.reciprocal %x : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @add_scalar_bool(%m: tensor<2x8xi1>) {
  // expected-error @+1 {{'aten.add.Scalar' op expected result type 'tensor<2x8xi64>', got 'tensor<2x8xi1>'}}
  %0 = aten.add.Scalar %m {other = 1 : i64} : (tensor<2x8xi1>) -> tensor<2x8xi1>
  return
}

// -----

func.func @threshold_backward_promotes(%g: tensor<8x2x192xf16>, %x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.threshold_backward' op expected result type 'tensor<8x2x192xf32>', got 'tensor<8x2x192xf16>'}}
  %0 = aten.threshold_backward %g, %x {threshold = 0 : i64} : (tensor<8x2x192xf16>, tensor<8x2x192xf32>) -> tensor<8x2x192xf16>
  return
}

// -----

func.func @addcmul_broadcast_result(%v: tensor<64x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+1 {{'aten.addcmul' op expected result type 'tensor<64x64xf32>', got 'tensor<64xf32>'}}
  %0 = aten.addcmul %g, %g, %v {value = 1.0e-3 : f64} : (tensor<64xf32>, tensor<64xf32>, tensor<64x64xf32>) -> tensor<64xf32>
  return
}

// -----

func.func @detach_type(%x: tensor<f32>) {
  // expected-error @+1 {{'aten.detach' op expected result type 'tensor<f32>', got 'tensor<1xf32>'}}
  %0 = aten.detach %x : (tensor<f32>) -> tensor<1xf32>
  return
}

// -----

func.func @unary_wrong_type(%x: tensor<8x2x192xbf16>) {
  // expected-error @+1 {{'aten.relu' op expected result type 'tensor<8x2x192xbf16>', got 'tensor<8x2x192xf32>'}}
  %0 = aten.relu %x : (tensor<8x2x192xbf16>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @mm_wrong_result(%x: tensor<4x16xf32>, %w: tensor<16x32xf32>) {
  // expected-error @+1 {{'aten.mm' op expected result type 'tensor<4x32xf32>', got 'tensor<32x4xf32>'}}
  %0 = aten.mm %x, %w : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<32x4xf32>
  return
}

// -----

func.func @split_wrong_count(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.split.Tensor' op expected result types 'tensor<8x2x64xf32>', 'tensor<8x2x64xf32>', 'tensor<8x2x64xf32>', got 'tensor<8x2x64xf32>', 'tensor<8x2x128xf32>'}}
  %0:2 = aten.split.Tensor %x {split_size = 64 : i64, dim = -1 : i64} : (tensor<8x2x192xf32>) -> (tensor<8x2x64xf32>, tensor<8x2x128xf32>)
  return
}

// -----

func.func @split_uneven_last(%x: tensor<10x4xf32>) {
  // expected-error @+1 {{'aten.split.Tensor' op expected result types 'tensor<4x4xf32>', 'tensor<4x4xf32>', 'tensor<2x4xf32>', got 'tensor<4x4xf32>', 'tensor<4x4xf32>', 'tensor<4x4xf32>'}}
  %0:3 = aten.split.Tensor %x {split_size = 4 : i64} : (tensor<10x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  return
}

// -----

func.func @layer_norm_stats(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm' op expected result types 'tensor<8x2x192xf32>', 'tensor<8x2x1xf32>', 'tensor<8x2x1xf32>', got 'tensor<8x2x192xf32>', 'tensor<16xf32>', 'tensor<16xf32>'}}
  %0:3 = aten.native_layer_norm %x {normalized_shape = array<i64: 192>, eps = 1.0e-5 : f64} : (tensor<8x2x192xf32>) -> (tensor<8x2x192xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @dropout_mask_type(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.native_dropout' op expected result types 'tensor<8x2x192xf32>', 'tensor<8x2x192xi1>', got 'tensor<8x2x192xf32>', 'tensor<8x2x1xi1>'}}
  %0:2 = aten.native_dropout %x {p = 0.1 : f64, train = true} : (tensor<8x2x192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x1xi1>)
  return
}

// -----

func.func @sum_integer(%x: tensor<4xi32>) {
  // expected-error @+1 {{'aten.sum' op expected result type 'tensor<i64>', got 'tensor<i32>'}}
  %0 = aten.sum %x : (tensor<4xi32>) -> tensor<i32>
  return
}

// -----

func.func @mean_of_integers(%x: tensor<4xi64>) {
  // expected-error @+1 {{'aten.mean.dim' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit float values, but got 'tensor<4xi64>'}}
  %0 = aten.mean.dim %x {dim = array<i64: 0>} : (tensor<4xi64>) -> tensor<i64>
  return
}

// -----

func.func @amax_of_bools(%x: tensor<4xi1>) {
  // expected-error @+1 {{'aten.amax' op operand #0 must be statically shaped tensor of}}
  %0 = aten.amax %x : (tensor<4xi1>) -> tensor<i1>
  return
}

// -----

func.func @amax_dim_twice(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'aten.amax' op dim -1 appears multiple times}}
  %0 = aten.amax %x {dim = array<i64: 1, -1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @sum_dim_keepdim(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.sum.dim_IntList' op expected result type 'tensor<192xf32>', got 'tensor<1x1x192xf32>'}}
  %0 = aten.sum.dim_IntList %x {dim = array<i64: 0, 1>} : (tensor<8x2x192xf32>) -> tensor<1x1x192xf32>
  return
}

// -----

func.func @arange_i64_truncates() {
  // expected-error @+1 {{'aten.arange' op expected result type 'tensor<2xi64>', got 'tensor<3xi64>'}}
  %0 = aten.arange {end = 2.5 : f64, dtype = i64} : () -> tensor<3xi64>
  return
}

// -----

func.func @ones_like_dtype(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.ones_like' op expected result type 'tensor<8x2x192xi64>', got 'tensor<8x2x192xf32>'}}
  %0 = aten.ones_like %x {dtype = i64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @softmax_backward_dtype(%g: tensor<16x100xf32>, %y: tensor<16x100xf32>) {
  // expected-error @+1 {{'aten._softmax_backward_data' op expected result type 'tensor<16x100xf32>', got 'tensor<16x100xf64>'}}
  %0 = aten._softmax_backward_data %g, %y {dim = 1 : i64, input_dtype = f64} : (tensor<16x100xf32>, tensor<16x100xf32>) -> tensor<16x100xf64>
  return
}

// -----

func.func @nll_loss_none(%x: tensor<16x100xf32>, %t: tensor<16xi64>) {
  // expected-error @+1 {{'aten.nll_loss_forward' op expected result types 'tensor<16xf32>', 'tensor<f32>', got 'tensor<f32>', 'tensor<f32>'}}
  %0:2 = aten.nll_loss_forward %x, %t {reduction = 0 : i64, ignore_index = -100 : i64} : (tensor<16x100xf32>, tensor<16xi64>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @embedding_backward_result(%g: tensor<2x8x64xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @+1 {{'aten.embedding_dense_backward' op expected result type 'tensor<100x64xf32>', got 'tensor<64x100xf32>'}}
  %0 = aten.embedding_dense_backward %g, %ids {num_weights = 100 : i64, padding_idx = -1 : i64, scale_grad_by_freq = false} : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<64x100xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Optional operands
//===----------------------------------------------------------------------===//

func.func @layer_norm_segments(%x: tensor<8x2x192xf32>, %w: tensor<192xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm' op operand group starting at #1 requires 0 or 1 element, but found 2}}
  %0:3 = "aten.native_layer_norm"(%x, %w, %w) <{eps = 1.0e-5 : f64, normalized_shape = array<i64: 192>, operandSegmentSizes = array<i32: 1, 2, 0>}> : (tensor<8x2x192xf32>, tensor<192xf32>, tensor<192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>)
  return
}

// -----

func.func @layer_norm_segment_count(%x: tensor<8x2x192xf32>, %w: tensor<192xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm' op operand count (2) does not match with the total size (3) specified in attribute 'operandSegmentSizes'}}
  %0:3 = "aten.native_layer_norm"(%x, %w) <{eps = 1.0e-5 : f64, normalized_shape = array<i64: 192>, operandSegmentSizes = array<i32: 1, 1, 1>}> : (tensor<8x2x192xf32>, tensor<192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>)
  return
}

// -----

func.func @nll_loss_two_weights(%x: tensor<16x100xf32>, %t: tensor<16xi64>, %w: tensor<100xf32>) {
  // expected-error @+1 {{'aten.nll_loss_forward' op operand group starting at #2 requires 0 or 1 element, but found 2}}
  %0:2 = "aten.nll_loss_forward"(%x, %t, %w, %w) <{reduction = 1 : i64, ignore_index = -100 : i64}> : (tensor<16x100xf32>, tensor<16xi64>, tensor<100xf32>, tensor<100xf32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @nll_loss_backward_two_weights(%g: tensor<f32>, %x: tensor<16x100xf32>, %t: tensor<16xi64>, %w: tensor<100xf32>) {
  // expected-error @+1 {{'aten.nll_loss_backward' op operand group starting at #3 requires 0 or 1 element, but found 2}}
  %0 = "aten.nll_loss_backward"(%g, %x, %t, %w, %w, %g) <{reduction = 1 : i64, ignore_index = -100 : i64}> : (tensor<f32>, tensor<16x100xf32>, tensor<16xi64>, tensor<100xf32>, tensor<100xf32>, tensor<f32>) -> tensor<16x100xf32>
  return
}

// -----

func.func @layer_norm_bias_before_weight(%x: tensor<8x2x192xf32>, %w: tensor<192xf32>) {
  // expected-error @+1 {{expected ':'}}
  %0:3 = aten.native_layer_norm %x bias %w weight %w {normalized_shape = array<i64: 192>, eps = 1.0e-5 : f64} : (tensor<8x2x192xf32>, tensor<192xf32>, tensor<192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>)
  return
}

// -----

func.func @layer_norm_weight_type_missing(%x: tensor<8x2x192xf32>, %w: tensor<192xf32>) {
  // expected-error @+1 {{custom op 'aten.native_layer_norm' number of operands and types do not match: got 2 operands and 1 types}}
  %0:3 = aten.native_layer_norm %x weight %w {normalized_shape = array<i64: 192>, eps = 1.0e-5 : f64} : (tensor<8x2x192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// Shared rules: dims, broadcasting, reshapes
//===----------------------------------------------------------------------===//

func.func @broadcast(%x: tensor<8x2x192xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'aten.add.Tensor' op shapes [8, 2, 192] and [64] do not broadcast (dim 2: 192 vs 64)}}
  %0 = aten.add.Tensor %x, %b : (tensor<8x2x192xf32>, tensor<64xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @broadcast_ternary(%p: tensor<64x64xf32>, %g: tensor<64x32xf32>) {
  // expected-error @+1 {{'aten.addcdiv' op shapes [64, 64] and [64, 32] do not broadcast (dim 1: 64 vs 32)}}
  %0 = aten.addcdiv %p, %p, %g {value = -1.0e-3 : f64} : (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x32xf32>) -> tensor<64x64xf32>
  return
}

// -----

func.func @silu_on_integers(%x: tensor<4xi32>) {
  // expected-error @+1 {{'aten.silu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 64-bit float values, but got 'tensor<4xi32>'}}
  %0 = aten.silu %x : (tensor<4xi32>) -> tensor<4xi32>
  return
}

// -----

func.func @silu_backward_broadcast(%g: tensor<8x2x192xf32>, %x: tensor<8x3x192xf32>) {
  // expected-error @+1 {{'aten.silu_backward' op shapes [8, 2, 192] and [8, 3, 192] do not broadcast (dim 1: 2 vs 3)}}
  %0 = aten.silu_backward %g, %x : (tensor<8x2x192xf32>, tensor<8x3x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @gelu_backward_broadcast(%g: tensor<8x2x192xf32>, %x: tensor<8x3x192xf32>) {
  // expected-error @+1 {{'aten.gelu_backward' op shapes [8, 2, 192] and [8, 3, 192] do not broadcast (dim 1: 2 vs 3)}}
  %0 = aten.gelu_backward %g, %x : (tensor<8x2x192xf32>, tensor<8x3x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @view_two_inferred(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.view' op only one dimension can be inferred (-1)}}
  %0 = aten.view %x {size = array<i64: -1, -1>} : (tensor<8x2x192xf32>) -> tensor<16x192xf32>
  return
}

// -----

func.func @view_invalid_size(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten._unsafe_view' op invalid size -2 in dim 1}}
  %0 = aten._unsafe_view %x {size = array<i64: 16, -2>} : (tensor<8x2x192xf32>) -> tensor<16x192xf32>
  return
}

// -----

func.func @view_numel(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.view' op shape '[16, 190]' is invalid for input of 3072 elements}}
  %0 = aten.view %x {size = array<i64: 16, 190>} : (tensor<8x2x192xf32>) -> tensor<16x190xf32>
  return
}

// -----

func.func @view_inferred_numel(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten._reshape_alias' op shape '[-1, 100]' is invalid for input of 3072 elements}}
  %0 = aten._reshape_alias %x {size = array<i64: -1, 100>, stride = array<i64: 100, 1>} : (tensor<8x2x192xf32>) -> tensor<30x100xf32>
  return
}

// -----

// 0 elements: the -1 would be ambiguous.
func.func @view_inferred_zero(%x: tensor<0x4xf32>) {
  // expected-error @+1 {{'aten.view' op shape '[0, -1]' is invalid for input of 0 elements}}
  %0 = aten.view %x {size = array<i64: 0, -1>} : (tensor<0x4xf32>) -> tensor<0x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise with custom rules
//===----------------------------------------------------------------------===//

func.func @gelu_approximate(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.gelu' op approximate must be 'none' or 'tanh', got 'erf'}}
  %0 = aten.gelu %x {approximate = "erf"} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @gelu_backward_approximate(%g: tensor<8x2x192xf32>, %x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.gelu_backward' op approximate must be 'none' or 'tanh', got 'Tanh'}}
  %0 = aten.gelu_backward %g, %x {approximate = "Tanh"} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @triu_1d(%x: tensor<8xf32>) {
  // expected-error @+1 {{'aten.triu' op triu needs at least 2 dims, got 'tensor<8xf32>'}}
  %0 = aten.triu %x {diagonal = 1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Random
//===----------------------------------------------------------------------===//

func.func @bernoulli_p(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.bernoulli.p' op probability p must be in [0, 1], got 1.5}}
  %0 = aten.bernoulli.p %x {p = 1.5 : f64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @bernoulli_nan(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.bernoulli.p' op probability p must be in [0, 1], got nan}}
  %0 = aten.bernoulli.p %x {p = 0x7FF8000000000000 : f64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @dropout_p(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.native_dropout' op probability p must be in [0, 1], got -1.000000e-01}}
  %0:2 = aten.native_dropout %x {p = -0.1 : f64, train = true} : (tensor<8x2x192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x192xi1>)
  return
}

// -----

func.func @dropout_backward_mask(%g: tensor<8x2x192xf32>, %m: tensor<8x192xi1>) {
  // expected-error @+1 {{'aten.native_dropout_backward' op mask 'tensor<8x192xi1>' does not match grad_output 'tensor<8x2x192xf32>'}}
  %0 = aten.native_dropout_backward %g, %m {scale = 1.1111111111111112 : f64} : (tensor<8x2x192xf32>, tensor<8x192xi1>) -> tensor<8x2x192xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Factories
//===----------------------------------------------------------------------===//

func.func @ones_like_unsupported_dtype(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.ones_like' op unsupported dtype 'i8'}}
  %0 = aten.ones_like %x {dtype = i8} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @to_copy_wrong_result(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{'aten._to_copy' op expected result type 'tensor<8x4xbf16>', got 'tensor<8x4xf32>'}}
  %0 = aten._to_copy %x {dtype = bf16} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @to_copy_unsupported_dtype(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{'aten._to_copy' op unsupported dtype 'f8E5M2'}}
  %0 = aten._to_copy %x {dtype = f8E5M2} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @full_negative_size() {
  // expected-error @+1 {{'aten.full' op size must be non-negative, got -1}}
  %0 = aten.full {size = array<i64: 8, -1>, fill_value = 0.0 : f64, dtype = f32} : () -> tensor<8x1xf32>
  return
}

// -----

func.func @full_unsupported_dtype() {
  // expected-error @+1 {{'aten.full' op unsupported dtype 'f8E5M2'}}
  %0 = aten.full {size = array<i64: 8, 8>, fill_value = 0.0 : f64, dtype = f8E5M2} : () -> tensor<8x8xf32>
  return
}

// -----

func.func @full_non_number_dtype() {
  // expected-error @+1 {{'aten.full' op unsupported dtype 'tensor<8xf32>'}}
  %0 = aten.full {size = array<i64: 8>, fill_value = 0.0 : f64, dtype = tensor<8xf32>} : () -> tensor<8xf32>
  return
}

// -----

func.func @arange_negative_end() {
  // expected-error @+1 {{'aten.arange' op end must be non-negative, got -4}}
  %0 = aten.arange {end = -4 : i64, dtype = i64} : () -> tensor<0xi64>
  return
}

// -----

func.func @arange_unsupported_dtype() {
  // expected-error @+1 {{'aten.arange' op unsupported dtype 'ui8'}}
  %0 = aten.arange {end = 8 : i64, dtype = ui8} : () -> tensor<8xi64>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

func.func @mm_rank(%x: tensor<8x4x16xf32>, %w: tensor<16x32xf32>) {
  // expected-error @+1 {{'aten.mm' op self must be 2-D, got 'tensor<8x4x16xf32>'}}
  %0 = aten.mm %x, %w : (tensor<8x4x16xf32>, tensor<16x32xf32>) -> tensor<8x4x32xf32>
  return
}

// -----

func.func @mm_mat2_rank(%x: tensor<4x16xf32>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'aten.mm' op mat2 must be 2-D, got 'tensor<16xf32>'}}
  %0 = aten.mm %x, %w : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @mm_contracting(%x: tensor<4x16xf32>, %w: tensor<32x16xf32>) {
  // expected-error @+1 {{'aten.mm' op contracting dims differ: 'tensor<4x16xf32>' x 'tensor<32x16xf32>'}}
  %0 = aten.mm %x, %w : (tensor<4x16xf32>, tensor<32x16xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @mm_dtypes(%x: tensor<4x16xbf16>, %w: tensor<16x32xf32>) {
  // expected-error @+1 {{'aten.mm' op operand element types differ: 'bf16' vs 'f32'}}
  %0 = aten.mm %x, %w : (tensor<4x16xbf16>, tensor<16x32xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @bmm_rank(%q: tensor<8x16xf32>, %k: tensor<8x16x8xf32>) {
  // expected-error @+1 {{'aten.bmm' op self must be 3-D, got 'tensor<8x16xf32>'}}
  %0 = aten.bmm %q, %k : (tensor<8x16xf32>, tensor<8x16x8xf32>) -> tensor<8x8x8xf32>
  return
}

// -----

func.func @bmm_batch(%q: tensor<8x8x16xf32>, %k: tensor<4x16x8xf32>) {
  // expected-error @+1 {{'aten.bmm' op batch sizes differ: 8 vs 4}}
  %0 = aten.bmm %q, %k : (tensor<8x8x16xf32>, tensor<4x16x8xf32>) -> tensor<8x8x8xf32>
  return
}

// -----

func.func @bmm_contracting(%q: tensor<8x8x16xf32>, %k: tensor<8x8x16xf32>) {
  // expected-error @+1 {{'aten.bmm' op contracting dims differ: 'tensor<8x8x16xf32>' x 'tensor<8x8x16xf32>'}}
  %0 = aten.bmm %q, %k : (tensor<8x8x16xf32>, tensor<8x8x16xf32>) -> tensor<8x8x16xf32>
  return
}

// -----

func.func @addmm_contracting(%b: tensor<32xf32>, %x: tensor<4x16xf32>, %w: tensor<32x16xf32>) {
  // expected-error @+1 {{'aten.addmm' op contracting dims differ: 'tensor<4x16xf32>' x 'tensor<32x16xf32>'}}
  %0 = aten.addmm %b, %x, %w : (tensor<32xf32>, tensor<4x16xf32>, tensor<32x16xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @addmm_bias_dtype(%b: tensor<32xf64>, %x: tensor<4x16xf32>, %w: tensor<16x32xf32>) {
  // expected-error @+1 {{'aten.addmm' op self and product element types differ: 'f64' vs 'f32'}}
  %0 = aten.addmm %b, %x, %w : (tensor<32xf64>, tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @addmm_bias_broadcast(%b: tensor<16xf32>, %x: tensor<4x16xf32>, %w: tensor<16x32xf32>) {
  // expected-error @+1 {{'aten.addmm' op shapes [16] and [4, 32] do not broadcast (dim 1: 16 vs 32)}}
  %0 = aten.addmm %b, %x, %w : (tensor<16xf32>, tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  return
}

// -----

// self broadcasts with the product but would grow it.
func.func @addmm_bias_grows(%b: tensor<1x4x32xf32>, %x: tensor<4x16xf32>, %w: tensor<16x32xf32>) {
  // expected-error @+1 {{'aten.addmm' op self 'tensor<1x4x32xf32>' does not broadcast to [4, 32]}}
  %0 = aten.addmm %b, %x, %w : (tensor<1x4x32xf32>, tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  return
}

// -----

// self may not expand a size-1 dim of the product.
func.func @baddbmm_self(%m: tensor<8x8x4xf32>, %q: tensor<8x8x16xf32>, %k: tensor<8x16x1xf32>) {
  // expected-error @+1 {{'aten.baddbmm' op self 'tensor<8x8x4xf32>' does not broadcast to [8, 8, 1]}}
  %0 = aten.baddbmm %m, %q, %k : (tensor<8x8x4xf32>, tensor<8x8x16xf32>, tensor<8x16x1xf32>) -> tensor<8x8x1xf32>
  return
}

// -----

func.func @baddbmm_batch(%m: tensor<1x8x8xf32>, %q: tensor<8x8x16xf32>, %k: tensor<2x16x8xf32>) {
  // expected-error @+1 {{'aten.baddbmm' op batch sizes differ: 8 vs 2}}
  %0 = aten.baddbmm %m, %q, %k : (tensor<1x8x8xf32>, tensor<8x8x16xf32>, tensor<2x16x8xf32>) -> tensor<8x8x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Shape and layout
//===----------------------------------------------------------------------===//

func.func @t_3d(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.t' op t expects a tensor with <= 2 dims, got 'tensor<8x2x192xf32>'}}
  %0 = aten.t %x : (tensor<8x2x192xf32>) -> tensor<192x2x8xf32>
  return
}

// -----

func.func @transpose_dim0(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.transpose.int' op dim0 -4 is out of range for a tensor of rank 3}}
  %0 = aten.transpose.int %x {dim0 = -4 : i64, dim1 = -1 : i64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @transpose_dim1(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.transpose.int' op dim1 3 is out of range for a tensor of rank 3}}
  %0 = aten.transpose.int %x {dim0 = 0 : i64, dim1 = 3 : i64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @transpose_0d(%x: tensor<f32>) {
  // expected-error @+1 {{'aten.transpose.int' op dim1 1 is out of range for a tensor of rank 0}}
  %0 = aten.transpose.int %x {dim0 = 0 : i64, dim1 = 1 : i64} : (tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @permute_count(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.permute' op permute needs 3 dims, got 2}}
  %0 = aten.permute %x {dims = array<i64: 1, 0>} : (tensor<8x2x192xf32>) -> tensor<2x8x192xf32>
  return
}

// -----

func.func @permute_range(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.permute' op dim 3 is out of range for a tensor of rank 3}}
  %0 = aten.permute %x {dims = array<i64: 1, 0, 3>} : (tensor<8x2x192xf32>) -> tensor<2x8x192xf32>
  return
}

// -----

func.func @permute_repeat(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.permute' op dim -1 repeats in permute}}
  %0 = aten.permute %x {dims = array<i64: 2, 0, -1>} : (tensor<8x2x192xf32>) -> tensor<192x8x192xf32>
  return
}

// -----

// unsqueeze of a rank-2 tensor accepts dims in [-3, 2].
func.func @unsqueeze_range(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{'aten.unsqueeze' op dim 3 is out of range for a tensor of rank 3}}
  %0 = aten.unsqueeze %x {dim = 3 : i64} : (tensor<2x8xi64>) -> tensor<2x8x1xi64>
  return
}

// -----

func.func @unsqueeze_wrong_result(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{'aten.unsqueeze' op expected result type 'tensor<2x1x8xi64>', got 'tensor<2x8x1xi64>'}}
  %0 = aten.unsqueeze %x {dim = -2 : i64} : (tensor<2x8xi64>) -> tensor<2x8x1xi64>
  return
}

// -----

func.func @expand_fewer_dims(%x: tensor<2x192xf32>) {
  // expected-error @+1 {{'aten.expand' op expand to 1 dims is fewer than the input's 2}}
  %0 = aten.expand %x {size = array<i64: 192>} : (tensor<2x192xf32>) -> tensor<192xf32>
  return
}

// -----

func.func @expand_new_dim_inferred(%b: tensor<192xf32>) {
  // expected-error @+1 {{'aten.expand' op -1 is not allowed in a new leading dim 0}}
  %0 = aten.expand %b {size = array<i64: -1, 192>} : (tensor<192xf32>) -> tensor<1x192xf32>
  return
}

// -----

func.func @expand_invalid_size(%b: tensor<192xf32>) {
  // expected-error @+1 {{'aten.expand' op invalid size -2 in dim 0}}
  %0 = aten.expand %b {size = array<i64: -2, 192>} : (tensor<192xf32>) -> tensor<2x192xf32>
  return
}

// -----

func.func @expand_non_singleton(%x: tensor<8x2xf32>) {
  // expected-error @+1 {{'aten.expand' op cannot expand dim 2 of size 2 to 4}}
  %0 = aten.expand %x {size = array<i64: 3, 8, 4>} : (tensor<8x2xf32>) -> tensor<3x8x4xf32>
  return
}

// -----

func.func @cat_empty() {
  // expected-error @+1 {{'aten.cat' op cat needs at least one tensor}}
  %0 = aten.cat : () -> tensor<0xf32>
  return
}

// -----

func.func @cat_dim(%a: tensor<8x2x64xf32>) {
  // expected-error @+1 {{'aten.cat' op dim 3 is out of range for a tensor of rank 3}}
  %0 = aten.cat %a, %a {dim = 3 : i64} : (tensor<8x2x64xf32>, tensor<8x2x64xf32>) -> tensor<8x2x128xf32>
  return
}

// -----

func.func @cat_0d(%a: tensor<f32>) {
  // expected-error @+1 {{'aten.cat' op zero-dimensional tensors cannot be concatenated}}
  %0 = aten.cat %a, %a : (tensor<f32>, tensor<f32>) -> tensor<2xf32>
  return
}

// -----

func.func @cat_rank(%a: tensor<8x2x64xf32>, %b: tensor<16x64xf32>) {
  // expected-error @+1 {{'aten.cat' op tensor #1 'tensor<16x64xf32>' has a different rank than tensor #0 'tensor<8x2x64xf32>'}}
  %0 = aten.cat %a, %b {dim = -1 : i64} : (tensor<8x2x64xf32>, tensor<16x64xf32>) -> tensor<8x2x128xf32>
  return
}

// -----

func.func @cat_other_dims(%a: tensor<8x2x64xf32>, %b: tensor<8x3x64xf32>) {
  // expected-error @+1 {{'aten.cat' op tensor #1 'tensor<8x3x64xf32>' differs from tensor #0 'tensor<8x2x64xf32>' outside dim 2}}
  %0 = aten.cat %a, %b {dim = -1 : i64} : (tensor<8x2x64xf32>, tensor<8x3x64xf32>) -> tensor<8x2x128xf32>
  return
}

// -----

func.func @cat_wrong_result(%a: tensor<4x4xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{'aten.cat' op expected result type 'tensor<6x4xf32>', got 'tensor<4x6xf32>'}}
  %0 = aten.cat %a, %b : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<4x6xf32>
  return
}

// -----

func.func @split_dim(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.split.Tensor' op dim -4 is out of range for a tensor of rank 3}}
  %0:3 = aten.split.Tensor %x {split_size = 64 : i64, dim = -4 : i64} : (tensor<8x2x192xf32>) -> (tensor<8x2x64xf32>, tensor<8x2x64xf32>, tensor<8x2x64xf32>)
  return
}

// -----

func.func @split_0d(%x: tensor<f32>) {
  // expected-error @+1 {{'aten.split.Tensor' op split expects at least a 1-dimensional tensor}}
  %0 = aten.split.Tensor %x {split_size = 1 : i64} : (tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @split_negative(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.split.Tensor' op split_size must be positive, got -64}}
  %0 = aten.split.Tensor %x {split_size = -64 : i64, dim = -1 : i64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

func.func @split_zero(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.split.Tensor' op split_size must be positive, got 0}}
  %0 = aten.split.Tensor %x {split_size = 0 : i64} : (tensor<8x2x192xf32>) -> tensor<8x2x192xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

func.func @sum_unsupported_dtype(%x: tensor<16x64xf32>) {
  // expected-error @+1 {{'aten.sum' op unsupported dtype 'i16'}}
  %0 = aten.sum %x {dtype = i16} : (tensor<16x64xf32>) -> tensor<f32>
  return
}

// -----

func.func @sum_dim_unsupported_dtype(%x: tensor<16x64xf32>) {
  // expected-error @+1 {{'aten.sum.dim_IntList' op unsupported dtype 'f128'}}
  %0 = aten.sum.dim_IntList %x {dim = array<i64: 0>, dtype = f128} : (tensor<16x64xf32>) -> tensor<64xf32>
  return
}

// -----

func.func @sum_dim_range(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.sum.dim_IntList' op dim 3 is out of range for a tensor of rank 3}}
  %0 = aten.sum.dim_IntList %x {dim = array<i64: 0, 3>} : (tensor<8x2x192xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @sum_dim_repeat(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.sum.dim_IntList' op dim -1 appears multiple times}}
  %0 = aten.sum.dim_IntList %x {dim = array<i64: 2, -1>} : (tensor<8x2x192xf32>) -> tensor<8x2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

func.func @softmax_dim(%x: tensor<8x8x8xf32>) {
  // expected-error @+1 {{'aten._softmax' op dim 3 is out of range for a tensor of rank 3}}
  %0 = aten._softmax %x {dim = 3 : i64, half_to_float = false} : (tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  return
}

// -----

func.func @log_softmax_half_to_float(%x: tensor<16x100xf32>) {
  // expected-error @+1 {{'aten._log_softmax' op half_to_float needs an f16 input, got 'f32'}}
  %0 = aten._log_softmax %x {dim = 1 : i64, half_to_float = true} : (tensor<16x100xf32>) -> tensor<16x100xf32>
  return
}

// -----

func.func @softmax_half_to_float_result(%x: tensor<8x8x8xf16>) {
  // expected-error @+1 {{'aten._softmax' op expected result type 'tensor<8x8x8xf32>', got 'tensor<8x8x8xf16>'}}
  %0 = aten._softmax %x {dim = -1 : i64, half_to_float = true} : (tensor<8x8x8xf16>) -> tensor<8x8x8xf16>
  return
}

// -----

func.func @softmax_backward_shapes(%g: tensor<8x8x8xf32>, %y: tensor<8x8x1xf32>) {
  // expected-error @+1 {{'aten._softmax_backward_data' op grad_output 'tensor<8x8x8xf32>' and output 'tensor<8x8x1xf32>' differ in shape}}
  %0 = aten._softmax_backward_data %g, %y {dim = -1 : i64, input_dtype = f32} : (tensor<8x8x8xf32>, tensor<8x8x1xf32>) -> tensor<8x8x8xf32>
  return
}

// -----

func.func @log_softmax_backward_dim(%g: tensor<16x100xf32>, %y: tensor<16x100xf32>) {
  // expected-error @+1 {{'aten._log_softmax_backward_data' op dim -3 is out of range for a tensor of rank 2}}
  %0 = aten._log_softmax_backward_data %g, %y {dim = -3 : i64, input_dtype = f32} : (tensor<16x100xf32>, tensor<16x100xf32>) -> tensor<16x100xf32>
  return
}

// -----

func.func @softmax_backward_input_dtype(%g: tensor<16x100xf32>, %y: tensor<16x100xf32>) {
  // expected-error @+1 {{'aten._log_softmax_backward_data' op input_dtype must be a float type, got 'i64'}}
  %0 = aten._log_softmax_backward_data %g, %y {dim = 1 : i64, input_dtype = i64} : (tensor<16x100xf32>, tensor<16x100xf32>) -> tensor<16x100xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Layer norm
//===----------------------------------------------------------------------===//

func.func @layer_norm_empty_shape(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm' op normalized_shape [] does not match the trailing dims of input 'tensor<8x2x192xf32>'}}
  %0:3 = aten.native_layer_norm %x {normalized_shape = array<i64>, eps = 1.0e-5 : f64} : (tensor<8x2x192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x2x192xf32>)
  return
}

// -----

func.func @layer_norm_trailing(%x: tensor<8x2x192xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm' op normalized_shape [8, 2] does not match the trailing dims of input 'tensor<8x2x192xf32>'}}
  %0:3 = aten.native_layer_norm %x {normalized_shape = array<i64: 8, 2>, eps = 1.0e-5 : f64} : (tensor<8x2x192xf32>) -> (tensor<8x2x192xf32>, tensor<1x1x1xf32>, tensor<1x1x1xf32>)
  return
}

// -----

func.func @layer_norm_too_many_dims(%x: tensor<2x192xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm' op normalized_shape [1, 2, 192] does not match the trailing dims of input 'tensor<2x192xf32>'}}
  %0:3 = aten.native_layer_norm %x {normalized_shape = array<i64: 1, 2, 192>, eps = 1.0e-5 : f64} : (tensor<2x192xf32>) -> (tensor<2x192xf32>, tensor<1x1xf32>, tensor<1x1xf32>)
  return
}

// -----

func.func @layer_norm_weight(%x: tensor<8x2x192xf32>, %w: tensor<2x192xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm' op weight 'tensor<2x192xf32>' must have normalized_shape [192]}}
  %0:3 = aten.native_layer_norm %x weight %w {normalized_shape = array<i64: 192>, eps = 1.0e-5 : f64} : (tensor<8x2x192xf32>, tensor<2x192xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>)
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<8x2x192xf32>, %w: tensor<192xf32>, %b: tensor<64xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm' op bias 'tensor<64xf32>' must have normalized_shape [192]}}
  %0:3 = aten.native_layer_norm %x weight %w bias %b {normalized_shape = array<i64: 192>, eps = 1.0e-5 : f64} : (tensor<8x2x192xf32>, tensor<192xf32>, tensor<64xf32>) -> (tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>)
  return
}

// -----

func.func @layer_norm_backward_grad(%g: tensor<8x2x192xbf16>, %x: tensor<8x2x192xf32>, %s: tensor<8x2x1xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm_backward' op grad_out 'tensor<8x2x192xbf16>' does not match input 'tensor<8x2x192xf32>'}}
  %0:3 = aten.native_layer_norm_backward %g, %x, %s, %s {normalized_shape = array<i64: 192>, output_mask = array<i1: true, true, true>} : (tensor<8x2x192xbf16>, tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>) -> (tensor<8x2x192xf32>, tensor<192xf32>, tensor<192xf32>)
  return
}

// -----

func.func @layer_norm_backward_shape(%g: tensor<8x2x192xf32>, %x: tensor<8x2x192xf32>, %s: tensor<8x2x1xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm_backward' op normalized_shape [2, 192, 1] does not match the trailing dims of input 'tensor<8x2x192xf32>'}}
  %0:3 = aten.native_layer_norm_backward %g, %x, %s, %s {normalized_shape = array<i64: 2, 192, 1>, output_mask = array<i1: true, true, true>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>) -> (tensor<8x2x192xf32>, tensor<2x192x1xf32>, tensor<2x192x1xf32>)
  return
}

// -----

func.func @layer_norm_backward_mean(%g: tensor<8x2x192xf32>, %x: tensor<8x2x192xf32>, %m: tensor<16xf32>, %s: tensor<8x2x1xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm_backward' op mean 'tensor<16xf32>' must be 'tensor<8x2x1xf32>'}}
  %0:3 = aten.native_layer_norm_backward %g, %x, %m, %s {normalized_shape = array<i64: 192>, output_mask = array<i1: true, true, true>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<16xf32>, tensor<8x2x1xf32>) -> (tensor<8x2x192xf32>, tensor<192xf32>, tensor<192xf32>)
  return
}

// -----

func.func @layer_norm_backward_rstd(%g: tensor<8x2x192xf32>, %x: tensor<8x2x192xf32>, %m: tensor<8x2x1xf32>, %s: tensor<8x1x1xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm_backward' op rstd 'tensor<8x1x1xf32>' must be 'tensor<8x2x1xf32>'}}
  %0:3 = aten.native_layer_norm_backward %g, %x, %m, %s {normalized_shape = array<i64: 192>, output_mask = array<i1: true, true, true>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x1x1xf32>) -> (tensor<8x2x192xf32>, tensor<192xf32>, tensor<192xf32>)
  return
}

// -----

func.func @layer_norm_backward_weight(%g: tensor<8x2x192xf32>, %x: tensor<8x2x192xf32>, %s: tensor<8x2x1xf32>, %w: tensor<2x192xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm_backward' op weight 'tensor<2x192xf32>' must have normalized_shape [192]}}
  %0:3 = aten.native_layer_norm_backward %g, %x, %s, %s weight %w {normalized_shape = array<i64: 192>, output_mask = array<i1: true, true, true>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>, tensor<2x192xf32>) -> (tensor<8x2x192xf32>, tensor<192xf32>, tensor<192xf32>)
  return
}

// -----

func.func @layer_norm_backward_bias(%g: tensor<8x2x192xf32>, %x: tensor<8x2x192xf32>, %s: tensor<8x2x1xf32>, %w: tensor<192xf32>, %b: tensor<1xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm_backward' op bias 'tensor<1xf32>' must have normalized_shape [192]}}
  %0:3 = aten.native_layer_norm_backward %g, %x, %s, %s weight %w bias %b {normalized_shape = array<i64: 192>, output_mask = array<i1: true, true, true>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>, tensor<192xf32>, tensor<1xf32>) -> (tensor<8x2x192xf32>, tensor<192xf32>, tensor<192xf32>)
  return
}

// -----

func.func @layer_norm_backward_mask(%g: tensor<8x2x192xf32>, %x: tensor<8x2x192xf32>, %s: tensor<8x2x1xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm_backward' op output_mask must have 3 entries, got 2}}
  %0:3 = aten.native_layer_norm_backward %g, %x, %s, %s {normalized_shape = array<i64: 192>, output_mask = array<i1: true, true>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>) -> (tensor<8x2x192xf32>, tensor<192xf32>, tensor<192xf32>)
  return
}

// -----

func.func @layer_norm_backward_results(%g: tensor<8x2x192xf32>, %x: tensor<8x2x192xf32>, %s: tensor<8x2x1xf32>) {
  // expected-error @+1 {{'aten.native_layer_norm_backward' op expected result types 'tensor<8x2x192xf32>', 'tensor<192xf32>', 'tensor<192xf32>', got 'tensor<8x2x192xf32>', 'tensor<2x192xf32>', 'tensor<2x192xf32>'}}
  %0:3 = aten.native_layer_norm_backward %g, %x, %s, %s {normalized_shape = array<i64: 192>, output_mask = array<i1: true, true, true>} : (tensor<8x2x192xf32>, tensor<8x2x192xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>) -> (tensor<8x2x192xf32>, tensor<2x192xf32>, tensor<2x192xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

func.func @embedding_weight_rank(%w: tensor<6400xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @+1 {{'aten.embedding' op weight must be 2-D, got 'tensor<6400xf32>'}}
  %0 = aten.embedding %w, %ids : (tensor<6400xf32>, tensor<2x8xi64>) -> tensor<2x8x64xf32>
  return
}

// -----

func.func @embedding_result(%w: tensor<100x64xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @+1 {{'aten.embedding' op expected result type 'tensor<2x8x64xf32>', got 'tensor<16x64xf32>'}}
  %0 = aten.embedding %w, %ids : (tensor<100x64xf32>, tensor<2x8xi64>) -> tensor<16x64xf32>
  return
}

// -----

func.func @embedding_backward_grad(%g: tensor<16x64xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @+1 {{'aten.embedding_dense_backward' op grad_output 'tensor<16x64xf32>' must be indices.shape + [D] for indices 'tensor<2x8xi64>'}}
  %0 = aten.embedding_dense_backward %g, %ids {num_weights = 100 : i64, padding_idx = -1 : i64, scale_grad_by_freq = false} : (tensor<16x64xf32>, tensor<2x8xi64>) -> tensor<100x64xf32>
  return
}

// -----

func.func @embedding_backward_num_weights(%g: tensor<2x8x64xf32>, %ids: tensor<2x8xi64>) {
  // expected-error @+1 {{'aten.embedding_dense_backward' op num_weights must be non-negative, got -1}}
  %0 = aten.embedding_dense_backward %g, %ids {num_weights = -1 : i64, padding_idx = -1 : i64, scale_grad_by_freq = false} : (tensor<2x8x64xf32>, tensor<2x8xi64>) -> tensor<100x64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// nll_loss
//===----------------------------------------------------------------------===//

func.func @nll_loss_input_rank(%x: tensor<2x8x100xf32>, %t: tensor<2x8xi64>) {
  // expected-error @+1 {{'aten.nll_loss_forward' op input must be 1-D or 2-D, got 'tensor<2x8x100xf32>'}}
  %0:2 = aten.nll_loss_forward %x, %t {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<2x8x100xf32>, tensor<2x8xi64>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @nll_loss_target_batch(%x: tensor<16x100xf32>, %t: tensor<8xi64>) {
  // expected-error @+1 {{'aten.nll_loss_forward' op target 'tensor<8xi64>' does not match input 'tensor<16x100xf32>'}}
  %0:2 = aten.nll_loss_forward %x, %t {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<16x100xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @nll_loss_target_unbatched(%x: tensor<100xf32>, %t: tensor<1xi64>) {
  // expected-error @+1 {{'aten.nll_loss_forward' op target 'tensor<1xi64>' does not match input 'tensor<100xf32>'}}
  %0:2 = aten.nll_loss_forward %x, %t {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<100xf32>, tensor<1xi64>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @nll_loss_weight(%x: tensor<16x100xf32>, %t: tensor<16xi64>, %w: tensor<16xf32>) {
  // expected-error @+1 {{'aten.nll_loss_forward' op weight 'tensor<16xf32>' must be [100]}}
  %0:2 = aten.nll_loss_forward %x, %t weight %w {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<16x100xf32>, tensor<16xi64>, tensor<16xf32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @nll_loss_reduction(%x: tensor<16x100xf32>, %t: tensor<16xi64>) {
  // expected-error @+1 {{'aten.nll_loss_forward' op reduction must be 0 (none), 1 (mean) or 2 (sum), got 3}}
  %0:2 = aten.nll_loss_forward %x, %t {reduction = 3 : i64, ignore_index = -100 : i64} : (tensor<16x100xf32>, tensor<16xi64>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @nll_loss_backward_target(%g: tensor<f32>, %x: tensor<16x100xf32>, %t: tensor<16x1xi64>, %tw: tensor<f32>) {
  // expected-error @+1 {{'aten.nll_loss_backward' op target 'tensor<16x1xi64>' does not match input 'tensor<16x100xf32>'}}
  %0 = aten.nll_loss_backward %g, %x, %t, %tw {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<16x100xf32>, tensor<16x1xi64>, tensor<f32>) -> tensor<16x100xf32>
  return
}

// -----

func.func @nll_loss_backward_reduction(%g: tensor<f32>, %x: tensor<16x100xf32>, %t: tensor<16xi64>, %tw: tensor<f32>) {
  // expected-error @+1 {{'aten.nll_loss_backward' op reduction must be 0 (none), 1 (mean) or 2 (sum), got -1}}
  %0 = aten.nll_loss_backward %g, %x, %t, %tw {reduction = -1 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<16x100xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x100xf32>
  return
}

// -----

func.func @nll_loss_backward_grad_reduced(%g: tensor<16xf32>, %x: tensor<16x100xf32>, %t: tensor<16xi64>, %tw: tensor<f32>) {
  // expected-error @+1 {{'aten.nll_loss_backward' op grad_output 'tensor<16xf32>' does not match the loss of input 'tensor<16x100xf32>'}}
  %0 = aten.nll_loss_backward %g, %x, %t, %tw {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<16xf32>, tensor<16x100xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16x100xf32>
  return
}

// -----

func.func @nll_loss_backward_grad_none(%g: tensor<f32>, %x: tensor<16x100xf32>, %t: tensor<16xi64>, %w: tensor<100xf32>, %tw: tensor<f32>) {
  // expected-error @+1 {{'aten.nll_loss_backward' op grad_output 'tensor<f32>' does not match the loss of input 'tensor<16x100xf32>'}}
  %0 = aten.nll_loss_backward %g, %x, %t weight %w, %tw {reduction = 0 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<16x100xf32>, tensor<16xi64>, tensor<100xf32>, tensor<f32>) -> tensor<16x100xf32>
  return
}

// -----

func.func @nll_loss_backward_weight(%g: tensor<f32>, %x: tensor<16x100xf32>, %t: tensor<16xi64>, %w: tensor<100x1xf32>, %tw: tensor<f32>) {
  // expected-error @+1 {{'aten.nll_loss_backward' op weight 'tensor<100x1xf32>' must be [100]}}
  %0 = aten.nll_loss_backward %g, %x, %t weight %w, %tw {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<16x100xf32>, tensor<16xi64>, tensor<100x1xf32>, tensor<f32>) -> tensor<16x100xf32>
  return
}

// -----

func.func @nll_loss_backward_total_weight(%g: tensor<f32>, %x: tensor<16x100xf32>, %t: tensor<16xi64>, %tw: tensor<16xf32>) {
  // expected-error @+1 {{'aten.nll_loss_backward' op total_weight must be 0-D, got 'tensor<16xf32>'}}
  %0 = aten.nll_loss_backward %g, %x, %t, %tw {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<16x100xf32>, tensor<16xi64>, tensor<16xf32>) -> tensor<16x100xf32>
  return
}

// -----

func.func @nll_loss_backward_result(%g: tensor<f32>, %x: tensor<16x100xf32>, %t: tensor<16xi64>, %tw: tensor<f32>) {
  // expected-error @+1 {{'aten.nll_loss_backward' op expected result type 'tensor<16x100xf32>', got 'tensor<16xf32>'}}
  %0 = aten.nll_loss_backward %g, %x, %t, %tw {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<f32>, tensor<16x100xf32>, tensor<16xi64>, tensor<f32>) -> tensor<16xf32>
  return
}

// -----

func.func @layer_norm_weight_dtype(%x: tensor<8x2x64xf32>, %w: tensor<64xbf16>) {
  // expected-error @+1 {{'aten.native_layer_norm' op input and weight element types differ: 'f32' vs 'bf16'}}
  %0:3 = aten.native_layer_norm %x weight %w {normalized_shape = array<i64: 64>, eps = 1.0e-5 : f64} : (tensor<8x2x64xf32>, tensor<64xbf16>) -> (tensor<8x2x64xf32>, tensor<8x2x1xf32>, tensor<8x2x1xf32>)
  return
}

// -----

func.func @nll_loss_i32_target(%x: tensor<16x100xf32>, %t: tensor<16xi32>) {
  // expected-error @+1 {{'aten.nll_loss_forward' op operand #1 must be statically shaped tensor of 64-bit signless integer values}}
  %0:2 = aten.nll_loss_forward %x, %t {reduction = 1 : i64, ignore_index = -100 : i64} : (tensor<16x100xf32>, tensor<16xi32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @split_with_sizes_total(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'aten.split_with_sizes' op split_sizes add up to 5 but dim 1 has 6 elements}}
  %0:2 = aten.split_with_sizes %x {split_sizes = array<i64: 2, 3>, dim = 1 : i64} : (tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x3xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

func.func @attention_rank(%q: tensor<2x8x48xf32>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu' op query must be 4-D, got 'tensor<2x8x48xf32>'}}
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %q, %q : (tensor<2x8x48xf32>, tensor<2x8x48xf32>, tensor<2x8x48xf32>) -> (tensor<2x8x48xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @attention_heads(%q: tensor<2x4x8x48xf32>, %k: tensor<2x2x8x48xf32>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu' op query 'tensor<2x4x8x48xf32>', key 'tensor<2x2x8x48xf32>' and value 'tensor<2x2x8x48xf32>' must have one batch size and one number of heads}}
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %k : (tensor<2x4x8x48xf32>, tensor<2x2x8x48xf32>, tensor<2x2x8x48xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_key_value_length(%q: tensor<2x4x8x48xf32>, %k: tensor<2x4x6x48xf32>, %v: tensor<2x4x5x48xf32>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu' op key 'tensor<2x4x6x48xf32>' and value 'tensor<2x4x5x48xf32>' must have one sequence length}}
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v : (tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x5x48xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_head_size(%q: tensor<2x4x8x48xf32>, %k: tensor<2x4x6x48xf32>, %v: tensor<2x4x6x32xf32>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu' op query 'tensor<2x4x8x48xf32>', key 'tensor<2x4x6x48xf32>' and value 'tensor<2x4x6x32xf32>' must have one head size (ATen's CPU attention kernel)}}
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v : (tensor<2x4x8x48xf32>, tensor<2x4x6x48xf32>, tensor<2x4x6x32xf32>) -> (tensor<2x4x8x32xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_dtypes(%q: tensor<2x4x8x48xf32>, %k: tensor<2x4x8x48xf64>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu' op query and key element types differ: 'f32' vs 'f64'}}
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %k : (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf64>, tensor<2x4x8x48xf64>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_dropout(%q: tensor<2x4x8x48xf32>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu' op dropout_p must be 0, got 1.000000e-01: ATen's CPU attention kernel has no dropout}}
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %q, %q {dropout_p = 0.1 : f64} : (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<2x4x8x48xf32>, %m: tensor<8x7xf32>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu' op shapes [8, 7] and [2, 4, 8, 8] do not broadcast (dim 3: 7 vs 8)}}
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %q, %q attn_mask %m : (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<8x7xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_mask_rank(%q: tensor<2x4x8x48xf32>, %m: tensor<4x8x8xf32>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu' op attn_mask must be 2-D or 4-D, got 'tensor<4x8x8xf32>'}}
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %q, %q attn_mask %m : (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<4x8x8xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_bool_mask(%q: tensor<2x4x8x48xf32>, %m: tensor<8x8xi1>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu' op operand #3 must be}}
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %q, %q attn_mask %m : (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<8x8xi1>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8xf32>)
  return
}

// -----

func.func @attention_logsumexp_type(%q: tensor<2x4x8x48xf32>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu' op expected result types 'tensor<2x4x8x48xf32>', 'tensor<2x4x8xf32>', got 'tensor<2x4x8x48xf32>', 'tensor<2x4x8x1xf32>'}}
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %q, %q : (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8x1xf32>)
  return
}

// -----

func.func @attention_backward_logsumexp(%q: tensor<2x4x8x48xf32>, %lse: tensor<2x4x6xf32>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu_backward' op logsumexp 'tensor<2x4x6xf32>' must be 'tensor<2x4x8xf32>'}}
  %0:3 = aten._scaled_dot_product_flash_attention_for_cpu_backward %q, %q, %q, %q, %q, %lse {dropout_p = 0.0 : f64, is_causal = false} : (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x6xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>)
  return
}

// -----

func.func @attention_backward_grad_out(%q: tensor<2x4x8x48xf32>, %g: tensor<2x4x6x48xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu_backward' op grad_out 'tensor<2x4x6x48xf32>' must be 'tensor<2x4x8x48xf32>'}}
  %0:3 = aten._scaled_dot_product_flash_attention_for_cpu_backward %g, %q, %q, %q, %q, %lse {dropout_p = 0.0 : f64, is_causal = false} : (tensor<2x4x6x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>)
  return
}

// -----

func.func @attention_backward_dropout(%q: tensor<2x4x8x48xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'aten._scaled_dot_product_flash_attention_for_cpu_backward' op dropout_p must be 0, got 5.000000e-01: ATen's CPU attention kernel has no dropout}}
  %0:3 = aten._scaled_dot_product_flash_attention_for_cpu_backward %q, %q, %q, %q, %q, %lse {dropout_p = 0.5 : f64, is_causal = false} : (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>, tensor<2x4x8x48xf32>)
  return
}

// -----

func.func @slice_not_normalized(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'aten.slice.Tensor' op slice bounds [-1, 8) are not normalized for dim 1 of size 8 (expected 0 <= start <= end <= size)}}
  %0 = aten.slice.Tensor %x {dim = 1 : i64, start = -1 : i64, end = 8 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @slice_zero_step(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'aten.slice.Tensor' op slice step must be positive, got 0}}
  %0 = aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 8 : i64, step = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @slice_scatter_src(%x: tensor<4x8xf32>, %s: tensor<4x3xf32>) {
  // expected-error @+1 {{'aten.slice_scatter' op src 'tensor<4x3xf32>' is not shaped like the slice 'tensor<4x4xf32>'}}
  %0 = aten.slice_scatter %x, %s {dim = 1 : i64, start = 0 : i64, end = 8 : i64, step = 2 : i64} : (tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @pad_odd(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'aten.constant_pad_nd' op pad needs an even number of amounts, at most 2 per dim of 'tensor<4x8xf32>', got 3}}
  %0 = aten.constant_pad_nd %x {pad = array<i64: 1, 1, 1>, value = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @pad_negative(%x: tensor<4x2xf32>) {
  // expected-error @+1 {{'aten.constant_pad_nd' op padding dim 1 of 'tensor<4x2xf32>' by (-2, -1) leaves a negative size}}
  %0 = aten.constant_pad_nd %x {pad = array<i64: -2, -1>, value = 0 : i64} : (tensor<4x2xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @cumsum_dim(%x: tensor<4x8xi1>) {
  // expected-error @+1 {{'aten.cumsum' op dim 2 is out of range for a tensor of rank 2}}
  %0 = aten.cumsum %x {dim = 2 : i64} : (tensor<4x8xi1>) -> tensor<4x8xi64>
  return
}

// -----

func.func @gather_larger_index(%x: tensor<4x8xf32>, %i: tensor<5x2xi64>) {
  // expected-error @+1 {{'aten.gather' op index 'tensor<5x2xi64>' is larger than self 'tensor<4x8xf32>' along dim 0}}
  %0 = aten.gather %x, %i {dim = 1 : i64} : (tensor<4x8xf32>, tensor<5x2xi64>) -> tensor<5x2xf32>
  return
}

// -----

func.func @index_broadcast(%x: tensor<4x8xi1>, %a: tensor<3xi64>, %b: tensor<2xi64>) {
  // expected-error @+1 {{'aten.index.Tensor' op shapes [3] and [2] do not broadcast (dim 0: 3 vs 2)}}
  %0 = aten.index.Tensor %x, %a, %b : (tensor<4x8xi1>, tensor<3xi64>, tensor<2xi64>) -> tensor<3xi1>
  return
}

// -----

func.func @index_too_many(%x: tensor<4xf32>, %a: tensor<3xi64>) {
  // expected-error @+1 {{'aten.index.Tensor' op index needs 1 to 1 indices for 'tensor<4xf32>', got 2}}
  %0 = aten.index.Tensor %x, %a, %a : (tensor<4xf32>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @bitwise_and_float(%x: tensor<4xf32>) {
  // expected-error @+1 {{'aten.bitwise_and.Tensor' op operand #0 must be}}
  %0 = aten.bitwise_and.Tensor %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @convolution_groups(%x: tensor<2x6x5x5xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+1 {{'aten.convolution' op weight 'tensor<4x4x3x3xf32>' does not fit 6 input channels in 2 groups}}
  %0 = aten.convolution %x, %w {dilation = array<i64: 1, 1>, groups = 2 : i64, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<2x6x5x5xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  return
}

// -----

func.func @convolution_transposed(%x: tensor<2x4x5x5xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+1 {{'aten.convolution' op transposed convolution is not supported: write it as the convolution it is the adjoint of (spmd-capture does)}}
  %0 = aten.convolution %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = true} : (tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x7x7xf32>
  return
}

// -----

func.func @convolution_window(%x: tensor<2x4x2x5xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+1 {{'aten.convolution' op the kernel 'tensor<4x4x3x3xf32>' does not fit input 'tensor<2x4x2x5xf32>' along spatial dim 0}}
  %0 = aten.convolution %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<2x4x2x5xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x1x3xf32>
  return
}

// -----

func.func @convolution_stride(%x: tensor<2x4x5x5xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+1 {{'aten.convolution' op stride needs 2 entries (one per spatial dim), got 1}}
  %0 = aten.convolution %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1>, transposed = false} : (tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x3x3xf32>
  return
}

// -----

func.func @convolution_backward_bias(%g: tensor<2x4x3x3xf32>, %x: tensor<2x4x5x5xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+1 {{'aten.convolution_backward' op the bias gradient is not computed here (output_mask[2] must be false, of 3 entries)}}
  %0:2 = aten.convolution_backward %g, %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, output_mask = array<i1: true, true, true>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<2x4x3x3xf32>, tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>) -> (tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>)
  return
}

// -----

func.func @max_pool_padding(%x: tensor<2x4x5x5xf32>) {
  // expected-error @+1 {{'aten.max_pool2d_with_indices' op padding 2 is more than half of kernel_size 3}}
  %0:2 = aten.max_pool2d_with_indices %x {ceil_mode = false, dilation = array<i64: 1, 1>, kernel_size = array<i64: 3, 3>, padding = array<i64: 2, 2>, stride = array<i64: 1, 1>} : (tensor<2x4x5x5xf32>) -> (tensor<2x4x7x7xf32>, tensor<2x4x7x7xi64>)
  return
}
