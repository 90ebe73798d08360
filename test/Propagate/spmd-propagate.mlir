// RUN: spmd-opt %s --spmd-propagate -split-input-file -verify-diagnostics --allow-unregistered-dialect | FileCheck %s --check-prefixes=CHECK,BOTH
// RUN: spmd-opt %s --spmd-propagate=search=greedy -split-input-file -verify-diagnostics --allow-unregistered-dialect | FileCheck %s --check-prefix=BOTH
// RUN: spmd-opt %s --spmd-propagate=max-sweeps=0 -split-input-file -verify-diagnostics --allow-unregistered-dialect | FileCheck %s --check-prefix=START

// Megatron's MLP: linear1 colwise (weight Shard(0)), linear2 rowwise (weight
// Shard(1)). The hidden activation stays sharded on its feature dim, the
// second matmul contracts it into a Partial, and the one reduction is the
// all_reduce the replicated output needs.
spmd.mesh @mesh shape = [4] names = ["tp"]
// CHECK-LABEL: func.func @colwise_rowwise
func.func @colwise_rowwise(
    %x: tensor<64x256xf32>,
    %w1: tensor<1024x256xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>},
    %w2: tensor<256x1024xf32> {spmd.layout = #spmd.layout<@mesh, [shard<1>]>})
    -> tensor<64x256xf32> {
  // CHECK: aten.t {{.*}}[#spmd.layout<@mesh, [shard<1>]>]
  // CHECK: aten.mm {{.*}}[#spmd.layout<@mesh, [shard<1>]>]
  // CHECK: aten.relu {{.*}}[#spmd.layout<@mesh, [shard<1>]>]
  // CHECK: aten.mm {{.*}}[#spmd.layout<@mesh, [partial<sum>]>]
  // CHECK-NOT: spmd.redistribute
  // CHECK: spmd.redistribute {{.*}} from #spmd.layout<@mesh, [partial<sum>]> to #spmd.layout<@mesh, [replicate]> {spmd.reason = "operand 0 of func.return"}
  // CHECK-NOT: spmd.redistribute
  // CHECK: return
  %t1 = aten.t %w1 : (tensor<1024x256xf32>) -> tensor<256x1024xf32>
  %h = aten.mm %x, %t1 : (tensor<64x256xf32>, tensor<256x1024xf32>) -> tensor<64x1024xf32>
  %r = aten.relu %h : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %t2 = aten.t %w2 : (tensor<256x1024xf32>) -> tensor<1024x256xf32>
  %y = aten.mm %r, %t2 : (tensor<64x1024xf32>, tensor<1024x256xf32>) -> tensor<64x256xf32>
  return %y : tensor<64x256xf32>
}

// -----

// A sum over the sharded batch is Partial; linear ops keep it Partial and
// it is reduced once, where the nonlinear sqrt needs it whole (the loss of a
// data-parallel step).
spmd.mesh @mesh shape = [4] names = ["dp"]
// CHECK-LABEL: func.func @lazy_partial
func.func @lazy_partial(%x: tensor<4096x512xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>})
    -> tensor<f32> {
  // CHECK: aten.sum {{.*}}[#spmd.layout<@mesh, [partial<sum>]>]
  // CHECK-NEXT: aten.mul.Scalar {{.*}}[#spmd.layout<@mesh, [partial<sum>]>]
  // CHECK-NEXT: aten.neg {{.*}}[#spmd.layout<@mesh, [partial<sum>]>]
  // CHECK-NEXT: spmd.redistribute {{.*}} from #spmd.layout<@mesh, [partial<sum>]> to #spmd.layout<@mesh, [replicate]> {spmd.reason = "operand 0 of aten.sqrt"}
  // CHECK-NEXT: aten.sqrt
  %s = aten.sum %x : (tensor<4096x512xf32>) -> tensor<f32>
  %m = aten.mul.Scalar %s {other = 2.0 : f64} : (tensor<f32>) -> tensor<f32>
  %n = aten.neg %m : (tensor<f32>) -> tensor<f32>
  %q = aten.sqrt %n : (tensor<f32>) -> tensor<f32>
  return %q : tensor<f32>
}

// -----

// A Partial that a consumer needs sharded is reduce-scattered, and the
// update then runs on shards.
spmd.mesh @mesh shape = [4] names = ["dp"]
// CHECK-LABEL: func.func @reduce_scatter
func.func @reduce_scatter(%x: tensor<4096x512xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>})
    -> (tensor<512xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) {
  // CHECK: aten.sum.dim_IntList {{.*}}[#spmd.layout<@mesh, [partial<sum>]>]
  // CHECK-NEXT: spmd.redistribute {{.*}} from #spmd.layout<@mesh, [partial<sum>]> to #spmd.layout<@mesh, [shard<0>]>
  // CHECK-NEXT: aten.mul.Scalar {{.*}}[#spmd.layout<@mesh, [shard<0>]>]
  %s = aten.sum.dim_IntList %x {dim = array<i64: 0>, keepdim = false} : (tensor<4096x512xf32>) -> tensor<512xf32>
  %m = aten.mul.Scalar %s {other = 2.0 : f64} : (tensor<512xf32>) -> tensor<512xf32>
  return %m : tensor<512xf32>
}

// -----

// Gradient clipping under FSDP: the gradient (Partial) is read by the
// norm and by the update of a Shard(0) parameter. It is reduce-scattered
// once, for the norm, and the update takes that shard, in the search and
// in DTensor's greedy choice alike (one redistribution serves every
// consumer).
spmd.mesh @mesh shape = [4] names = ["dp"]
// BOTH-LABEL: func.func @clip
func.func @clip(%dy: tensor<64x4096xf32> {spmd.layout = #spmd.layout<@mesh, [shard<1>]>},
                %x: tensor<4096x64xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>},
                %w: tensor<64x64xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>, spmd.role = "param"})
    -> (tensor<64x64xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) {
  // BOTH: aten.mm {{.*}}[#spmd.layout<@mesh, [partial<sum>]>]
  // BOTH-NEXT: spmd.redistribute {{.*}} from #spmd.layout<@mesh, [partial<sum>]> to #spmd.layout<@mesh, [shard<0>]> {{.*}}spmd.reason = "operand 0 of aten.pow.Tensor_Scalar"
  // BOTH-NOT: spmd.redistribute {{.*}} to #spmd.layout<@mesh, [shard<0>]>
  // BOTH: aten.mul.Tensor {{.*}}[#spmd.layout<@mesh, [shard<0>]>]
  // BOTH-NOT: spmd.redistribute {{.*}} to #spmd.layout<@mesh, [shard<0>]>
  // BOTH: return
  %g = aten.mm %dy, %x {spmd.phase = "backward"} : (tensor<64x4096xf32>, tensor<4096x64xf32>) -> tensor<64x64xf32>
  %sq = aten.pow.Tensor_Scalar %g {exponent = 2.0 : f64, spmd.phase = "optimizer"} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %ss = aten.sum %sq {spmd.phase = "optimizer"} : (tensor<64x64xf32>) -> tensor<f32>
  %n = aten.pow.Tensor_Scalar %ss {exponent = 0.5 : f64, spmd.phase = "optimizer"} : (tensor<f32>) -> tensor<f32>
  %e = aten.add.Scalar %n {other = 1.0e-6 : f64, spmd.phase = "optimizer"} : (tensor<f32>) -> tensor<f32>
  %r = aten.reciprocal %e {spmd.phase = "optimizer"} : (tensor<f32>) -> tensor<f32>
  %c = aten.clamp %r {max = 1.0 : f64, spmd.phase = "optimizer"} : (tensor<f32>) -> tensor<f32>
  %gc = aten.mul.Tensor %g, %c {spmd.phase = "optimizer"} : (tensor<64x64xf32>, tensor<f32>) -> tensor<64x64xf32>
  %u = aten.mul.Scalar %gc {other = 0.1 : f64, spmd.phase = "optimizer"} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %w2 = aten.sub.Tensor %w, %u {spmd.phase = "optimizer"} : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  return %w2 : tensor<64x64xf32>
}

// -----

// A fixed Partial -> Replicate redistribute (DDP's gradient all_reduce) of
// a gradient computed whole (its batch replicated): the value already has
// the layout the redistribute gives, so the redistribute goes and nothing
// is reduced.
spmd.mesh @mesh shape = [4] names = ["dp"]
// CHECK-LABEL: func.func @whole_gradient
func.func @whole_gradient(%xt: tensor<64x2xf32> {spmd.layout = #spmd.layout<@mesh, [replicate]>},
                          %x: tensor<2x64xf32> {spmd.layout = #spmd.layout<@mesh, [replicate]>})
    -> (tensor<64x64xf32> {spmd.layout = #spmd.layout<@mesh, [replicate]>}) {
  // CHECK: aten.mm {{.*}}[#spmd.layout<@mesh, [replicate]>]
  // CHECK-NOT: spmd.redistribute
  // CHECK: return
  %g = aten.mm %xt, %x {spmd.phase = "backward"} : (tensor<64x2xf32>, tensor<2x64xf32>) -> tensor<64x64xf32>
  %r = spmd.redistribute %g : tensor<64x64xf32> from #spmd.layout<@mesh, [partial<sum>]> to #spmd.layout<@mesh, [replicate]> {spmd.reason = "ddp: gradient all_reduce before the update"}
  return %r : tensor<64x64xf32>
}

// -----

// Fixed layouts win: the result must be Shard(1), so the Shard(0) argument
// is redistributed once, whatever its two consumers prefer; a value that
// two consumers need in the same layout is redistributed once.
spmd.mesh @mesh shape = [2, 2] names = ["dp", "tp"]
// CHECK-LABEL: func.func @fixed
func.func @fixed(%x: tensor<64x64xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>, replicate]>})
    -> (tensor<64x64xf32> {spmd.layout = #spmd.layout<@mesh, [shard<1>, replicate]>}) {
  // CHECK-COUNT-1: spmd.redistribute
  // CHECK-NOT: spmd.redistribute
  %a = aten.relu %x : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %b = aten.neg %x : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %c = aten.add.Tensor %a, %b : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  return %c : tensor<64x64xf32>
}

// -----

// Attention's heads-merging view on a (dp, tp) mesh: dp shards the batch B
// and tp the heads H of [T, B, H*hd]. Both atoms of the merged [T, B*H, hd]
// stay sharded, nested left to right: dp's Shard(1) first, then tp's
// StridedShard(1, B/dp) on the local B/dp*H. The batched matmul keeps the
// layout (a StridedShard twin), and the inverse view gives the input's
// layout back: no redistribution anywhere.
spmd.mesh @mesh shape = [2, 2] names = ["dp", "tp"]
// CHECK-LABEL: func.func @nested_atoms
func.func @nested_atoms(%x: tensor<8x4x64xf32> {spmd.layout = #spmd.layout<@mesh, [shard<1>, shard<2>]>})
    -> (tensor<8x4x64xf32> {spmd.layout = #spmd.layout<@mesh, [shard<1>, shard<2>]>}) {
  // CHECK-NOT: spmd.redistribute
  // CHECK: aten.view {{.*}}spmd.layouts = [#spmd.layout<@mesh, [shard<1>, strided_shard<1, 2>]>]
  %v = aten.view %x {size = array<i64: 8, 16, 16>} : (tensor<8x4x64xf32>) -> tensor<8x16x16xf32>
  %t = aten.transpose.int %v {dim0 = 0 : i64, dim1 = 1 : i64} : (tensor<8x16x16xf32>) -> tensor<16x8x16xf32>
  // CHECK: aten.bmm {{.*}}spmd.layouts = [#spmd.layout<@mesh, [shard<0>, strided_shard<0, 2>]>]
  %k = aten.transpose.int %t {dim0 = 1 : i64, dim1 = 2 : i64} : (tensor<16x8x16xf32>) -> tensor<16x16x8xf32>
  %s = aten.bmm %t, %k : (tensor<16x8x16xf32>, tensor<16x16x8xf32>) -> tensor<16x8x8xf32>
  %o = aten.bmm %s, %t : (tensor<16x8x8xf32>, tensor<16x8x16xf32>) -> tensor<16x8x16xf32>
  %b = aten.transpose.int %o {dim0 = 0 : i64, dim1 = 1 : i64} : (tensor<16x8x16xf32>) -> tensor<8x16x16xf32>
  %c = aten.clone %b : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
  // CHECK: aten.view {{.*}}spmd.layouts = [#spmd.layout<@mesh, [shard<1>, shard<2>]>]
  %r = aten.view %c {size = array<i64: 8, 4, 64>} : (tensor<8x16x16xf32>) -> tensor<8x4x64xf32>
  return %r : tensor<8x4x64xf32>
}

// -----

// A fused gate|up weight [E, 2F, H] sharded on F within each half
// (StridedShard(1, 2)) flattened to [E, 2F*H] and back: its chunks hold
// whole rows of H, so the merged dim is StridedShard(1, 2) too (a view's
// strided twin), and the per-expert table gradient keeps it on its
// embedding dim (embedding_dense_backward's table rows stay whole).
spmd.mesh @mesh shape = [2] names = ["tp"]
// CHECK-LABEL: func.func @strided_flatten
func.func @strided_flatten(%g: tensor<6x8x4xf32> {spmd.layout = #spmd.layout<@mesh, [strided_shard<1, 2>]>},
                           %i: tensor<6xi64> {spmd.layout = #spmd.layout<@mesh, [replicate]>})
    -> (tensor<3x8x4xf32> {spmd.layout = #spmd.layout<@mesh, [strided_shard<1, 2>]>}) {
  // CHECK-NOT: spmd.redistribute
  // CHECK: aten.view {{.*}}spmd.layouts = [#spmd.layout<@mesh, [strided_shard<1, 2>]>]
  %f = aten.view %g {size = array<i64: 6, 32>} : (tensor<6x8x4xf32>) -> tensor<6x32xf32>
  // CHECK: aten.embedding_dense_backward {{.*}}spmd.layouts = [#spmd.layout<@mesh, [strided_shard<1, 2>]>]
  %w = aten.embedding_dense_backward %f, %i {num_weights = 3 : i64, padding_idx = -1 : i64, scale_grad_by_freq = false} : (tensor<6x32xf32>, tensor<6xi64>) -> tensor<3x32xf32>
  // CHECK: aten.view {{.*}}spmd.layouts = [#spmd.layout<@mesh, [strided_shard<1, 2>]>]
  %r = aten.view %w {size = array<i64: 3, 8, 4>} : (tensor<3x32xf32>) -> tensor<3x8x4xf32>
  return %r : tensor<3x8x4xf32>
}

// -----

// spmd.strategy forces a strategy (the per-op test matrix uses it).
spmd.mesh @mesh shape = [4] names = ["dp"]
// CHECK-LABEL: func.func @forced
func.func @forced(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // CHECK: spmd.redistribute %arg0 {{.*}} to #spmd.layout<@mesh, [shard<1>]>
  // CHECK: spmd.redistribute %arg1 {{.*}} to #spmd.layout<@mesh, [shard<0>]>
  // CHECK: aten.mm {{.*}}{spmd.layouts = [#spmd.layout<@mesh, [partial<sum>]>]}
  %c = aten.mm %a, %b {spmd.strategy = 3 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

// spmd.replicated runs an op on whole values: a product of [shard<1>] and
// [shard<0>] operands, which the search would contract over the shards
// into a Partial, gathers them instead (Muon's Newton-Schulz iteration), and
// its consumer takes the Replicate result as it is.
spmd.mesh @mesh shape = [4] names = ["dp"]
// CHECK-LABEL: func.func @replicated
func.func @replicated(%a: tensor<8x64xbf16> {spmd.layout = #spmd.layout<@mesh, [shard<1>]>},
                      %b: tensor<64x8xbf16> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>})
    -> tensor<8x8xbf16> {
  // CHECK: spmd.redistribute %arg0 {{.*}} to #spmd.layout<@mesh, [replicate]>
  // CHECK: spmd.redistribute %arg1 {{.*}} to #spmd.layout<@mesh, [replicate]>
  // CHECK: aten.mm {{.*}}spmd.layouts = [#spmd.layout<@mesh, [replicate]>]
  %c = aten.mm %a, %b {spmd.replicated} : (tensor<8x64xbf16>, tensor<64x8xbf16>) -> tensor<8x8xbf16>
  // CHECK-NOT: spmd.redistribute
  // CHECK: aten.mm {{.*}}spmd.layouts = [#spmd.layout<@mesh, [replicate]>]
  %d = aten.mm %c, %c {spmd.replicated} : (tensor<8x8xbf16>, tensor<8x8xbf16>) -> tensor<8x8xbf16>
  return %d : tensor<8x8xbf16>
}

// -----

spmd.mesh @mesh shape = [4] names = ["dp"]
func.func @replicated_and_forced(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'aten.mm' op has spmd.strategy and spmd.replicated, which name different strategies}}
  %c = aten.mm %a, %b {spmd.strategy = 3 : i64, spmd.replicated} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

spmd.mesh @mesh shape = [4] names = ["dp"]
func.func @out_of_range(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'aten.mm' op spmd.strategy = 9 is out of range: the op has 6 strategies on this mesh}}
  %c = aten.mm %a, %b {spmd.strategy = 9 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

spmd.mesh @mesh shape = [4] names = ["dp"]
func.func @no_rule(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'arith.addf' op has no sharding rule: cannot propagate layouts through it}}
  %c = arith.addf %a, %a : tensor<8xf32>
  return %c : tensor<8xf32>
}

// -----

// expected-error @+1 {{spmd-propagate needs exactly one spmd.mesh, found 0}}
module {
  func.func @no_mesh(%a: tensor<8xf32>) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
// expected-error @+1 {{'func.func' op must have a single block: spmd-propagate works on captured straight-line training steps}}
func.func @blocks(%a: tensor<4xf32>) -> tensor<4xf32> {
  "test.br"()[^bb1] : () -> ()
^bb1:
  return %a : tensor<4xf32>
}

// -----

// A sharding constraint pins the tp mesh dim and leaves dp free: the
// producer is redistributed on tp only (with the constraint's reason),
// and dp keeps the batch shard, which the result keeps too.
spmd.mesh @mesh shape = [2, 2] names = ["dp", "tp"]
// CHECK-LABEL: func.func @constraint
func.func @constraint(%x: tensor<8x16xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>, shard<1>]>})
    -> (tensor<8x16xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>, replicate]>}) {
  // CHECK: spmd.redistribute %{{.*}} from #spmd.layout<@mesh, [shard<0>, shard<1>]> to #spmd.layout<@mesh, [shard<0>, replicate]> {spmd.reason = "pin tp"}
  // CHECK-NEXT: spmd.sharding_constraint {{.*}} free [0] {spmd.layouts = [#spmd.layout<@mesh, [shard<0>, replicate]>], spmd.reason = "pin tp"}
  %0 = spmd.sharding_constraint %x : tensor<8x16xf32> to #spmd.layout<@mesh, [replicate, replicate]> free [0] {spmd.reason = "pin tp"}
  %1 = aten.relu %0 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// -----

// A tensor beyond the limits (2^26 elements per dim) is refused before any
// per-rank table is built for it.
spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @too_large(%a: tensor<1xf32>) -> tensor<8x8589934592xf32> {
  // expected-error @+1 {{'aten.expand' op spmd-propagate: 'tensor<8x8589934592xf32>' is too large: tensor dim 1 has 8589934592 elements; spmd partitions dims of at most 2^26 (67108864)}}
  %0 = aten.expand %a {size = array<i64: 8, 8589934592>} : (tensor<1xf32>) -> tensor<8x8589934592xf32>
  return %0 : tensor<8x8589934592xf32>
}

// -----

// Chain moves: BatchNorm's variance over a batch-sharded input, normalized
// and used to update the running variance. Single-op moves leave it
// reduce-scattered, carried on channel shards and gathered twice (for the
// normalization and where the running variance is returned); re-placing the
// chain of small ops together all-reduces it once.
// CHECK-LABEL: func.func @batch_norm
// CHECK: spmd.redistribute %{{.*}} from #spmd.layout<@mesh, [partial<sum>]> to #spmd.layout<@mesh, [replicate]>
// CHECK-NOT: spmd.redistribute
// CHECK: return
spmd.mesh @mesh shape = [4] names = ["dp"]
func.func @batch_norm(%x: tensor<8x16x4xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}, %rv: tensor<16xf32> {spmd.layout = #spmd.layout<@mesh, [replicate]>})
    -> (tensor<8x16x4xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}, tensor<16xf32> {spmd.layout = #spmd.layout<@mesh, [replicate]>}) {
  %sq = aten.mul.Tensor %x, %x : (tensor<8x16x4xf32>, tensor<8x16x4xf32>) -> tensor<8x16x4xf32>
  %s = aten.sum.dim_IntList %sq {dim = array<i64: 0, 2>, keepdim = true} : (tensor<8x16x4xf32>) -> tensor<1x16x1xf32>
  %var = aten.div.Scalar %s {other = 32.0 : f64} : (tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
  %eps = aten.add.Scalar %var {other = 1.0e-05 : f64} : (tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
  %inv = aten.rsqrt %eps : (tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
  %y = aten.mul.Tensor %x, %inv : (tensor<8x16x4xf32>, tensor<1x16x1xf32>) -> tensor<8x16x4xf32>
  %u = aten.div.Scalar %s {other = 31.0 : f64} : (tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
  %uv = aten.view %u {size = array<i64: 16>} : (tensor<1x16x1xf32>) -> tensor<16xf32>
  %m = aten.mul.Scalar %uv {other = 0.1 : f64} : (tensor<16xf32>) -> tensor<16xf32>
  %k = aten.mul.Scalar %rv {other = 0.9 : f64} : (tensor<16xf32>) -> tensor<16xf32>
  %new = aten.add.Tensor %m, %k : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %y, %new : tensor<8x16x4xf32>, tensor<16xf32>
}

// -----

// Dropout's mask of a rowwise product: bernoulli.p reads only the shape of
// its Partial operand (a factory's rule), so the mask is drawn Replicate
// without reducing the product, which the step needs only where it is used.
// CHECK-LABEL: func.func @mask_of_partial
// CHECK: aten.mm {{.*}}[#spmd.layout<@mesh, [partial<sum>]>]
// CHECK-NEXT: aten.bernoulli.p {{.*}}[#spmd.layout<@mesh, [replicate]>]
// CHECK-NOT: spmd.redistribute
// CHECK: return
spmd.mesh @mesh shape = [4] names = ["tp"]
func.func @mask_of_partial(%x: tensor<64x256xf32> {spmd.layout = #spmd.layout<@mesh, [shard<1>]>}, %w: tensor<256x64xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>})
    -> (tensor<64x64xf32> {spmd.layout = #spmd.layout<@mesh, [replicate]>}) {
  %y = aten.mm %x, %w : (tensor<64x256xf32>, tensor<256x64xf32>) -> tensor<64x64xf32>
  %mask = aten.bernoulli.p %y {p = 0.9 : f64} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  return %mask : tensor<64x64xf32>
}

// -----

// Select backward of a tensor-parallel step's per-step Partial gradients
// (a recurrent scan's, contracted over the sharded channels): each is
// written into zeros at its step under a bool mask, where(mask, g, zeros).
// The start that keeps tensor parallelism's activations replicated counts
// neither the zeros (Partial for free) nor the mask as a replicated value
// the Partial must not be carried beside, so the gradients are summed as
// Partials and reduced once. Beside it, a colwise layer's input gradient
// %dx meets a layer norm's backward (replicated %xhat and %gamma): that
// start all-reduces %dx there, once (Megatron's backward), where a lazy
// Partial would make both the norm's gradients Partial. With max-sweeps=0
// the plan is the cheapest start's own: this one, two all_reduces. %ids,
// an input, makes tp a mesh dim whose inputs are replicated.
// START-LABEL: func.func @select_backward
// START: spmd.redistribute {{.*}} from #spmd.layout<@mesh, [partial<sum>]> to #spmd.layout<@mesh, [replicate]> {spmd.reason = "operand 0 of aten.mul.Tensor"}
// START-NOT: to #spmd.layout<@mesh, [replicate]>
// START: aten.where.self {{.*}}[#spmd.layout<@mesh, [partial<sum>]>]
// START-NOT: to #spmd.layout<@mesh, [replicate]>
// START: aten.add.Tensor {{.*}}[#spmd.layout<@mesh, [partial<sum>]>]
// START-NOT: to #spmd.layout<@mesh, [replicate]>
// START: aten.add.Tensor {{.*}}[#spmd.layout<@mesh, [partial<sum>]>]
// START-NEXT: spmd.redistribute {{.*}} from #spmd.layout<@mesh, [partial<sum>]> to #spmd.layout<@mesh, [replicate]>
// START-NOT: spmd.redistribute
// START: return
spmd.mesh @mesh shape = [2] names = ["tp"]
func.func @select_backward(
    %dh: tensor<4x16xf32> {spmd.layout = #spmd.layout<@mesh, [shard<1>]>},
    %w: tensor<16x8xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>},
    %xhat: tensor<4x8xf32> {spmd.layout = #spmd.layout<@mesh, [replicate]>},
    %gamma: tensor<8xf32> {spmd.layout = #spmd.layout<@mesh, [replicate]>, spmd.role = "param"},
    %x: tensor<4x16xf32> {spmd.layout = #spmd.layout<@mesh, [shard<1>]>},
    %v: tensor<16x8xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>},
    %ids: tensor<4xi64> {spmd.layout = #spmd.layout<@mesh, [replicate]>, spmd.role = "input"})
    -> (tensor<8xf32> {spmd.layout = #spmd.layout<@mesh, [replicate]>},
        tensor<4x8xf32> {spmd.layout = #spmd.layout<@mesh, [replicate]>},
        tensor<4x3x8xf32> {spmd.layout = #spmd.layout<@mesh, [replicate]>}) {
  %dx = aten.mm %dh, %w : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %gx = aten.mul.Tensor %dx, %xhat : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %dgamma = aten.sum.dim_IntList %gx {dim = array<i64: 0>, keepdim = false} : (tensor<4x8xf32>) -> tensor<8xf32>
  %dxhat = aten.mul.Tensor %dx, %gamma : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %p = aten.mm %x, %v : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %z = aten.full {dtype = f32, fill_value = 0 : i64, size = array<i64: 4, 3, 8>} : () -> tensor<4x3x8xf32>
  %r = aten.arange.start_step {dtype = i64, end = 3 : i64, start = 0 : i64, step = 1 : i64} : () -> tensor<3xi64>
  %rv = aten.view %r {size = array<i64: 1, -1, 1>} : (tensor<3xi64>) -> tensor<1x3x1xi64>
  %p0 = aten.mul.Scalar %p {other = 1.0 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %u0 = aten.unsqueeze %p0 {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x1x8xf32>
  %e0 = aten.expand %u0 {size = array<i64: 4, 3, 8>} : (tensor<4x1x8xf32>) -> tensor<4x3x8xf32>
  %m0 = aten.eq.Scalar %rv {other = 0 : i64} : (tensor<1x3x1xi64>) -> tensor<1x3x1xi1>
  %s0 = aten.where.self %m0, %e0, %z : (tensor<1x3x1xi1>, tensor<4x3x8xf32>, tensor<4x3x8xf32>) -> tensor<4x3x8xf32>
  %p1 = aten.mul.Scalar %p {other = 2.0 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %u1 = aten.unsqueeze %p1 {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x1x8xf32>
  %e1 = aten.expand %u1 {size = array<i64: 4, 3, 8>} : (tensor<4x1x8xf32>) -> tensor<4x3x8xf32>
  %m1 = aten.eq.Scalar %rv {other = 1 : i64} : (tensor<1x3x1xi64>) -> tensor<1x3x1xi1>
  %s1 = aten.where.self %m1, %e1, %z : (tensor<1x3x1xi1>, tensor<4x3x8xf32>, tensor<4x3x8xf32>) -> tensor<4x3x8xf32>
  %p2 = aten.mul.Scalar %p {other = 3.0 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %u2 = aten.unsqueeze %p2 {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x1x8xf32>
  %e2 = aten.expand %u2 {size = array<i64: 4, 3, 8>} : (tensor<4x1x8xf32>) -> tensor<4x3x8xf32>
  %m2 = aten.eq.Scalar %rv {other = 2 : i64} : (tensor<1x3x1xi64>) -> tensor<1x3x1xi1>
  %s2 = aten.where.self %m2, %e2, %z : (tensor<1x3x1xi1>, tensor<4x3x8xf32>, tensor<4x3x8xf32>) -> tensor<4x3x8xf32>
  %a1 = aten.add.Tensor %s0, %s1 : (tensor<4x3x8xf32>, tensor<4x3x8xf32>) -> tensor<4x3x8xf32>
  %a2 = aten.add.Tensor %a1, %s2 : (tensor<4x3x8xf32>, tensor<4x3x8xf32>) -> tensor<4x3x8xf32>
  return %dgamma, %dxhat, %a2 : tensor<8xf32>, tensor<4x8xf32>, tensor<4x3x8xf32>
}
