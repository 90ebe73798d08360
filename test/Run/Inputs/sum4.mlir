// The [5, 3] input of sum.mlir on 4 ranks: torch.chunk gives 2, 2, 1 and 0
// rows, so rank 3 holds an empty shard; the local type is padded to 2 rows.
// The doubled input updates the input: step k returns input * 2^k.
spmd.mesh @mesh shape = [4] names = ["dp"]
func.func @train_step(%x: tensor<2x3xf32> {spmd.fqn = "input.0", spmd.role = "input", spmd.layout = #spmd.layout<@mesh, [shard<0>]>})
    -> (tensor<f32> {spmd.role = "loss"}, tensor<2x3xf32> {spmd.fqn = "input.0", spmd.updates = 0, spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) {
  %s = aten.sum %x : (tensor<2x3xf32>) -> tensor<f32>
  %r = spmd.all_reduce %s on @mesh mesh_dims = [0] reduce = sum : tensor<f32>
  %d = aten.mul.Scalar %x {other = 2 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %r, %d : tensor<f32>, tensor<2x3xf32>
}
