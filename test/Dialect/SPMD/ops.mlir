// RUN: spmd-opt %s | FileCheck %s
// RUN: spmd-opt %s | spmd-opt | FileCheck %s
// RUN: spmd-opt %s --mlir-print-op-generic | spmd-opt | FileCheck %s

// CHECK: spmd.mesh @mesh shape = [2, 2] names = ["dp", "tp"]
spmd.mesh @mesh shape = [2, 2] names = ["dp", "tp"]
// CHECK: spmd.mesh @mesh3d shape = [2, 3, 4] names = ["a", "b", "c"]
spmd.mesh @mesh3d shape = [2, 3, 4] names = ["a", "b", "c"]

// CHECK-LABEL: func.func @layouts
// CHECK-SAME: spmd.layout = #spmd.layout<@mesh, [strided_shard<0, 2>, shard<0>]>
// CHECK-SAME: spmd.layout = #spmd.layout<@mesh3d, [replicate, partial<avg>, shard<1>]>
// CHECK-SAME: -> (tensor<8x4xf32> {spmd.layout = #spmd.layout<@mesh, [replicate, replicate]>, spmd.role = "loss"}
// CHECK-SAME: {spmd.updates = 0 : i64}
func.func @layouts(
    %w: tensor<8x4xf32> {spmd.layout = #spmd.layout<@mesh, [strided_shard<0, 2>, shard<0>]>,
                         spmd.role = "param", spmd.fqn = "layers.0.linear1.weight"},
    %x: tensor<6x5xbf16> {spmd.layout = #spmd.layout<@mesh3d, [replicate, partial<avg>, shard<1>]>,
                          spmd.role = "input"})
    -> (tensor<8x4xf32> {spmd.layout = #spmd.layout<@mesh, [replicate, replicate]>, spmd.role = "loss"},
        tensor<8x4xf32> {spmd.updates = 0}) {
  return %w, %w : tensor<8x4xf32>, tensor<8x4xf32>
}

// CHECK-LABEL: func.func @provenance
// CHECK: aten.relu %{{.*}} {spmd.module = "layers.0.linear1", spmd.phase = "forward"}
// CHECK: aten.relu %{{.*}} {spmd.module = "", spmd.phase = "optimizer"}
func.func @provenance(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = aten.relu %x {spmd.module = "layers.0.linear1", spmd.phase = "forward"} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = aten.relu %0 {spmd.module = "", spmd.phase = "optimizer"} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// CHECK-LABEL: func.func @placement_attrs
// CHECK: test.placements = [#spmd.shard<1>, #spmd.strided_shard<0, 3>, #spmd.replicate, #spmd.partial<sum>, #spmd.partial<max>, #spmd.partial<min>]
func.func @placement_attrs() attributes {test.placements = [#spmd.shard<1>, #spmd.strided_shard<0, 3>, #spmd.replicate, #spmd.partial<sum>, #spmd.partial<max>, #spmd.partial<min>]} {
  return
}

// CHECK-LABEL: func.func @redistribute
func.func @redistribute(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // CHECK: spmd.redistribute %{{.*}} : tensor<8x4xf32> from #spmd.layout<@mesh, [partial<sum>, shard<1>]> to #spmd.layout<@mesh, [shard<1>, shard<0>]>
  %0 = spmd.redistribute %arg0 : tensor<8x4xf32> from #spmd.layout<@mesh, [partial<sum>, shard<1>]> to #spmd.layout<@mesh, [shard<1>, shard<0>]>
  return %0 : tensor<8x4xf32>
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%arg0: tensor<8x4xf32>, %empty: tensor<0x4xf32>) {
  // CHECK: spmd.all_reduce %{{.*}} on @mesh mesh_dims = [0] reduce = max : tensor<8x4xf32>
  %0 = spmd.all_reduce %arg0 on @mesh mesh_dims = [0] reduce = max : tensor<8x4xf32>
  // CHECK: spmd.all_gather %{{.*}} on @mesh mesh_dims = [0, 1] gather_dim = 0 : tensor<8x4xf32> -> tensor<32x4xf32>
  %1 = spmd.all_gather %arg0 on @mesh mesh_dims = [0, 1] gather_dim = 0 : tensor<8x4xf32> -> tensor<32x4xf32>
  // CHECK: spmd.reduce_scatter %{{.*}} on @mesh mesh_dims = [1] scatter_dim = 0 reduce = sum : tensor<8x4xf32> -> tensor<4x4xf32>
  %2 = spmd.reduce_scatter %arg0 on @mesh mesh_dims = [1] scatter_dim = 0 reduce = sum : tensor<8x4xf32> -> tensor<4x4xf32>
  // CHECK: spmd.all_to_all %{{.*}} on @mesh mesh_dims = [1] split_dim = 1 concat_dim = 0 : tensor<8x4xf32> -> tensor<16x2xf32>
  %3 = spmd.all_to_all %arg0 on @mesh mesh_dims = [1] split_dim = 1 concat_dim = 0 : tensor<8x4xf32> -> tensor<16x2xf32>
  // CHECK: spmd.all_to_all %{{.*}} on @mesh3d mesh_dims = [2, 0] split_dim = 0 concat_dim = 0 : tensor<8x4xf32> -> tensor<8x4xf32>
  %4 = spmd.all_to_all %arg0 on @mesh3d mesh_dims = [2, 0] split_dim = 0 concat_dim = 0 : tensor<8x4xf32> -> tensor<8x4xf32>
  // CHECK: spmd.broadcast %{{.*}} on @mesh3d mesh_dims = [1, 2] root = 11 : tensor<8x4xf32>
  %5 = spmd.broadcast %arg0 on @mesh3d mesh_dims = [1, 2] root = 11 : tensor<8x4xf32>
  // CHECK: spmd.all_gather %{{.*}} on @mesh3d mesh_dims = [1] gather_dim = 1 : tensor<0x4xf32> -> tensor<0x12xf32>
  %6 = spmd.all_gather %empty on @mesh3d mesh_dims = [1] gather_dim = 1 : tensor<0x4xf32> -> tensor<0x12xf32>
  // CHECK: spmd.reduce_scatter %{{.*}} on @mesh3d mesh_dims = [2, 0] scatter_dim = 0 reduce = min : tensor<8x4xf32> -> tensor<1x4xf32>
  %7 = spmd.reduce_scatter %arg0 on @mesh3d mesh_dims = [2, 0] scatter_dim = 0 reduce = min : tensor<8x4xf32> -> tensor<1x4xf32>
  return
}

// CHECK-LABEL: func.func @local_ops
func.func @local_ops(%x: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<2x4xf32>) {
  // CHECK: spmd.keep_local %{{.*}} : tensor<4x4xf32> from #spmd.layout<@mesh, [partial<sum>, shard<1>]> to #spmd.layout<@mesh, [replicate, shard<1>]>
  %0 = spmd.keep_local %x : tensor<4x4xf32> from #spmd.layout<@mesh, [partial<sum>, shard<1>]> to #spmd.layout<@mesh, [replicate, shard<1>]>
  // CHECK: spmd.local_take %{{.*}} on @mesh dim = 0 indices = [0, 1, 2, 3, 0, -1, 1, 2] fill = 1.500000e+00 : tensor<4x4xf32> -> tensor<2x4xf32>
  %1 = spmd.local_take %x on @mesh dim = 0 indices = [0, 1, 2, 3, 0, -1, 1, 2] fill = 1.5 : tensor<4x4xf32> -> tensor<2x4xf32>
  // CHECK: spmd.local_take %{{.*}} on @mesh dim = 1 starts = [0, 2, 0, 2] counts = [2, 2, 2, 1] : tensor<4x4xf32> -> tensor<4x2xf32>
  %2 = spmd.local_take %x on @mesh dim = 1 starts = [0, 2, 0, 2] counts = [2, 2, 2, 1] : tensor<4x4xf32> -> tensor<4x2xf32>
  // CHECK: spmd.local_take %{{.*}} on @mesh dim = 0 starts = [0, 2, 1, 3, 0, -1, 2, -1] counts = [1, 1, 1, 1, 1, 1, 1, 0] : tensor<4x4xf32> -> tensor<2x4xf32>
  %3 = spmd.local_take %x on @mesh dim = 0 starts = [0, 2, 1, 3, 0, -1, 2, -1] counts = [1, 1, 1, 1, 1, 1, 1, 0] : tensor<4x4xf32> -> tensor<2x4xf32>
  // CHECK: spmd.local_take %{{.*}} on @mesh dim = 0 starts = [2, 0, 3] counts = [2, 1, 1] uniform fill = 2.000000e+00 : tensor<4x4xf32> -> tensor<4x4xf32>
  %4 = spmd.local_take %x on @mesh dim = 0 starts = [2, 0, 3] counts = [2, 1, 1] uniform fill = 2.0 : tensor<4x4xf32> -> tensor<4x4xf32>
  return %0, %1 : tensor<4x4xf32>, tensor<2x4xf32>
}

// CHECK-LABEL: func.func @constraint
// CHECK: spmd.sharding_constraint %{{.*}} : tensor<8x16xf32> to #spmd.layout<@mesh2, [replicate, shard<1>]> free [0]
spmd.mesh @mesh2 shape = [2, 2] names = ["dp", "tp"]
func.func @constraint(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = spmd.sharding_constraint %x : tensor<8x16xf32> to #spmd.layout<@mesh2, [replicate, shard<1>]> free [0]
  return %0 : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @wait
// CHECK: %[[G:.*]] = spmd.all_gather
// CHECK: spmd.wait %[[G]] : tensor<8x4xf32>
func.func @wait(%x: tensor<4x4xf32>) -> tensor<8x4xf32> {
  %0 = spmd.all_gather %x on @mesh mesh_dims = [0] gather_dim = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
  %1 = spmd.wait %0 : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}
