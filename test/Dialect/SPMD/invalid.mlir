// RUN: spmd-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{mesh shape must have at least one dim}}
spmd.mesh @m shape = [] names = []

// -----

// expected-error @+1 {{mesh dim 1 has size 0; sizes must be >= 1}}
spmd.mesh @m shape = [2, 0] names = ["a", "b"]

// -----

// expected-error @+1 {{has 1 dim names for a mesh of rank 2}}
spmd.mesh @m shape = [2, 2] names = ["a"]

// -----

// expected-error @+1 {{duplicate mesh dim name 'dp'}}
spmd.mesh @m shape = [2, 2] names = ["dp", "dp"]

// -----

// expected-error @+1 {{mesh dim 0 has an empty name}}
spmd.mesh @m shape = [2] names = [""]

// -----

// Limits (docs/semantics.md): 4096 ranks, 8 mesh dims, 2^26 elements per
// tensor dim.
// expected-error @+1 {{the mesh has more than 4096 ranks (mesh dim 0 has size 2147483648); spmd partitions for at most 4096}}
spmd.mesh @m shape = [2147483648] names = ["dp"]

// -----

// expected-error @+1 {{the mesh has more than 4096 ranks (mesh dim 1 has size 9223372036854775807)}}
spmd.mesh @m shape = [2, 9223372036854775807] names = ["dp", "tp"]

// -----

// expected-error @+1 {{the mesh has 9 dims; spmd supports at most 8}}
spmd.mesh @m shape = [1, 1, 1, 1, 1, 1, 1, 1, 2] names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"]

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
// expected-error @+1 {{tensor dim 0 has 4294967296 elements; spmd partitions dims of at most 2^26 (67108864)}}
func.func @huge_dim(%x: tensor<4294967296xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) {
  return
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
// expected-error @+1 {{the tensor has more than 2^40 elements (dims 0..2 already hold 2251799813685248)}}
func.func @huge_tensor(%x: tensor<65536x65536x524288xf32> {spmd.layout = #spmd.layout<@mesh, [replicate]>}) {
  return
}

// -----

// expected-error @+1 {{shard dim must be non-negative, got -1}}
func.func @f() attributes {p = #spmd.shard<-1>} { return }

// -----

// expected-error @+1 {{strided_shard split_factor must be >= 1, got 0}}
func.func @f() attributes {p = #spmd.strided_shard<0, 0>} { return }

// -----

// expected-error @+1 {{expected a placement (shard, strided_shard, replicate or partial), got 'sharded'}}
func.func @f() attributes {p = #spmd.layout<@m, [sharded<0>]>} { return }

// -----

// expected-error @+2 {{expected ::spmd::ReduceKind to be one of: sum, avg, max, min}}
// expected-error @+1 {{failed to parse SPMD_PartialAttr parameter 'reduce'}}
func.func @f() attributes {p = #spmd.partial<prod>} { return }

// -----

// expected-error @+1 {{layout needs one placement per mesh dim, got none}}
func.func @f() attributes {p = #spmd.layout<@m, []>} { return }

// -----

spmd.mesh @mesh shape = [2, 2] names = ["dp", "tp"]
// expected-error @+1 {{'spmd.layout' on argument #0: layout #spmd.layout<@mesh, [shard<0>]> does not fit 'tensor<8x4xf32>' on mesh @mesh: expected one placement per mesh dim: got 1 placements for a mesh of rank 2}}
func.func @f(%arg0: tensor<8x4xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) { return }

// -----

spmd.mesh @mesh shape = [2, 2] names = ["dp", "tp"]
// expected-error-re @+1 {{'spmd.layout' on argument #0: layout {{.*}} does not fit 'tensor<8x4xf32>' on mesh @mesh: {{.*}}dim 2{{.*}}}}
func.func @f(%arg0: tensor<8x4xf32> {spmd.layout = #spmd.layout<@mesh, [shard<0>, shard<2>]>}) { return }

// -----

// expected-error @+1 {{'@nomesh' does not reference a valid spmd.mesh}}
func.func @f(%arg0: tensor<8x4xf32> {spmd.layout = #spmd.layout<@nomesh, [shard<0>]>}) { return }

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
// expected-error @+1 {{'spmd.layout' on result #0: expected a ranked tensor, got 'f32'}}
func.func @f(%arg0: f32) -> (f32 {spmd.layout = #spmd.layout<@mesh, [shard<0>]>}) { return %arg0 : f32 }

// -----

// expected-error @+1 {{'spmd.role' on argument #0: expected one of param, buffer, optim_state, grad, lr, step, hyperparameter, input, target, got "weights"}}
func.func @f(%arg0: tensor<4xf32> {spmd.role = "weights"}) { return }

// -----

// expected-error @+1 {{'spmd.updates' on result #0: expected the index of an argument, got 3 : i64}}
func.func @f(%arg0: tensor<4xf32>) -> (tensor<4xf32> {spmd.updates = 3}) { return %arg0 : tensor<4xf32> }

// -----

// expected-error @+1 {{'spmd.updates' on result #0: updates argument #0 of type 'tensor<4xf32>', but the result has type 'tensor<5xf32>'}}
func.func @f(%arg0: tensor<4xf32>, %arg1: tensor<5xf32>) -> (tensor<5xf32> {spmd.updates = 0}) { return %arg1 : tensor<5xf32> }

// -----

// expected-error @+1 {{'spmd.fqn' on argument #0: expected a string, got 1 : i64}}
func.func @f(%arg0: tensor<4xf32> {spmd.fqn = 1}) { return }

// -----

// expected-error @+1 {{'spmd.colour' on argument #0: unknown spmd attribute}}
func.func @f(%arg0: tensor<4xf32> {spmd.colour = 1}) { return }

// -----

func.func @f(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'aten.relu' op 'spmd.module': expected a string, got 1 : i64}}
  %0 = aten.relu %arg0 {spmd.module = 1, spmd.phase = "forward"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'aten.relu' op 'spmd.phase': expected one of forward, loss, backward, optimizer, got "forwards"}}
  %0 = aten.relu %arg0 {spmd.module = "fc1", spmd.phase = "forwards"} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'aten.relu' op 'spmd.replicated' must be a unit attribute}}
  %0 = aten.relu %arg0 {spmd.replicated = true} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @f(%arg0: tensor<4xf32>) {
  // expected-error @+1 {{'aten.relu' op 'spmd.phase': expected one of forward, loss, backward, optimizer, got 0 : i64}}
  %0 = aten.relu %arg0 {spmd.phase = 0} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

spmd.mesh @a shape = [2] names = ["dp"]
spmd.mesh @b shape = [2] names = ["dp"]
func.func @f(%arg0: tensor<8xf32>) {
  // expected-error @+1 {{redistributes between different meshes (@a and @b)}}
  %0 = spmd.redistribute %arg0 : tensor<8xf32> from #spmd.layout<@a, [shard<0>]> to #spmd.layout<@b, [replicate]>
  return
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @f(%arg0: tensor<8xf32>) {
  // expected-error @+1 {{'to' layout #spmd.layout<@mesh, [shard<1>]> does not fit 'tensor<8xf32>' on mesh @mesh}}
  %0 = spmd.redistribute %arg0 : tensor<8xf32> from #spmd.layout<@mesh, [shard<0>]> to #spmd.layout<@mesh, [shard<1>]>
  return
}

// -----

func.func @f(%arg0: tensor<8xf32>) {
  // expected-error @+1 {{'@missing' does not reference a valid spmd.mesh}}
  %0 = spmd.all_reduce %arg0 on @missing mesh_dims = [0] reduce = sum : tensor<8xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<8xf32>) {
  // expected-error @+1 {{mesh dim 2 is out of range for mesh @mesh of rank 2}}
  %0 = spmd.all_reduce %arg0 on @mesh mesh_dims = [2] reduce = sum : tensor<8xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<8xf32>) {
  // expected-error @+1 {{mesh dim 0 appears twice}}
  %0 = spmd.all_reduce %arg0 on @mesh mesh_dims = [0, 0] reduce = sum : tensor<8xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<8xf32>) {
  // expected-error @+1 {{needs at least one mesh dim}}
  %0 = spmd.all_reduce %arg0 on @mesh mesh_dims = [] reduce = sum : tensor<8xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<2x3xf32>) {
  // expected-error @+1 {{expected result shape [16, 3] for a group of 8 ranks, got 'tensor<8x3xf32>'}}
  %0 = spmd.all_gather %arg0 on @mesh mesh_dims = [0, 1] gather_dim = 0 : tensor<2x3xf32> -> tensor<8x3xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<2x3xf32>) {
  // expected-error @+1 {{tensor dim 2 is out of range for rank 2}}
  %0 = spmd.all_gather %arg0 on @mesh mesh_dims = [0] gather_dim = 2 : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<2x3xf32>) {
  // expected-error @+1 {{element type changes from 'f32' to 'bf16'}}
  %0 = spmd.all_gather %arg0 on @mesh mesh_dims = [0] gather_dim = 0 : tensor<2x3xf32> -> tensor<4x3xbf16>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<2x3xf32>) {
  // expected-error @+1 {{rank changes from 2 to 1}}
  %0 = spmd.all_gather %arg0 on @mesh mesh_dims = [0] gather_dim = 0 : tensor<2x3xf32> -> tensor<12xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<6x3xf32>) {
  // expected-error @+1 {{dim 0 of size 6 does not divide evenly over a group of 4 ranks}}
  %0 = spmd.reduce_scatter %arg0 on @mesh mesh_dims = [1] scatter_dim = 0 reduce = sum : tensor<6x3xf32> -> tensor<1x3xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<8x3xf32>) {
  // expected-error @+1 {{expected result shape [4, 3] for a group of 2 ranks, got 'tensor<2x3xf32>'}}
  %0 = spmd.reduce_scatter %arg0 on @mesh mesh_dims = [0] scatter_dim = 0 reduce = sum : tensor<8x3xf32> -> tensor<2x3xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<8x4xf32>) {
  // expected-error @+1 {{expected result shape [32, 1] for a group of 4 ranks, got 'tensor<8x4xf32>'}}
  %0 = spmd.all_to_all %arg0 on @mesh mesh_dims = [1] split_dim = 1 concat_dim = 0 : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<6x4xf32>) {
  // expected-error @+1 {{dim 0 of size 6 does not divide evenly over a group of 4 ranks}}
  %0 = spmd.all_to_all %arg0 on @mesh mesh_dims = [1] split_dim = 0 concat_dim = 0 : tensor<6x4xf32> -> tensor<6x4xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<8x4xf32>) {
  // expected-error @+1 {{root 4 is out of range for a group of 4 ranks}}
  %0 = spmd.broadcast %arg0 on @mesh mesh_dims = [1] root = 4 : tensor<8x4xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<8x4xf32>) {
  // expected-error @+1 {{root must be non-negative, got -1}}
  %0 = spmd.broadcast %arg0 on @mesh mesh_dims = [1] root = -1 : tensor<8x4xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 4] names = ["dp", "tp"]
func.func @f(%arg0: tensor<?x4xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of any type values}}
  %0 = spmd.all_reduce %arg0 on @mesh mesh_dims = [1] reduce = sum : tensor<?x4xf32>
  return
}

// -----

spmd.mesh @mesh shape = [2, 2] names = ["dp", "tp"]
func.func @keep_local_changes_shard(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'spmd.keep_local' op mesh dim 1 changes shard<0> to replicate; only a Partial may become Replicate}}
  %0 = spmd.keep_local %x : tensor<4x4xf32> from #spmd.layout<@mesh, [partial<sum>, shard<0>]> to #spmd.layout<@mesh, [replicate, replicate]>
  return %0 : tensor<4x4xf32>
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @take_table(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'spmd.local_take' op has 3 indices; the mesh has 2 ranks and the result 2 positions along dim 0, so 4 are needed}}
  %0 = spmd.local_take %x on @mesh dim = 0 indices = [0, 1, 2] : tensor<4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @take_index(%x: tensor<4xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{'spmd.local_take' op index 4 is outside [-1, 4)}}
  %0 = spmd.local_take %x on @mesh dim = 0 indices = [0, 4] : tensor<4xf32> -> tensor<1xf32>
  return %0 : tensor<1xf32>
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @take_run(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'spmd.local_take' op run [3, 5) does not fit 2 result positions and 4 input positions}}
  %0 = spmd.local_take %x on @mesh dim = 0 starts = [0, 3] counts = [2, 2] : tensor<4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @take_forms(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'spmd.local_take' op needs either `indices` or `starts` and `counts`}}
  %0 = spmd.local_take %x on @mesh dim = 0 : tensor<4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @take_runs_per_rank(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'spmd.local_take' op has 3 runs; the mesh has 2 ranks, and each needs the same number of runs}}
  %0 = spmd.local_take %x on @mesh dim = 0 starts = [0, 2, 3] counts = [1, 1, 1] : tensor<4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @take_uniform_too_long(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'spmd.local_take' op gives rank 0 runs of 3 positions; the result has 2 along dim 0}}
  %0 = spmd.local_take %x on @mesh dim = 0 starts = [0, 2, 3] counts = [1, 1, 1] uniform : tensor<4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @take_uniform_table(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'spmd.local_take' op is `uniform` without `starts` and `counts`: only runs can be shared by every rank}}
  %0 = spmd.local_take %x on @mesh dim = 0 indices = [0, 1, 2, 3] uniform : tensor<4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

spmd.mesh @mesh shape = [2] names = ["dp"]
func.func @take_runs_too_long(%x: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'spmd.local_take' op gives rank 1 runs of 3 positions; the result has 2 along dim 0}}
  %0 = spmd.local_take %x on @mesh dim = 0 starts = [0, -1, 2, -1] counts = [1, 1, 2, 1] : tensor<4xf32> -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

spmd.mesh @mesh shape = [2, 2] names = ["dp", "tp"]
func.func @constraint_free(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'spmd.sharding_constraint' op free mesh dim 2 is out of range for a layout of 2 mesh dims}}
  %0 = spmd.sharding_constraint %x : tensor<4xf32> to #spmd.layout<@mesh, [replicate, shard<0>]> free [2]
  return %0 : tensor<4xf32>
}

// -----

spmd.mesh @mesh shape = [2] names = ["tp"]
func.func @constraint_fit(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'spmd.sharding_constraint' op layout}}
  %0 = spmd.sharding_constraint %x : tensor<4xf32> to #spmd.layout<@mesh, [shard<1>]>
  return %0 : tensor<4xf32>
}

// -----

func.func @wait_not_collective(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'spmd.wait' op waits for a value that is not the result of a collective in the same block}}
  %0 = spmd.wait %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
