// An out-of-tree ParallelMode loaded as an MLIR pass plugin
// (test/lib/ModePlugin): spmd-opt lists it among the modes and runs it.
// RUN: spmd-opt %s --load-pass-plugin=%spmd_obj_root/lib/SPMDTestModePlugin.so --spmd-parallelize="mode=test-replicate mesh=2" | FileCheck %s
// RUN: not spmd-opt %s --spmd-parallelize="mode=test-replicate mesh=2" 2>&1 | FileCheck %s --check-prefix=ABSENT

// CHECK: module attributes {spmd.test_plugin_mode}
// CHECK: spmd.mesh @mesh shape = [2] names = ["world"]
// CHECK: aten.mm {{.*}} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NOT: spmd.all_
// ABSENT: error: spmd-parallelize: unknown mode 'test-replicate'; registered modes: ddp, fsdp
func.func @train_step(%x: tensor<8x8xf32> {spmd.fqn = "x", spmd.role = "input"},
                      %w: tensor<8x8xf32> {spmd.fqn = "w", spmd.role = "param"})
    -> tensor<8x8xf32> {
  %y = aten.mm %x, %w : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
