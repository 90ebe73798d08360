// sum.mlir with no FQN on the doubled input: spmd-run names its --out file
// after the bundle's FQN.
spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @train_step(%x: tensor<3x3xf32> {spmd.fqn = "input.0", spmd.role = "input", spmd.layout = #spmd.layout<@mesh, [shard<0>]>})
    -> (tensor<f32> {spmd.role = "loss"}, tensor<3x3xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) {
  %s = aten.sum %x : (tensor<3x3xf32>) -> tensor<f32>
  %r = spmd.all_reduce %s on @mesh mesh_dims = [0] reduce = sum : tensor<f32>
  %d = aten.mul.Scalar %x {other = 2 : i64} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  return %r, %d : tensor<f32>, tensor<3x3xf32>
}
