// RUN: spmd-opt %s --spmd-propagate --spmd-partition -split-input-file -verify-diagnostics | FileCheck %s

spmd.mesh @mesh shape = [4] names = ["dp"]

// Shard(0) -> Shard(1): one all_to_all, local types [2, 8] -> [8, 2].
// CHECK-LABEL: func.func @s2s(%arg0: tensor<2x8xf32> {{.*}}) -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = spmd.all_to_all %arg0 on @mesh mesh_dims = [0] split_dim = 1 concat_dim = 0 {spmd.reason = "operand 0 of func.return: [shard<0>] -> [shard<1>]"} : tensor<2x8xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[A]]
func.func @s2s(%x: tensor<8x8xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>})
    -> (tensor<8x8xf32> {spmd.layout = #spmd.layout<@mesh, [shard<1>]>}) {
  return %x : tensor<8x8xf32>
}

// 10 rows on 4 ranks: 3, 3, 3, 1 in pieces padded to 3. The gather moves
// 12 rows and every rank keeps the 10 real ones (a run: the compact form of
// spmd.local_take, `uniform` as every rank takes the same).
// CHECK-LABEL: func.func @uneven_gather(%arg0: tensor<3x4xf32>
// CHECK-NEXT: %[[G:.*]] = spmd.all_gather %arg0 on @mesh mesh_dims = [0] gather_dim = 0 {{.*}} : tensor<3x4xf32> -> tensor<12x4xf32>
// CHECK-NEXT: %[[T:.*]] = spmd.local_take %[[G]] on @mesh dim = 0 starts = [0] counts = [10] uniform : tensor<12x4xf32> -> tensor<10x4xf32>
// CHECK-NEXT: return %[[T]]
func.func @uneven_gather(%x: tensor<10x4xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) -> tensor<10x4xf32> {
  return %x : tensor<10x4xf32>
}

// The contracted dim is uneven (3, 3, 3, 1): before the matmul sums over
// it, the padding of both operands is zeroed (rank 3 keeps 1 of 3
// positions); the Partial result is all-reduced.
// CHECK-LABEL: func.func @masked_contraction
// CHECK: %[[E:.*]] = aten.add.Scalar
// CHECK-NEXT: %[[A:.*]] = spmd.local_take %[[E]] on @mesh dim = 1 starts = [0, 0, 0, 0] counts = [3, 3, 3, 1]
// CHECK-NEXT: %[[B:.*]] = spmd.local_take %arg1 on @mesh dim = 0 starts = [0, 0, 0, 0] counts = [3, 3, 3, 1]
// CHECK-NEXT: %[[C:.*]] = aten.mm %[[A]], %[[B]] : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
// CHECK-NEXT: spmd.all_reduce %[[C]] on @mesh mesh_dims = [0] reduce = sum
func.func @masked_contraction(%a: tensor<3x10xf32> {spmd.layout = #spmd.layout<@mesh, [shard<1>]>}, %b: tensor<10x3xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) -> tensor<3x3xf32> {
  %e = aten.add.Scalar %a {other = 1.0 : f64, alpha = 1.0 : f64} : (tensor<3x10xf32>) -> tensor<3x10xf32>
  %c = aten.mm %e, %b : (tensor<3x10xf32>, tensor<10x3xf32>) -> tensor<3x3xf32>
  return %c : tensor<3x3xf32>
}

// The mean over a sharded batch: each rank sums its rows (padded targets
// ignored) and divides by the all-reduced total weight; the Partial loss
// is then all-reduced.
// CHECK-LABEL: func.func @mean_loss
// CHECK: %[[X:.*]] = spmd.local_take %arg0 on @mesh dim = 0 starts = [0, 0, 0, 0] counts = [2, 2, 2, 0] : tensor<2x5xf32>
// CHECK-NEXT: %[[T:.*]] = spmd.local_take %arg1 on @mesh dim = 0 starts = [0, 0, 0, 0] counts = [2, 2, 2, 0] fill = -1.000000e+02 : tensor<2xi64>
// CHECK-NEXT: %[[L:.*]], %[[W:.*]] = aten.nll_loss_forward %[[X]], %[[T]] {ignore_index = -100 : i64, reduction = 2 : i64}
// CHECK-NEXT: %[[WS:.*]] = spmd.all_reduce %[[W]] on @mesh mesh_dims = [0] reduce = sum {spmd.reason = "total_weight of the mean nll_loss_forward
// CHECK-NEXT: %[[M:.*]] = aten.div.Tensor %[[L]], %[[WS]]
// CHECK-NEXT: spmd.all_reduce %[[M]] on @mesh mesh_dims = [0] reduce = sum
func.func @mean_loss(%lp: tensor<6x5xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}, %t: tensor<6xi64> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) -> tensor<f32> {
  %l, %w = aten.nll_loss_forward %lp, %t {ignore_index = -100 : i64, reduction = 1 : i64} : (tensor<6x5xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<f32>)
  return %l : tensor<f32>
}

// Shape attributes become local: [8, 3, 4] -> [24, 4] on 4 ranks is
// [2, 3, 4] -> [6, 4].
// CHECK-LABEL: func.func @view
// CHECK-NEXT: aten.view %arg0 {size = array<i64: 6, 4>} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
func.func @view(%x: tensor<8x3x4xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) -> (tensor<24x4xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) {
  %v = aten.view %x {size = array<i64: 24, 4>} : (tensor<8x3x4xf32>) -> tensor<24x4xf32>
  return %v : tensor<24x4xf32>
}

// -----

// An uneven StridedShard(0, 2): 7 rows cut in pieces of 4 and 3, each
// chunked on 2 ranks; gathering reorders the pieces back, the same runs on
// every rank (`uniform`: listed once, shorter than the table).
spmd.mesh @mesh shape = [2] names = ["dp"]
// CHECK-LABEL: func.func @strided
// CHECK: spmd.all_gather %arg0 on @mesh mesh_dims = [0] gather_dim = 0 {{.*}} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: spmd.local_take %{{.*}} on @mesh dim = 0 starts = [0, 4, 2, 6] counts = [2, 2, 2, 1] uniform : tensor<8x2xf32> -> tensor<7x2xf32>
func.func @strided(%x: tensor<7x2xf32> {spmd.layout = #spmd.layout<@mesh, [strided_shard<0, 2>]>}) -> tensor<7x2xf32> {
  return %x : tensor<7x2xf32>
}

// -----

// StridedShard(0, 2) of 32 rows (a sequence-sharded [2, 16] flattened):
// each rank holds one run of 8 rows in each of the 2 pieces. The reorder
// after the gather is the same 4 runs on every rank, listed once.
spmd.mesh @mesh shape = [2] names = ["dp"]
// CHECK-LABEL: func.func @strided_runs
// CHECK: spmd.all_gather %arg0 on @mesh mesh_dims = [0] gather_dim = 0 {{.*}} : tensor<16x2xf32> -> tensor<32x2xf32>
// CHECK-NEXT: spmd.local_take %{{.*}} on @mesh dim = 0 starts = [0, 16, 8, 24] counts = [8, 8, 8, 8] uniform : tensor<32x2xf32> -> tensor<32x2xf32>
func.func @strided_runs(%x: tensor<32x2xf32> {spmd.layout = #spmd.layout<@mesh, [strided_shard<0, 2>]>}) -> tensor<32x2xf32> {
  return %x : tensor<32x2xf32>
}

// -----

// Replicate -> Partial(sum) of a scalar: the group's first rank keeps it.
spmd.mesh @mesh shape = [2, 2] names = ["dp", "tp"]
// CHECK-LABEL: func.func @local_partial
// CHECK: aten.view %arg0 {size = array<i64: 1>} : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT: spmd.local_take %{{.*}} on @mesh dim = 0 starts = [0, 0, 0, 0] counts = [1, 0, 1, 0] : tensor<1xf32> -> tensor<1xf32>
// CHECK-NEXT: aten.view %{{.*}} {size = array<i64>} : (tensor<1xf32>) -> tensor<f32>
func.func @local_partial(%x: tensor<f32>) -> tensor<f32> {
  %p = spmd.redistribute %x : tensor<f32> from #spmd.layout<@mesh, [replicate, replicate]> to #spmd.layout<@mesh, [replicate, partial<sum>]>
  %r = spmd.redistribute %p : tensor<f32> from #spmd.layout<@mesh, [replicate, partial<sum>]> to #spmd.layout<@mesh, [replicate, replicate]>
  return %r : tensor<f32>
}

// -----

// Random ops on a sharded result draw at their global positions.
spmd.mesh @mesh shape = [4] names = ["dp"]
// CHECK-LABEL: func.func @dropout
// CHECK: aten.native_dropout {{.*}}spmd.global_offsets = array<i64: 0, 0, 3, 0, 6, 0, 9, 0>, spmd.global_shape = array<i64: 10, 4>{{.*}} : (tensor<3x4xf32>)
func.func @dropout(%x: tensor<10x4xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) -> (tensor<10x4xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) {
  %o, %m = aten.native_dropout %x {p = 0.5 : f64, train = true} : (tensor<10x4xf32>) -> (tensor<10x4xf32>, tensor<10x4xi1>)
  return %o : tensor<10x4xf32>
}

// -----

// A StridedShard result (attention's heads-sharded scores, dropped out on
// local heads) is a contiguous box of a finer global shape: dim 0 of 8 as
// [2 pieces, 4], each rank drawing rows [2r, 2r + 2) of both pieces. The op
// draws on that shape, between views, at the same global element indices
// as the 1-rank run.
spmd.mesh @mesh shape = [2] names = ["tp"]
// CHECK-LABEL: func.func @strided_dropout
// CHECK: %[[IN:.*]] = aten.view %arg0 {size = array<i64: 2, 2, 4>} : (tensor<4x4xf32>) -> tensor<2x2x4xf32>
// CHECK: %[[OUT:.*]], %[[MASK:.*]] = aten.native_dropout %[[IN]] {{.*}}spmd.global_offsets = array<i64: 0, 0, 0, 0, 2, 0>, spmd.global_shape = array<i64: 2, 4, 4>{{.*}} -> (tensor<2x2x4xf32>, tensor<2x2x4xi1>)
// CHECK: aten.view %[[OUT]] {size = array<i64: 4, 4>} : (tensor<2x2x4xf32>) -> tensor<4x4xf32>
func.func @strided_dropout(%x: tensor<8x4xf32> {spmd.layout = #spmd.layout<@mesh, [strided_shard<0, 2>]>}) -> (tensor<8x4xf32> {spmd.layout = #spmd.layout<@mesh, [strided_shard<0, 2>]>}) {
  %o, %m = aten.native_dropout %x {p = 0.5 : f64, train = true} : (tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xi1>)
  return %o : tensor<8x4xf32>
}

// -----

// A vocabulary-sharded embedding (rowwise): 50001 rows on 4 ranks are
// 12501, 12501, 12501 and 12498; each rank looks up the rows it holds (a masked
// Partial), and the small output is reduced rather than the table gathered.
spmd.mesh @mesh shape = [4] names = ["tp"]
// CHECK-LABEL: func.func @rowwise_embedding
// CHECK: aten.embedding %arg0, %arg1 {spmd.vocab_rows = array<i64: 0, 12501, 50001, 12501, 12501, 50001, 25002, 12501, 50001, 37503, 12498, 50001>} : (tensor<12501x256xf32>, tensor<2x5xi64>) -> tensor<2x5x256xf32>
// CHECK-NEXT: spmd.all_reduce
func.func @rowwise_embedding(%w: tensor<50001x256xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}, %i: tensor<2x5xi64>) -> tensor<2x5x256xf32> {
  %e = aten.embedding %w, %i : (tensor<50001x256xf32>, tensor<2x5xi64>) -> tensor<2x5x256xf32>
  return %e : tensor<2x5x256xf32>
}
