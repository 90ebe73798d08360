// RUN: spmd-opt %s --spmd-overlap-collectives -split-input-file | FileCheck %s
// RUN: spmd-opt %s --spmd-overlap-collectives="max-in-flight=2" -split-input-file | FileCheck %s --check-prefix=TWO
// The pass is idempotent: a second run keeps the first one's schedule.
// RUN: spmd-opt %s --spmd-overlap-collectives --spmd-overlap-collectives -split-input-file | FileCheck %s
// RUN: not spmd-opt %s --spmd-overlap-collectives="max-in-flight=0" -split-input-file 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: spmd-overlap-collectives: max-in-flight must be at least 1

// Three FSDP-like units: each gathers its parameter, then computes with it.
// With one gather in flight, unit i+1's gather (and the clone it gathers)
// starts right after unit i's wait, so it runs while unit i computes.
spmd.mesh @mesh shape = [2] names = ["dp"]
// CHECK-LABEL: func.func @prefetch
// CHECK-NEXT: %[[C0:.*]] = aten.clone %arg1
// CHECK-NEXT: %[[G0:.*]] = spmd.all_gather %[[C0]]
// CHECK-NEXT: %[[W0:.*]] = spmd.wait %[[G0]]
// CHECK-NEXT: %[[C1:.*]] = aten.clone %arg2
// CHECK-NEXT: %[[G1:.*]] = spmd.all_gather %[[C1]]
// CHECK-NEXT: %[[Y0:.*]] = aten.mm %arg0, %[[W0]]
// CHECK-NEXT: %[[R0:.*]] = aten.relu %[[Y0]]
// CHECK-NEXT: %[[W1:.*]] = spmd.wait %[[G1]]
// CHECK-NEXT: %[[C2:.*]] = aten.clone %arg3
// CHECK-NEXT: %[[G2:.*]] = spmd.all_gather %[[C2]]
// CHECK-NEXT: %[[Y1:.*]] = aten.mm %[[R0]], %[[W1]]
// CHECK-NEXT: %[[R1:.*]] = aten.relu %[[Y1]]
// CHECK-NEXT: %[[W2:.*]] = spmd.wait %[[G2]]
// CHECK-NEXT: %[[Y2:.*]] = aten.mm %[[R1]], %[[W2]]
// CHECK-NEXT: return %[[Y2]]

// With two in flight, the first two gathers start at once and the third
// after the first one's wait.
// TWO-LABEL: func.func @prefetch
// TWO-NEXT: aten.clone %arg1
// TWO-NEXT: %[[G0:.*]] = spmd.all_gather
// TWO-NEXT: aten.clone %arg2
// TWO-NEXT: %[[G1:.*]] = spmd.all_gather
// TWO-NEXT: spmd.wait %[[G0]]
// TWO-NEXT: aten.clone %arg3
// TWO-NEXT: %[[G2:.*]] = spmd.all_gather
// TWO-NEXT: aten.mm
// TWO-NEXT: aten.relu
// TWO-NEXT: spmd.wait %[[G1]]
func.func @prefetch(%x: tensor<4x8xf32>, %p0: tensor<4x8xf32>, %p1: tensor<4x8xf32>, %p2: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %c0 = aten.clone %p0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g0 = spmd.all_gather %c0 on @mesh mesh_dims = [0] gather_dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %y0 = aten.mm %x, %g0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r0 = aten.relu %y0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c1 = aten.clone %p1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g1 = spmd.all_gather %c1 on @mesh mesh_dims = [0] gather_dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %y1 = aten.mm %r0, %g1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r1 = aten.relu %y1 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c2 = aten.clone %p2 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g2 = spmd.all_gather %c2 on @mesh mesh_dims = [0] gather_dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %y2 = aten.mm %r1, %g2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %y2 : tensor<4x8xf32>
}

// -----

// Reductions have their own window: the second reduce_scatter waits for the
// first one, which runs meanwhile with the compute between them. Each class
// starts as early as it can, so the gather that the program issues after the
// first reduce_scatter runs alongside it.
spmd.mesh @mesh shape = [2] names = ["dp"]
// CHECK-LABEL: func.func @classes
// CHECK-NEXT: %[[A:.*]] = aten.relu %arg0
// CHECK-NEXT: %[[RS0:.*]] = spmd.reduce_scatter %[[A]]
// CHECK-NEXT: %[[G:.*]] = spmd.all_gather %arg2
// CHECK-NEXT: %[[B:.*]] = aten.relu %arg1
// CHECK-NEXT: %[[WG:.*]] = spmd.wait %[[G]]
// CHECK-NEXT: %[[M:.*]] = aten.mul.Tensor %[[B]], %[[WG]]
// CHECK-NEXT: %[[W0:.*]] = spmd.wait %[[RS0]]
// CHECK-NEXT: %[[RS1:.*]] = spmd.reduce_scatter %[[M]]
// CHECK-NEXT: %[[W1:.*]] = spmd.wait %[[RS1]]
// CHECK-NEXT: %[[S:.*]] = aten.add.Tensor %[[W0]], %[[W1]]
func.func @classes(%a: tensor<8xf32>, %b: tensor<8xf32>, %p: tensor<4xf32>) -> tensor<4xf32> {
  %a1 = aten.relu %a : (tensor<8xf32>) -> tensor<8xf32>
  %rs0 = spmd.reduce_scatter %a1 on @mesh mesh_dims = [0] scatter_dim = 0 reduce = sum : tensor<8xf32> -> tensor<4xf32>
  %b1 = aten.relu %b : (tensor<8xf32>) -> tensor<8xf32>
  %g = spmd.all_gather %p on @mesh mesh_dims = [0] gather_dim = 0 : tensor<4xf32> -> tensor<8xf32>
  %m = aten.mul.Tensor %b1, %g : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %rs1 = spmd.reduce_scatter %m on @mesh mesh_dims = [0] scatter_dim = 0 reduce = sum : tensor<8xf32> -> tensor<4xf32>
  %s = aten.add.Tensor %rs0, %rs1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// Ops with effects bound the move: the gathered value depends on a random
// op, which stays where it is, so the gather starts right after it (and
// passes the all_reduce it does not depend on). A collective whose result
// is unused stays synchronous (no wait).
spmd.mesh @mesh shape = [2] names = ["dp"]
// CHECK-LABEL: func.func @barrier
// CHECK-NEXT: aten.relu %arg0
// CHECK-NEXT: %[[D:.*]] = aten.bernoulli.p %arg1
// CHECK-NEXT: %[[V:.*]] = aten.relu %[[D]]
// CHECK-NEXT: %[[G:.*]] = spmd.all_gather %[[V]]
// CHECK-NEXT: spmd.all_reduce %arg0
// CHECK-NEXT: %[[W:.*]] = spmd.wait %[[G]]
// CHECK-NEXT: return
func.func @barrier(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %r = aten.relu %a : (tensor<4xf32>) -> tensor<4xf32>
  %d = aten.bernoulli.p %b {p = 5.000000e-01 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  %unused = spmd.all_reduce %a on @mesh mesh_dims = [0] reduce = sum : tensor<4xf32>
  %v = aten.relu %d : (tensor<4xf32>) -> tensor<4xf32>
  %g = spmd.all_gather %v on @mesh mesh_dims = [0] gather_dim = 0 : tensor<4xf32> -> tensor<8xf32>
  return %r, %g : tensor<4xf32>, tensor<8xf32>
}

// -----

// A DDP bucket: its split sits right after the all_reduce. The split moves
// down to its first use, and the wait with it, so the bucket runs while
// the compute in between does.
spmd.mesh @mesh shape = [2] names = ["dp"]
// CHECK-LABEL: func.func @bucket
// CHECK-NEXT: %[[C:.*]] = aten.cat %arg0, %arg1
// CHECK-NEXT: %[[R:.*]] = spmd.all_reduce %[[C]]
// CHECK-NEXT: %[[Y:.*]] = aten.relu %arg2
// CHECK-NEXT: %[[W:.*]] = spmd.wait %[[R]]
// CHECK-NEXT: %[[S:.*]]:2 = aten.split_with_sizes %[[W]]
// CHECK-NEXT: aten.add.Tensor %[[S]]#0, %[[Y]]
func.func @bucket(%g0: tensor<4xf32>, %g1: tensor<4xf32>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c = aten.cat %g0, %g1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  %r = spmd.all_reduce %c on @mesh mesh_dims = [0] reduce = sum : tensor<8xf32>
  %s:2 = aten.split_with_sizes %r {split_sizes = array<i64: 4, 4>} : (tensor<8xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %y = aten.relu %x : (tensor<4xf32>) -> tensor<4xf32>
  %a = aten.add.Tensor %s#0, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %a, %s#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// A collective with a wait and another use is synchronous; the pass makes
// it asynchronous with a wait of its own and keeps the one that was there.
spmd.mesh @mesh shape = [2] names = ["dp"]
// CHECK-LABEL: func.func @mixed
// CHECK-NEXT: %[[R:.*]] = spmd.all_reduce %arg0
// CHECK-NEXT: %[[NEW:.*]] = spmd.wait %[[R]]
// CHECK-NEXT: %[[OLD:.*]] = spmd.wait %[[R]]
// CHECK-NEXT: aten.add.Tensor %[[NEW]], %[[OLD]]
func.func @mixed(%a: tensor<4xf32>) -> tensor<4xf32> {
  %r = spmd.all_reduce %a on @mesh mesh_dims = [0] reduce = sum : tensor<4xf32>
  %w = spmd.wait %r : tensor<4xf32>
  %s = aten.add.Tensor %r, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}
