// RUN: spmd-opt %s --spmd-partition -split-input-file -verify-diagnostics

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @not_propagated(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'aten.relu' op has no spmd.layouts: run --spmd-propagate before --spmd-partition}}
  %r = aten.relu %x : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @strided_random(%x: tensor<8x4xf32>) -> (tensor<8x4xf32> {spmd.layout = #spmd.layout<@mesh, [strided_shard<0, 2>]>}) {
  // expected-error @+1 {{'aten.bernoulli.p' op result layout [strided_shard<0, 2>] gives a rank non-contiguous pieces; random ops need Shard placements to draw by global index}}
  %o = aten.bernoulli.p %x {p = 0.5 : f64, spmd.layouts = [#spmd.layout<@mesh, [strided_shard<0, 2>]>]} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %o : tensor<8x4xf32>
}

// -----

// expected-error @+1 {{spmd-partition needs exactly one spmd.mesh, found 2}}
module {
  spmd.mesh @a shape = [2] names = ["dp"]
  spmd.mesh @b shape = [2] names = ["dp"]
}
