// x [4, 6] on a 2x2 mesh as [shard<0>, shard<1>] (2x3 per rank). y: an
// all_to_all over "tp" (split rows, concatenate columns) turns the column
// blocks into whole rows, nested row shards [shard<0>, shard<0>] of x; g:
// all_gathers over both mesh dims give x back, replicated.
spmd.mesh @mesh shape = [2, 2] names = ["dp", "tp"]
func.func @train_step(%x: tensor<2x3xf32> {spmd.fqn = "x", spmd.role = "input", spmd.layout = #spmd.layout<@mesh, [shard<0>, shard<1>]>})
    -> (tensor<1x6xf32> {spmd.fqn = "y", spmd.layout = #spmd.layout<@mesh, [shard<0>, shard<0>]>},
        tensor<4x6xf32> {spmd.fqn = "g"}) {
  %rows = spmd.all_gather %x on @mesh mesh_dims = [0] gather_dim = 0 : tensor<2x3xf32> -> tensor<4x3xf32>
  %full = spmd.all_gather %rows on @mesh mesh_dims = [1] gather_dim = 1 : tensor<4x3xf32> -> tensor<4x6xf32>
  %y = spmd.all_to_all %x on @mesh mesh_dims = [1] split_dim = 0 concat_dim = 1 : tensor<2x3xf32> -> tensor<1x6xf32>
  return %y, %full : tensor<1x6xf32>, tensor<4x6xf32>
}
