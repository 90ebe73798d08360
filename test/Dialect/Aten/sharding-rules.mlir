// RUN: spmd-opt %s --spmd-test-print-sharding-rules -verify-diagnostics -o /dev/null

// The einsum sharding rules of aten ops (ShardingRuleOpInterface) and the
// strategies they give on one mesh dim.
func.func @rules(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %bias: tensor<6xf32>,
                 %row: tensor<1x8xf32>, %x: tensor<2x4x8xf32>, %y: tensor<2x8x3xf32>) {
  // expected-remark @+1 {{n,mk,kn->mn: [replicate, replicate, replicate -> replicate] [replicate, shard<0>, replicate -> shard<0>] [shard<0>, replicate, shard<1> -> shard<1>] [partial<sum>, shard<1>, shard<0> -> partial<sum>] [partial<sum>, partial<sum>, replicate -> partial<sum>] [partial<sum>, replicate, partial<sum> -> partial<sum>]}}
  %0 = aten.addmm %bias, %a, %b : (tensor<6xf32>, tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  // expected-remark @+1 {{bmk,bkn->bmn: [replicate, replicate -> replicate] [shard<0>, shard<0> -> shard<0>] [shard<1>, replicate -> shard<1>] [replicate, shard<2> -> shard<2>] [shard<2>, shard<1> -> partial<sum>] [partial<sum>, replicate -> partial<sum>] [replicate, partial<sum> -> partial<sum>]}}
  %1 = aten.bmm %x, %y : (tensor<2x4x8xf32>, tensor<2x8x3xf32>) -> tensor<2x4x3xf32>
  // A broadcast dim is never sharded; a sum of partials stays partial.
  // expected-remark @+1 {{ab,1b->ab: [replicate, replicate -> replicate] [shard<0>, replicate -> shard<0>] [shard<1>, shard<1> -> shard<1>] [partial<sum>, partial<sum> -> partial<sum>]}}
  %2 = aten.add.Tensor %a, %row : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  // Nonlinear: no Partial.
  // expected-remark @+1 {{ab->ab: [replicate -> replicate] [shard<0> -> shard<0>] [shard<1> -> shard<1>]}}
  %3 = aten.relu %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // The normalized dim stays whole.
  // expected-remark @+1 {{ab->ab whole b: [replicate -> replicate] [shard<0> -> shard<0>]}}
  %4 = aten._softmax %a {dim = -1 : i64, half_to_float = false} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // Linear in grad_output only.
  // expected-remark @+1 {{ab,ab->ab whole b: [replicate, replicate -> replicate] [shard<0>, shard<0> -> shard<0>] [partial<sum>, replicate -> partial<sum>]}}
  %5 = aten._softmax_backward_data %a, %4 {dim = 1 : i64, input_dtype = f32} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // Reducing a sharded dim gives Partial(sum); keepdim leaves a '1'.
  // expected-remark @+1 {{ab->1b: [replicate -> replicate] [shard<1> -> shard<1>] [shard<0> -> partial<sum>] [partial<sum> -> partial<sum>]}}
  %6 = aten.sum.dim_IntList %a {dim = array<i64: 0>, keepdim = true} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  // expected-remark @+1 {{ab->: [replicate -> replicate] [shard<0> -> partial<sum>] [shard<1> -> partial<sum>] [partial<sum> -> partial<sum>]}}
  %7 = aten.sum %a : (tensor<4x8xf32>) -> tensor<f32>
  // Views have no einsum rule (issue 5: dim-mapping rules).
  // expected-remark @+1 {{no sharding rule}}
  %8 = aten.view %a {size = array<i64: 32>} : (tensor<4x8xf32>) -> tensor<32xf32>
  return
}
