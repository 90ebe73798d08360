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

// MODE: error: spmd-parallelize: unknown mode 'nope'; registered modes: ddp, fsdp, fsdp-tp, tp
// MESH: error: spmd-parallelize: mesh '2x0' is not N or DPxTP with positive sizes
// RANK: error: ddp runs on a 1-D mesh (dp); got a mesh of 2 dims
// FIT: error: loc("w"): argument 'w' cannot take its layout: {{.*}}shard<9>{{.*}}
// SYNTAX: error: ddp: placements entry 'w' is not fqn-glob=placements
// OPTION: error: fsdp: unknown option 'depth'
