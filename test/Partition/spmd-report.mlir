// RUN: spmd-opt %s --spmd-propagate --spmd-partition --spmd-report -o /dev/null | FileCheck %s
// RUN: spmd-opt %s --spmd-propagate --spmd-partition --spmd-report="latency=1e-6 bandwidth=1e9" -o /dev/null | FileCheck %s --check-prefix=MODEL
// RUN: spmd-opt %s --spmd-propagate --spmd-partition --spmd-overlap-collectives --spmd-report -o /dev/null | FileCheck %s --check-prefix=OVERLAP
// RUN: spmd-opt %s --spmd-propagate --spmd-partition --spmd-report="machine=%S/Inputs/machine-4.json" -o /dev/null | FileCheck %s --check-prefix=INTRA
// RUN: spmd-opt %s --spmd-propagate --spmd-partition --spmd-report="machine=%S/Inputs/machine-2.json" -o /dev/null | FileCheck %s --check-prefix=INTER
// RUN: spmd-opt %s --spmd-propagate --spmd-partition --spmd-report="machine=%S/../../bench/machines/h100-grand-teton.json" -o /dev/null | FileCheck %s --check-prefix=H100
// RUN: not spmd-opt %s --spmd-propagate --spmd-partition --spmd-report="machine=%S/Inputs/missing.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not spmd-opt %s --spmd-propagate --spmd-partition --spmd-report="machine=%S/Inputs/machine-no-f32.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOF32
// RUN: not spmd-opt %s --spmd-propagate --spmd-partition --spmd-report="machine=%S/Inputs/machine-bad-latency.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LATENCY

// A data-parallel linear layer: the gradient's Partial stays lazy through
// the (linear) update and is reduced for the replicated result, as is the
// loss.
spmd.mesh @mesh shape = [4] names = ["dp"]
func.func @train_step(%x: tensor<4096x256xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>},
                      %w: tensor<256x256xf32>)
    -> (tensor<f32>, tensor<256x256xf32>) {
  %y = aten.mm %x, %w : (tensor<4096x256xf32>, tensor<256x256xf32>) -> tensor<4096x256xf32>
  %l = aten.sum %y : (tensor<4096x256xf32>) -> tensor<f32>
  %xt = aten.t %x : (tensor<4096x256xf32>) -> tensor<256x4096xf32>
  %ones = aten.ones_like %y : (tensor<4096x256xf32>) -> tensor<4096x256xf32>
  %g = aten.mm %xt, %ones : (tensor<256x4096xf32>, tensor<4096x256xf32>) -> tensor<256x256xf32>
  %u = aten.sub.Tensor %w, %g : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  return %l, %u : tensor<f32>, tensor<256x256xf32>
}

// CHECK: spmd-report: @train_step on @mesh [4]
// CHECK-NEXT: #    collective      phase      mesh dims    bytes/rank    est. us  reason
// CHECK-DAG: {{[0-9]+}} all_reduce - [dp] 4 {{[0-9.]+}} operand 0 of func.return
// CHECK-DAG: {{[0-9]+}} all_reduce - [dp] 262144 {{[0-9.]+}} operand 1 of func.return
// CHECK: total per step: {{[0-9]+}} collectives, 262148 bytes/rank, 22.62 us estimated
// Synchronous collectives: all of their time is exposed.
// CHECK-NOT: overlap
// CHECK: estimated step: {{[0-9.]+}} us (compute {{[0-9.]+}} us, exposed communication 22.62 us)
// CHECK: peak memory per rank: {{[0-9]+}} bytes (arguments 1310720, op results {{[0-9]+}})
// Arguments without spmd.role and ops without spmd.phase count as other.
// CHECK-NEXT: at the peak: parameters 0, optimizer state 0, carried gradients 0, other arguments 1310720, gathered parameters 0, forward results (activations) 0, backward results (gradients) 0, optimizer results 0, other results {{[1-9][0-9]*}} bytes

// The cost model's options: log2(4) rounds x 1 us + 2 x 3/4 x 4 B / 1 GB/s
// for the loss.
// MODEL: all_reduce - [dp] 4 2.01 operand 0 of func.return

// A machine file: the 4 ranks fit a host of 4 (its links: the numbers of
// MODEL), not a host of 2 (across hosts: log2(4) x 10 us + 2 x 3/4 x 4 B /
// 100 MB/s).
// INTRA: all_reduce - [dp] 4 2.01 operand 0 of func.return
// INTRA: machine: test machine, 4 devices per host
// INTRA-NEXT: estimated step: {{[0-9.]+}} us (compute {{[0-9.]+}} us
// INTER: all_reduce - [dp] 4 20.06 operand 0 of func.return
// H100: machine: NVIDIA H100 (96 GB HBM2e, 500 W) on Grand Teton
// MISSING: error: spmd-report: machine file '{{.*}}missing.json': cannot be read
// NOF32: error: spmd-report: machine file '{{.*}}machine-no-f32.json': 'gemm_flops' must be an object of flop/s by element type, with "f32" at least
// LATENCY: error: spmd-report: machine file '{{.*}}machine-bad-latency.json': 'intra_host.latency' must be a positive number

// Asynchronous: the loss's all_reduce runs while the gradient is computed
// (5 ops); the gradient's, last, has nothing to overlap. The link is
// serial, so the exposed time is what neither hides.
// OVERLAP: total per step: 2 collectives, 262148 bytes/rank, 22.62 us estimated
// OVERLAP-NEXT: overlap (asynchronous collectives, spmd.wait):
// OVERLAP-NEXT: #    collective       hidden us exposed us  in flight during
// OVERLAP-NEXT: 1    all_reduce      {{ *}}{{[1-9][0-9.]+}} {{ *}}{{[0-9.]+}}  5 ops
// OVERLAP-NEXT: 2    all_reduce      {{ *}}0.00 {{ *}}12.62  nothing
// OVERLAP-NEXT: estimated step: {{[0-9.]+}} us (compute {{[0-9.]+}} us, exposed communication {{[0-9.]+}} us)
// OVERLAP-NEXT: peak memory per rank:

// A result the kernel does not compute (ATen's output_mask: the input
// gradient of a first convolution) holds no memory: op results are the
// weight gradient's 576 bytes alone.
// CHECK-LABEL: spmd-report: @first_convolution on @mesh [4]
// CHECK: peak memory per rank: 2240 bytes (arguments 1664, op results 576)
func.func @first_convolution(%g: tensor<2x4x3x3xf32>, %x: tensor<2x4x5x5xf32>, %w: tensor<4x4x3x3xf32>) -> tensor<4x4x3x3xf32> {
  %0:2 = aten.convolution_backward %g, %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, output_mask = array<i1: false, true, false>, output_padding = array<i64: 0, 0>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>, transposed = false} : (tensor<2x4x3x3xf32>, tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>) -> (tensor<2x4x5x5xf32>, tensor<4x4x3x3xf32>)
  return %0#1 : tensor<4x4x3x3xf32>
}
