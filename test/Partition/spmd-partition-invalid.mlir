// RUN: spmd-opt %s --spmd-partition -split-input-file -verify-diagnostics

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @not_propagated(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // expected-error @+1 {{'aten.relu' op has no spmd.layouts: run --spmd-propagate before --spmd-partition}}
  %r = aten.relu %x : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}

// -----

// A StridedShard of uneven pieces (9 rows as 3 pieces of 3 on 2 ranks: 2
// and 1 rows of each) gives the ranks boxes of different shapes, which no
// single per-rank program can draw.
spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @strided_random(%x: tensor<9x4xf32> {spmd.layout = #spmd.layout<@mesh, [strided_shard<0, 3>]>}) -> (tensor<9x4xf32> {spmd.layout = #spmd.layout<@mesh, [strided_shard<0, 3>]>}) {
  // expected-error @+1 {{'aten.bernoulli.p' op result layout [strided_shard<0, 3>] gives ranks pieces of different structure; random ops draw by global index}}
  %o = aten.bernoulli.p %x {p = 0.5 : f64, spmd.layouts = [#spmd.layout<@mesh, [strided_shard<0, 3>]>]} : (tensor<9x4xf32>) -> tensor<9x4xf32>
  return %o : tensor<9x4xf32>
}

// -----

// expected-error @+1 {{spmd-partition needs exactly one spmd.mesh, found 2}}
module {
  spmd.mesh @a shape = [2] names = ["dp"]
  spmd.mesh @b shape = [2] names = ["dp"]
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
// expected-error @+1 {{spmd-partition: 'tensor<4294967296xf32>' is too large: tensor dim 0 has 4294967296 elements}}
func.func @too_large(%x: tensor<4294967296xf32>) -> tensor<4294967296xf32> {
  return %x : tensor<4294967296xf32>
}
