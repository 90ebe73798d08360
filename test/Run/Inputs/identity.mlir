// A step with no aten op: it returns its (row-sharded) argument.
spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @train_step(%x: tensor<3x3xf32> {spmd.fqn = "input.0", spmd.role = "input", spmd.layout = #spmd.layout<@mesh, [shard<0>]>})
    -> (tensor<3x3xf32> {spmd.fqn = "input.0", spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) {
  return %x : tensor<3x3xf32>
}
