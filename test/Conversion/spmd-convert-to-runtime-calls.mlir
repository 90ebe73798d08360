// RUN: spmd-opt %s --spmd-convert-to-runtime-calls -split-input-file -verify-diagnostics | FileCheck %s

// Results are allocated with their static shape and written by the kernel;
// attributes follow the buffers; intermediates are freed after their last
// use; arguments are never freed; returned values are not freed.
// CHECK-DAG: llvm.mlir.global internal constant @[[S48:__spmd_i64_[0-9]+]](dense<[4, 8]> : tensor<2xi64>)
// CHECK-DAG: func.func private @spmd_rt_alloc(i32, i32, !llvm.ptr) -> !llvm.ptr
// CHECK-DAG: func.func private @spmd_rt_matmul(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, f64, f64, i64, i64)
// CHECK-DAG: func.func private @spmd_rt_free(!llvm.ptr)
// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %[[W:.*]]: !llvm.ptr, %[[B:.*]]: !llvm.ptr, %[[X:.*]]: !llvm.ptr) -> !llvm.ptr
// The transpose only feeds the matmul: BLAS reads the weight transposed.
// CHECK-NOT: spmd_rt_permute
// CHECK-DAG: %[[NOTRANS:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[TRANS:.*]] = arith.constant 1 : i64
// CHECK: %[[SHAPE:.*]] = llvm.mlir.addressof @[[S48]]
// CHECK: %[[Y:.*]] = call @spmd_rt_alloc(%{{.*}}, %{{.*}}, %[[SHAPE]])
// CHECK: call @spmd_rt_matmul(%[[Y]], %[[B]], %[[X]], %[[W]], %{{.*}}, %{{.*}}, %[[NOTRANS]], %[[TRANS]])
// CHECK: %[[R:.*]] = call @spmd_rt_alloc(
// CHECK: call @spmd_rt_relu(%[[R]], %[[Y]])
// CHECK-NEXT: call @spmd_rt_free(%[[Y]])
// CHECK-NOT: spmd_rt_free(%[[W]])
// CHECK: return %[[R]] : !llvm.ptr
// A transpose with another use is materialised.
// CHECK-LABEL: func.func @kept(
// CHECK: call @spmd_rt_permute(
// CHECK: call @spmd_rt_matmul(
func.func @linear(%w: tensor<8x16xf32> {spmd.fqn = "w"}, %b: tensor<8xf32>, %x: tensor<4x16xf32>) -> tensor<4x8xf32> {
  %t = aten.t %w : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %y = aten.addmm %b, %x, %t : (tensor<8xf32>, tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %r = aten.relu %y : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
func.func @kept(%w: tensor<8x16xf32>, %x: tensor<4x16xf32>) -> (tensor<4x8xf32>, tensor<16x8xf32>) {
  %t = aten.t %w : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %y = aten.mm %x, %t : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %y, %t : tensor<4x8xf32>, tensor<16x8xf32>
}

// -----

// A returned argument and a value returned twice get buffers of their own.
// CHECK-LABEL: func.func @aliases(
// CHECK-SAME: %[[A:.*]]: !llvm.ptr
// CHECK: %[[N:.*]] = call @spmd_rt_alloc(
// CHECK: call @spmd_rt_neg(%[[N]], %[[A]])
// CHECK: %[[C1:.*]] = call @spmd_rt_view(%[[A]], %{{.*}}, %{{.*}})
// CHECK: %[[C2:.*]] = call @spmd_rt_view(%[[N]], %{{.*}}, %{{.*}})
// CHECK: return %[[C1]], %[[N]], %[[C2]]
func.func @aliases(%a: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %n = aten.neg %a : (tensor<3xf32>) -> tensor<3xf32>
  return %a, %n, %n : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// Scalars, optional operands, multi-result ops, lists and constants.
// CHECK-LABEL: func.func @ops(
// CHECK: %[[ALPHA:.*]] = arith.constant -1.000000e-01 : f64
// CHECK: call @spmd_rt_add_tensor(%{{.*}}, %{{.*}}, %{{.*}}, %[[ALPHA]])
// CHECK-DAG: %[[NOWEIGHT:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-DAG: %[[NOBIAS:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-DAG: %[[EPS:.*]] = arith.constant 1.000000e-05 : f64
// CHECK: call @spmd_rt_native_layer_norm(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[NOWEIGHT]], %[[NOBIAS]], %{{.*}}, %[[EPS]])
// CHECK: call @spmd_rt_slice(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: call @spmd_rt_sum(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: llvm.mlir.addressof @__spmd_constant_
// CHECK: call @spmd_rt_constant(
// CHECK: call @spmd_rt_all_reduce(
// CHECK-NOT: spmd.mesh
func.func @ops(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x2xf32>, tensor<4xf32>, tensor<2x4xf32>) {
  %0 = aten.add.Tensor %a, %b {alpha = -1.000000e-01 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %1:3 = aten.native_layer_norm %0 {normalized_shape = array<i64: 4>, eps = 1.0e-05 : f64} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %2:2 = aten.split.Tensor %1#0 {split_size = 2 : i64, dim = 1 : i64} : (tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
  %3 = aten.sum.dim_IntList %0 {dim = array<i64: -2>} : (tensor<2x4xf32>) -> tensor<4xf32>
  %c = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %4 = spmd.all_reduce %c on @mesh mesh_dims = [0] reduce = sum : tensor<2x4xf32>
  return %0, %1#0, %2#1, %3, %4 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x2xf32>, tensor<4xf32>, tensor<2x4xf32>
}
spmd.mesh @mesh shape = [2] names = ["dp"]

// -----

// A gradient that ATen's output_mask leaves uncomputed has no use: the
// kernel gets NULL for it and allocates nothing (the first convolution's
// input gradient, a frozen weight's or an affine-less norm's).
// CHECK-LABEL: func.func @unused_gradients(
// CHECK: %[[NOGI:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[GW:.*]] = call @spmd_rt_alloc(
// CHECK-NOT: spmd_rt_alloc
// CHECK: call @spmd_rt_convolution_backward(%[[NOGI]], %[[GW]],
// CHECK: %[[GI:.*]] = call @spmd_rt_alloc(
// CHECK: %[[NOGW:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NOT: spmd_rt_alloc
// CHECK: call @spmd_rt_convolution_backward(%[[GI]], %[[NOGW]],
// CHECK: %[[LGI:.*]] = call @spmd_rt_alloc(
// CHECK: %[[NOLGW:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[NOLGB:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NOT: spmd_rt_alloc
// CHECK: call @spmd_rt_native_layer_norm_backward(%[[LGI]], %[[NOLGW]], %[[NOLGB]],
// Both results used: both allocated.
// CHECK: call @spmd_rt_alloc(
// CHECK-NOT: spmd_rt_alloc
// CHECK: call @spmd_rt_alloc(
// CHECK-NOT: spmd_rt_alloc
// CHECK: call @spmd_rt_convolution_backward(
func.func @unused_gradients(%g: tensor<2x4x3x3xf32>, %x: tensor<2x4x5x5xf32>, %w: tensor<4x4x3x3xf32>, %lg: tensor<2x4xf32>, %lx: tensor<2x4xf32>, %s: tensor<2x1xf32>) -> (tensor<4x4x3x3xf32>, tensor<2x4x5x5xf32>, tensor<2x4xf32>, tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>) {
  %0:2 = aten.convolution_backward %g, %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, output_mask = array<i1: false, true, false>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<2x4x3x3xf32>, tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>) -> (tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>)
  %1:2 = aten.convolution_backward %g, %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, output_mask = array<i1: true, false, false>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<2x4x3x3xf32>, tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>) -> (tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>)
  %2:3 = aten.native_layer_norm_backward %lg, %lx, %s, %s {normalized_shape = array<i64: 4>, output_mask = array<i1: true, false, false>} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
  %3:2 = aten.convolution_backward %g, %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, output_mask = array<i1: true, true, false>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<2x4x3x3xf32>, tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>) -> (tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>)
  return %0#1, %1#0, %2#0, %3#0, %3#1 : tensor<4x4x3x3xf32>, tensor<2x4x5x5xf32>, tensor<2x4xf32>, tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @global(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'spmd.redistribute' op is in the global view: run the partitioner (--spmd-parallelize) before lowering}}
  %0 = spmd.redistribute %a : tensor<4xf32> from #spmd.layout<@mesh, [shard<0>]> to #spmd.layout<@mesh, [replicate]>
  return %0 : tensor<4xf32>
}

// -----

func.func @bytes() -> tensor<4xi8> {
  // expected-error @+1 {{'arith.constant' op tensor constant of type 'tensor<4xi8>' cannot be lowered}}
  %0 = arith.constant dense<[1, 2, 3, 4]> : tensor<4xi8>
  return %0 : tensor<4xi8>
}

// -----

// cat reads its inputs through a pointer array: they are freed after the
// call, not after they are stored.
// CHECK-LABEL: func.func @concat(
// CHECK: %[[N:.*]] = call @spmd_rt_alloc(
// CHECK: call @spmd_rt_neg(%[[N]],
// CHECK: llvm.store %[[N]], %{{.*}} : !llvm.ptr, !llvm.ptr
// CHECK: call @spmd_rt_cat(
// CHECK-NEXT: call @spmd_rt_free(%[[N]])
func.func @concat(%a: tensor<2x3xf32>) -> tensor<2x6xf32> {
  %n = aten.neg %a : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %c = aten.cat %n, %a {dim = -1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x6xf32>
  return %c : tensor<2x6xf32>
}

// -----

// Attention: an absent mask is NULL, is_causal an i64, and the scale
// defaults to 1 / sqrt(E) = 0.25 for E = 16.
// CHECK-LABEL: func.func @attention(
// CHECK-SAME: %[[Q:[^:]*]]: !llvm.ptr, %[[K:[^:]*]]: !llvm.ptr, %[[V:[^:]*]]: !llvm.ptr, %[[G:[^:]*]]: !llvm.ptr)
// CHECK: %[[NOMASK:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK: %[[OUT:.*]] = call @spmd_rt_alloc(
// CHECK: %[[LSE:.*]] = call @spmd_rt_alloc(
// CHECK: %[[CAUSAL:.*]] = arith.constant 1 : i64
// CHECK: %[[SCALE:.*]] = arith.constant 2.500000e-01 : f64
// CHECK: call @spmd_rt_attention(%[[OUT]], %[[LSE]], %[[Q]], %[[K]], %[[V]], %[[NOMASK]], %[[CAUSAL]], %[[SCALE]])
// CHECK: call @spmd_rt_attention_backward(%{{.*}}, %{{.*}}, %{{.*}}, %[[G]], %[[Q]], %[[K]], %[[V]], %[[OUT]], %[[LSE]], %{{.*}}, %{{.*}}, %{{.*}})
func.func @attention(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>, %v: tensor<2x4x6x16xf32>, %g: tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>) {
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %v {is_causal = true} : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  %1:3 = aten._scaled_dot_product_flash_attention_for_cpu_backward %g, %q, %k, %v, %0#0, %0#1 {dropout_p = 0.0 : f64, is_causal = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>)
  return %1#0, %1#1, %1#2 : tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>
}

// -----

// An absent optional Scalar passes 0 and, after the numbers, whether each
// is given: clamp(x, max=1.0) as clip_grad_norm_ writes it, and both bounds
// of an integer clamp as f64.
// CHECK-LABEL: func.func @clamp(
// CHECK-SAME: %[[X:[^:]*]]: !llvm.ptr, %[[I:[^:]*]]: !llvm.ptr)
// CHECK: %[[C:.*]] = call @spmd_rt_alloc(
// CHECK: %[[ABSENT:.*]] = arith.constant 0.000000e+00 : f64
// CHECK: %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK: %[[NO:.*]] = arith.constant 0 : i64
// CHECK: %[[YES:.*]] = arith.constant 1 : i64
// CHECK: call @spmd_rt_clamp(%[[C]], %[[X]], %[[ABSENT]], %[[ONE]], %[[NO]], %[[YES]])
// CHECK: %[[D:.*]] = call @spmd_rt_alloc(
// CHECK: %[[MIN:.*]] = arith.constant 0.000000e+00 : f64
// CHECK: %[[MAX:.*]] = arith.constant 5.000000e+00 : f64
// CHECK: %[[YES1:.*]] = arith.constant 1 : i64
// CHECK: %[[YES2:.*]] = arith.constant 1 : i64
// CHECK: call @spmd_rt_clamp(%[[D]], %[[I]], %[[MIN]], %[[MAX]], %[[YES1]], %[[YES2]])
// CHECK: %[[P:.*]] = call @spmd_rt_alloc(
// CHECK: %[[TWO:.*]] = arith.constant 2.000000e+00 : f64
// CHECK: call @spmd_rt_pow_tensor_scalar(%[[P]], %[[C]], %[[TWO]])
func.func @clamp(%x: tensor<4xf32>, %i: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xi64>, tensor<4xf32>) {
  %0 = aten.clamp %x {max = 1.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = aten.clamp %i {min = 0 : i64, max = 5 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  %2 = aten.pow.Tensor_Scalar %0 {exponent = 2.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xi64>, tensor<4xf32>
}

// -----

// An asynchronous collective (every use a wait) calls its _start form; its
// first wait calls spmd_rt_wait, after which its input is freed. The second
// wait, and the wait of a collective that has another use, cost nothing.
// CHECK-LABEL: func.func @async(
// CHECK: %[[IN:.*]] = call @spmd_rt_alloc(
// CHECK: call @spmd_rt_relu(%[[IN]], %arg0)
// CHECK: %[[OUT:.*]] = call @spmd_rt_alloc(
// CHECK: call @spmd_rt_all_gather_start(%[[OUT]], %[[IN]],
// CHECK-NOT: spmd_rt_free(%[[IN]])
// CHECK: call @spmd_rt_relu(
// CHECK: call @spmd_rt_wait(%[[OUT]], %[[IN]])
// CHECK-NEXT: call @spmd_rt_free(%[[IN]])
// CHECK: %[[SYNC:.*]] = call @spmd_rt_alloc(
// CHECK: call @spmd_rt_all_reduce(%[[SYNC]], %arg0,
// CHECK-NOT: spmd_rt_wait
// Two waits of one collective are one buffer: the second one returned is
// a copy (aten.clone, a view of it).
// CHECK: %[[COPY:.*]] = call @spmd_rt_view(%[[OUT]],
// CHECK: return %[[OUT]], %[[COPY]],
spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @async(%a: tensor<4xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = aten.relu %a : (tensor<4xf32>) -> tensor<4xf32>
  %1 = spmd.all_gather %0 on @mesh mesh_dims = [0] gather_dim = 0 : tensor<4xf32> -> tensor<8xf32>
  %2 = aten.relu %a : (tensor<4xf32>) -> tensor<4xf32>
  %3 = spmd.wait %1 : tensor<8xf32>
  %4 = spmd.wait %1 : tensor<8xf32>
  %5 = spmd.all_reduce %a on @mesh mesh_dims = [0] reduce = sum : tensor<4xf32>
  %6 = spmd.wait %5 : tensor<4xf32>
  %7 = aten.add.Tensor %5, %6 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %3, %4, %2, %7 : tensor<8xf32>, tensor<8xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// local_take's compact form passes its runs per rank (4 runs over 2 ranks:
// 2) and the stride between ranks' runs (2), then the starts and counts;
// the table form passes the table; uniform runs (2, every rank's) have
// stride 0.
// CHECK-DAG: llvm.mlir.global internal constant @[[TABLE:__spmd_i64_[0-9]+]](dense<[0, 1, 4, 5, 2, 3, 6, -1]> : tensor<8xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[STARTS:__spmd_i64_[0-9]+]](dense<[0, 4, 2, 6]> : tensor<4xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[SHARED:__spmd_i64_[0-9]+]](dense<[4, 0]> : tensor<2xi64>)
// CHECK-LABEL: func.func @local_take(
// CHECK: %[[DIM:.*]] = arith.constant 0 : i64
// CHECK: %[[RUNS:.*]] = arith.constant 2 : i64
// CHECK: %[[STRIDE:.*]] = arith.constant 2 : i64
// CHECK: %[[S:.*]] = llvm.mlir.addressof @[[STARTS]]
// CHECK: call @spmd_rt_local_take_runs(%{{.*}}, %arg0, %[[DIM]], %[[RUNS]], %[[STRIDE]], %[[S]], %{{.*}}, %{{.*}})
// CHECK: %[[T:.*]] = llvm.mlir.addressof @[[TABLE]]
// CHECK: call @spmd_rt_local_take(%{{.*}}, %arg0, %{{.*}}, %[[T]], %{{.*}})
// CHECK: %[[URUNS:.*]] = arith.constant 2 : i64
// CHECK: %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK: %[[US:.*]] = llvm.mlir.addressof @[[SHARED]]
// CHECK: call @spmd_rt_local_take_runs(%{{.*}}, %arg0, %{{.*}}, %[[URUNS]], %[[ZERO]], %[[US]], %{{.*}}, %{{.*}})
spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @local_take(%a: tensor<8x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<8x3xf32>) {
  %0 = spmd.local_take %a on @mesh dim = 0 starts = [0, 4, 2, 6] counts = [2, 2, 2, 2] : tensor<8x3xf32> -> tensor<4x3xf32>
  %1 = spmd.local_take %a on @mesh dim = 0 indices = [0, 1, 4, 5, 2, 3, 6, -1] fill = 1.0 : tensor<8x3xf32> -> tensor<4x3xf32>
  %2 = spmd.local_take %a on @mesh dim = 0 starts = [4, 0] counts = [4, 4] uniform : tensor<8x3xf32> -> tensor<8x3xf32>
  return %0, %1, %2 : tensor<4x3xf32>, tensor<4x3xf32>, tensor<8x3xf32>
}

// -----

// Views of the program's mesh (fsdp's post-forward mesh): the collectives
// of every mesh run over dims of the refined mesh [2, 2, 2]: @mesh's dp
// spans refined dims 0 and 1, the view's dp_shard dim 1, tp dim 2.
// CHECK-DAG: llvm.mlir.global internal constant @[[DP:__spmd_i64_[0-9]+]](dense<[0, 1]> : tensor<2xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[SHARD:__spmd_i64_[0-9]+]](dense<1> : tensor<1xi64>)
// CHECK-DAG: llvm.mlir.global internal constant @[[TP:__spmd_i64_[0-9]+]](dense<2> : tensor<1xi64>)
// CHECK-LABEL: func.func @views(
// CHECK: %[[N2:.*]] = arith.constant 2 : i32
// CHECK: %[[G0:.*]] = llvm.mlir.addressof @[[DP]]
// CHECK: call @spmd_rt_all_gather(%{{.*}}, %arg0, %[[N2]], %[[G0]], %{{.*}})
// CHECK: %[[N1:.*]] = arith.constant 1 : i32
// CHECK: %[[G1:.*]] = llvm.mlir.addressof @[[SHARD]]
// CHECK: call @spmd_rt_all_gather(%{{.*}}, %arg0, %[[N1]], %[[G1]], %{{.*}})
// CHECK: %[[G2:.*]] = llvm.mlir.addressof @[[TP]]
// CHECK: call @spmd_rt_all_reduce(%{{.*}}, %arg0, %{{.*}}, %[[G2]], %{{.*}})
spmd.mesh @mesh shape = [4, 2] names = ["dp", "tp"]
spmd.mesh @post_forward shape = [2, 2, 2] names = ["dp_replicate", "dp_shard", "tp"]
func.func @views(%a: tensor<4xf32>) -> (tensor<16xf32>, tensor<8xf32>, tensor<4xf32>) {
  %0 = spmd.all_gather %a on @mesh mesh_dims = [0] gather_dim = 0 : tensor<4xf32> -> tensor<16xf32>
  %1 = spmd.all_gather %a on @post_forward mesh_dims = [1] gather_dim = 0 : tensor<4xf32> -> tensor<8xf32>
  %2 = spmd.all_reduce %a on @post_forward mesh_dims = [2] reduce = sum : tensor<4xf32>
  return %0, %1, %2 : tensor<16xf32>, tensor<8xf32>, tensor<4xf32>
}

// -----

spmd.mesh @mesh shape = [4] names = ["dp"]
// expected-error @+1 {{'spmd.mesh' op spmd-convert-to-runtime-calls: has 8 ranks, the program's mesh @mesh has 4}}
spmd.mesh @big shape = [2, 4] names = ["a", "b"]

// -----

spmd.mesh @mesh shape = [2, 3] names = ["a", "b"]
// expected-error @+1 {{'spmd.mesh' op spmd-convert-to-runtime-calls: cuts the ranks at 3, which another mesh's cut at 2 does not divide: the meshes are not views of one mesh}}
spmd.mesh @other shape = [3, 2] names = ["c", "d"]
