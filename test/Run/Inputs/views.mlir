// Collectives on a view of the program's mesh (fsdp's post-forward mesh
// `mesh.view(-1, 2)`): each rank's rows of x are gathered within its pair
// of ranks (@pairs dim 1), then across the pairs (@pairs dim 0), which gives
// x whole on every rank.
spmd.mesh @mesh shape = [4] names = ["dp"]
spmd.mesh @pairs shape = [2, 2] names = ["dp_replicate", "dp_shard"]
func.func @train_step(%x: tensor<2x3xf32> {spmd.fqn = "x", spmd.role = "input", spmd.layout = #spmd.layout<@mesh, [shard<0>]>})
    -> (tensor<8x3xf32> {spmd.fqn = "y", spmd.layout = #spmd.layout<@mesh, [replicate]>}) {
  %0 = spmd.all_gather %x on @pairs mesh_dims = [1] gather_dim = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
  %1 = spmd.all_gather %0 on @pairs mesh_dims = [0] gather_dim = 0 : tensor<4x3xf32> -> tensor<8x3xf32>
  return %1 : tensor<8x3xf32>
}
