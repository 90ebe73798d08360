// RUN: spmd-opt %s --spmd-parallelize="mode=ddp mesh=2" -split-input-file -verify-diagnostics | FileCheck %s
// RUN: not spmd-opt %s -split-input-file --spmd-parallelize="mode=nope mesh=2" 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not spmd-opt %s -split-input-file --spmd-parallelize="mode=ddp mesh=2x0" 2>&1 | FileCheck %s --check-prefix=MESH
// RUN: not spmd-opt %s -split-input-file --spmd-parallelize="mode=ddp mesh=2x2" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not spmd-opt %s -split-input-file --spmd-parallelize="mode=fsdp mesh=2 placements=w=shard<9>" 2>&1 | FileCheck %s --check-prefix=FIT
// RUN: not spmd-opt %s -split-input-file --spmd-parallelize="mode=ddp mesh=2 placements=w" 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not spmd-opt %s -split-input-file --spmd-parallelize="mode=fsdp mesh=2 options=depth=3" 2>&1 | FileCheck %s --check-prefix=OPTION

// A data-parallel linear step: the input is sharded on the batch, the
// weight gradient all-reduced, the update replicated.
// CHECK: spmd.mesh @mesh shape = [2] names = ["dp"]
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<4x8xf32> {spmd.fqn = "x", spmd.layout = #spmd.layout<@mesh, [shard<0>]>, spmd.role = "input"}
// CHECK: aten.mm {{.*}} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK: spmd.all_reduce {{.*}} {spmd.module = "w", spmd.phase = "optimizer", spmd.reason = "ddp: gradient all_reduce before the update: [partial<sum>] -> [replicate]"}
// CHECK: aten.sub.Tensor {{.*}} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
func.func @train_step(%x: tensor<8x8xf32> {spmd.fqn = "x", spmd.role = "input"} loc("x"),
                      %w: tensor<8x8xf32> {spmd.fqn = "w", spmd.role = "param"} loc("w"))
    -> (tensor<f32> {spmd.role = "loss"}, tensor<8x8xf32> {spmd.fqn = "w", spmd.updates = 1 : i64}) {
  %y = aten.mm %x, %w {spmd.module = "lin", spmd.phase = "forward"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %l = aten.sum %y {spmd.module = "", spmd.phase = "loss"} : (tensor<8x8xf32>) -> tensor<f32>
  %one = aten.ones_like %y {spmd.module = "lin", spmd.phase = "backward"} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %xt = aten.t %x {spmd.module = "lin", spmd.phase = "backward"} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %g = aten.mm %xt, %one {spmd.module = "lin", spmd.phase = "backward"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %u = aten.sub.Tensor %w, %g {spmd.module = "w", spmd.phase = "optimizer"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %l, %u : tensor<f32>, tensor<8x8xf32>
}

// -----

// Gradient accumulation written in the step: the batch is split into two
// equal micro-batches, each with its own forward and backward. The input
// takes StridedShard(0, 2) (each rank holds its rows of every micro-batch),
// so both micro-steps are data parallel and the summed gradient is reduced
// once.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<4x8xf32> {spmd.fqn = "x", spmd.layout = #spmd.layout<@mesh, [strided_shard<0, 2>]>, spmd.role = "input"}
// CHECK: aten.split_with_sizes {{.*}} : (tensor<4x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
// CHECK-NOT: spmd.all_gather
// CHECK: spmd.all_reduce {{.*}}ddp: gradient all_reduce before the update
// CHECK-NOT: gradient all_reduce
// CHECK: return
func.func @train_step(%x: tensor<8x8xf32> {spmd.fqn = "x", spmd.role = "input"} loc("x"),
                      %w: tensor<8x8xf32> {spmd.fqn = "w", spmd.role = "param"} loc("w"))
    -> (tensor<f32> {spmd.role = "loss"}, tensor<8x8xf32> {spmd.fqn = "w", spmd.updates = 1 : i64}) {
  %m:2 = aten.split_with_sizes %x {split_sizes = array<i64: 4, 4>, dim = 0 : i64, spmd.module = "", spmd.phase = "forward"} : (tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %y0 = aten.mm %m#0, %w {spmd.module = "lin", spmd.phase = "forward"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l0 = aten.sum %y0 {spmd.module = "", spmd.phase = "loss"} : (tensor<4x8xf32>) -> tensor<f32>
  %one0 = aten.ones_like %y0 {spmd.module = "lin", spmd.phase = "backward"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %xt0 = aten.t %m#0 {spmd.module = "lin", spmd.phase = "backward"} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %g0 = aten.mm %xt0, %one0 {spmd.module = "lin", spmd.phase = "backward"} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %y1 = aten.mm %m#1, %w {spmd.module = "lin", spmd.phase = "forward"} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l1 = aten.sum %y1 {spmd.module = "", spmd.phase = "loss"} : (tensor<4x8xf32>) -> tensor<f32>
  %one1 = aten.ones_like %y1 {spmd.module = "lin", spmd.phase = "backward"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %xt1 = aten.t %m#1 {spmd.module = "lin", spmd.phase = "backward"} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %g1 = aten.mm %xt1, %one1 {spmd.module = "lin", spmd.phase = "backward"} : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %l = aten.add.Tensor %l0, %l1 {spmd.module = "", spmd.phase = "backward"} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %g = aten.add.Tensor %g0, %g1 {spmd.module = "", spmd.phase = "backward"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %u = aten.sub.Tensor %w, %g {spmd.module = "w", spmd.phase = "optimizer"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %l, %u : tensor<f32>, tensor<8x8xf32>
}

// -----

// Micro-batches of unequal sizes have no strided layout: the input keeps
// Shard(0). A split into one piece is the whole batch and keeps its shard.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<4x8xf32> {spmd.fqn = "x", spmd.layout = #spmd.layout<@mesh, [shard<0>]>, spmd.role = "input"}
// CHECK-SAME: tensor<4x8xf32> {spmd.fqn = "y", spmd.layout = #spmd.layout<@mesh, [shard<0>]>, spmd.role = "input"}
// CHECK: aten.split_with_sizes {{.*}} : (tensor<4x8xf32>) -> tensor<4x8xf32>
func.func @train_step(%x: tensor<8x8xf32> {spmd.fqn = "x", spmd.role = "input"} loc("x"),
                      %y: tensor<8x8xf32> {spmd.fqn = "y", spmd.role = "input"} loc("y"))
    -> (tensor<8x8xf32> {spmd.role = "loss"}) {
  %m:2 = aten.split_with_sizes %x {split_sizes = array<i64: 6, 2>, dim = 0 : i64, spmd.module = "", spmd.phase = "forward"} : (tensor<8x8xf32>) -> (tensor<6x8xf32>, tensor<2x8xf32>)
  %c = aten.cat %m#0, %m#1 {dim = 0 : i64, spmd.module = "", spmd.phase = "forward"} : (tensor<6x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
  %one = aten.split_with_sizes %y {split_sizes = array<i64: 8>, dim = 0 : i64, spmd.module = "", spmd.phase = "forward"} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %r = aten.add.Tensor %c, %one {spmd.module = "", spmd.phase = "forward"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// fuseIndependentAllReduces: a BatchNorm's two backward batch sums (of the
// gradient and of the gradient times the centred input) do not wait for
// each other and go as one all_reduce of both; forward's variance is taken
// about the reduced mean, so its sum waits for the mean's and stays apart.
// The batch is large enough that reducing the statistics beats gathering
// it.
// CHECK-LABEL: func.func @train_step
// CHECK: spmd.all_reduce {{.*}}spmd.phase = "forward", spmd.reason = "batch statistics of 'bn': [partial<sum>] -> [replicate]"} : tensor<4xf32>
// CHECK: spmd.all_reduce {{.*}}spmd.phase = "forward", spmd.reason = "batch statistics of 'bn': [partial<sum>] -> [replicate]"} : tensor<4xf32>
// CHECK: spmd.all_reduce {{.*}}spmd.reason = "batch statistics of 'bn' (backward): [partial<sum>] -> [replicate], 2 all_reduces fused"} : tensor<8xf32>
// CHECK-NOT: batch statistics
// CHECK: return
func.func @train_step(%x: tensor<1048576x4xf32> {spmd.fqn = "x", spmd.role = "input"} loc("x"))
    -> (tensor<f32> {spmd.role = "loss"}) attributes {spmd.modules = {bn = {classes = ["BatchNorm1d", "_BatchNorm"]}}} {
  %s = aten.sum.dim_IntList %x {dim = array<i64: 0>, spmd.module = "bn", spmd.phase = "forward"} : (tensor<1048576x4xf32>) -> tensor<4xf32>
  %mean = aten.div.Scalar %s {other = 1048576 : i64, spmd.module = "bn", spmd.phase = "forward"} : (tensor<4xf32>) -> tensor<4xf32>
  %c = aten.sub.Tensor %x, %mean {spmd.module = "bn", spmd.phase = "forward"} : (tensor<1048576x4xf32>, tensor<4xf32>) -> tensor<1048576x4xf32>
  %sq = aten.mul.Tensor %c, %c {spmd.module = "bn", spmd.phase = "forward"} : (tensor<1048576x4xf32>, tensor<1048576x4xf32>) -> tensor<1048576x4xf32>
  %v = aten.sum.dim_IntList %sq {dim = array<i64: 0>, spmd.module = "bn", spmd.phase = "forward"} : (tensor<1048576x4xf32>) -> tensor<4xf32>
  %rs = aten.rsqrt %v {spmd.module = "bn", spmd.phase = "forward"} : (tensor<4xf32>) -> tensor<4xf32>
  %n = aten.mul.Tensor %c, %rs {spmd.module = "bn", spmd.phase = "forward"} : (tensor<1048576x4xf32>, tensor<4xf32>) -> tensor<1048576x4xf32>
  %g1 = aten.sum.dim_IntList %n {dim = array<i64: 0>, spmd.module = "bn", spmd.phase = "backward"} : (tensor<1048576x4xf32>) -> tensor<4xf32>
  %nc = aten.mul.Tensor %n, %c {spmd.module = "bn", spmd.phase = "backward"} : (tensor<1048576x4xf32>, tensor<1048576x4xf32>) -> tensor<1048576x4xf32>
  %g2 = aten.sum.dim_IntList %nc {dim = array<i64: 0>, spmd.module = "bn", spmd.phase = "backward"} : (tensor<1048576x4xf32>) -> tensor<4xf32>
  %e1 = aten.exp %g1 {spmd.module = "bn", spmd.phase = "backward"} : (tensor<4xf32>) -> tensor<4xf32>
  %e2 = aten.exp %g2 {spmd.module = "bn", spmd.phase = "backward"} : (tensor<4xf32>) -> tensor<4xf32>
  %a = aten.mul.Tensor %n, %e1 {spmd.module = "bn", spmd.phase = "backward"} : (tensor<1048576x4xf32>, tensor<4xf32>) -> tensor<1048576x4xf32>
  %b = aten.mul.Tensor %a, %e2 {spmd.module = "bn", spmd.phase = "backward"} : (tensor<1048576x4xf32>, tensor<4xf32>) -> tensor<1048576x4xf32>
  %l = aten.sum %b {spmd.module = "", spmd.phase = "loss"} : (tensor<1048576x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}


// MODE: error: spmd-parallelize: unknown mode 'nope'; registered modes: ddp, fsdp, fsdp-tp, tp
// MESH: error: spmd-parallelize: mesh '2x0' is not N or DPxTP with positive sizes
// RANK: error: ddp runs on a 1-D mesh (dp); got a mesh of 2 dims
// FIT: error: loc("w"): argument 'w' cannot take its layout: {{.*}}shard<9>{{.*}}
// SYNTAX: error: ddp: placements entry 'w' is not fqn-glob=placements
// OPTION: error: fsdp: unknown option 'depth'
