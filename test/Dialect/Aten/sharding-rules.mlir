// RUN: spmd-opt %s --spmd-test-print-sharding-rules -verify-diagnostics -o /dev/null

// The einsum sharding rules of aten ops (ShardingRuleOpInterface) and the
// strategies they give on one mesh dim.
func.func @rules(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %bias: tensor<6xf32>,
                 %row: tensor<1x8xf32>, %x: tensor<2x4x8xf32>, %y: tensor<2x8x3xf32>) {
  // expected-remark @+1 {{n,mk,kn->mn: [replicate, replicate, replicate -> replicate] [replicate, shard<0>, replicate -> shard<0>] [shard<0>, replicate, shard<1> -> shard<1>] [partial<sum>, shard<1>, shard<0> -> partial<sum>] [partial<sum>, partial<sum>, replicate -> partial<sum>] [partial<sum>, replicate, partial<sum> -> partial<sum>]}}
  %0 = aten.addmm %bias, %a, %b : (tensor<6xf32>, tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  // expected-remark @+1 {{bmk,bkn->bmn: [replicate, replicate -> replicate] [shard<0>, shard<0> -> shard<0>] [shard<1>, replicate -> shard<1>] [replicate, shard<2> -> shard<2>] [shard<2>, shard<1> -> partial<sum>] [partial<sum>, replicate -> partial<sum>] [replicate, partial<sum> -> partial<sum>]}}
  %1 = aten.bmm %x, %y : (tensor<2x4x8xf32>, tensor<2x8x3xf32>) -> tensor<2x4x3xf32>
  // A cast rounds each value: Partial is reduced before it.
  // expected-remark @+1 {{ab->ab: [replicate -> replicate] [shard<0> -> shard<0>] [shard<1> -> shard<1>]}}
  %cast = aten._to_copy %a {dtype = bf16} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  // A broadcast dim is never sharded; a sum of partials stays partial.
  // expected-remark @+1 {{ab,1b->ab: [replicate, replicate -> replicate] [shard<0>, replicate -> shard<0>] [shard<1>, shard<1> -> shard<1>] [partial<sum>, partial<sum> -> partial<sum>]}}
  %2 = aten.add.Tensor %a, %row : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  // Nonlinear: no Partial.
  // expected-remark @+1 {{ab->ab: [replicate -> replicate] [shard<0> -> shard<0>] [shard<1> -> shard<1>]}}
  %3 = aten.relu %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // expected-remark @+1 {{ab->ab: [replicate -> replicate] [shard<0> -> shard<0>] [shard<1> -> shard<1>]}}
  %abs = aten.abs %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // expected-remark @+1 {{ab->ab: [replicate -> replicate] [shard<0> -> shard<0>] [shard<1> -> shard<1>]}}
  %pow = aten.pow.Tensor_Scalar %a {exponent = 2.0 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // expected-remark @+1 {{ab->ab: [replicate -> replicate] [shard<0> -> shard<0>] [shard<1> -> shard<1>]}}
  %clamp = aten.clamp %a {max = 1.0 : f64} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  // maximum commutes with max: a Partial(max) operand passes, alone or with
  // the other (DTensor's rule).
  // expected-remark @+1 {{ab,1b->ab: [replicate, replicate -> replicate] [shard<0>, replicate -> shard<0>] [shard<1>, shard<1> -> shard<1>] [partial<max>, partial<max> -> partial<max>] [partial<max>, replicate -> partial<max>] [replicate, partial<max> -> partial<max>]}}
  %max = aten.maximum %a, %row : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
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
  // amax leaves Partial(max) and carries one through.
  // expected-remark @+1 {{ab->a: [replicate -> replicate] [shard<0> -> shard<0>] [shard<1> -> partial<max>] [partial<max> -> partial<max>]}}
  %amax = aten.amax %a {dim = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  // mean leaves Partial(avg), only over equal shards.
  // expected-remark @+1 {{ab->a even b: [replicate -> replicate] [shard<0> -> shard<0>] [shard<1> -> partial<avg>] [partial<avg> -> partial<avg>]}}
  %mean = aten.mean.dim %a {dim = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  // A view maps groups of dims: a merged or split group shards only its
  // outer dim, evenly; the other dims of the group stay whole.
  // expected-remark @+1 {{ab->a whole b even a: [replicate -> replicate] [shard<0> -> shard<0>] [partial<sum> -> partial<sum>]}}
  %8 = aten.view %a {size = array<i64: 32>} : (tensor<4x8xf32>) -> tensor<32xf32>
  return
}

func.func @more_rules(%x: tensor<2x4x8xf32>, %lp: tensor<4x8xf32>, %t: tensor<4xi64>, %w: tensor<8xf32>, %b: tensor<8xf32>) {
  // expected-remark @+1 {{abc->abcd whole d even c: [replicate -> replicate] [shard<0> -> shard<0>] [shard<1> -> shard<1>] [shard<2> -> shard<2>] [partial<sum> -> partial<sum>]}}
  %0 = aten.view %x {size = array<i64: 2, 4, 2, 4>} : (tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32>
  // expected-remark @+1 {{abc->acb: [replicate -> replicate] [shard<0> -> shard<0>] [shard<2> -> shard<1>] [shard<1> -> shard<2>] [partial<sum> -> partial<sum>]}}
  %1 = aten.transpose.int %x {dim0 = 1 : i64, dim1 = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
  // The batch is contracted: the loss is Partial, the mean's total weight is
  // reduced by the partitioner. So are the classes (loss_parallel: each rank
  // takes the targets it holds).
  // expected-remark @+1 {{nc,n->,: [replicate, replicate -> replicate, replicate] [shard<0>, shard<0> -> partial<sum>, replicate] [shard<1>, replicate -> partial<sum>, replicate]}}
  %2:2 = aten.nll_loss_forward %lp, %t {ignore_index = -100 : i64, reduction = 1 : i64} : (tensor<4x8xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<f32>)
  // expected-remark @+1 {{abt,t,t->abt,ab1,ab1 whole t: [replicate, replicate, replicate -> replicate, replicate, replicate] [shard<0>, replicate, replicate -> shard<0>, shard<0>, shard<0>] [shard<1>, replicate, replicate -> shard<1>, shard<1>, shard<1>]}}
  %3:3 = aten.native_layer_norm %x weight %w bias %b {eps = 1.0e-05 : f64, normalized_shape = array<i64: 8>} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x1xf32>, tensor<2x4x1xf32>)
  return
}

// Attention: batch and heads shard alike everywhere (DTensor's flash
// attention strategy); the lengths and head sizes stay whole; no Partial.
// A mask broadcast over the heads ('1') shards with the batch only.
func.func @attention_rules(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x6x16xf32>, %m: tensor<2x1x8x6xf32>, %lse: tensor<2x4x8xf32>) {
  // expected-remark @+1 {{bhle,bhse,bhsv->bhlv,bhl whole lsev: [replicate, replicate, replicate -> replicate, replicate] [shard<0>, shard<0>, shard<0> -> shard<0>, shard<0>] [shard<1>, shard<1>, shard<1> -> shard<1>, shard<1>]}}
  %0:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %k {is_causal = true} : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  // expected-remark @+1 {{bhle,bhse,bhsv,b1ls->bhlv,bhl whole lsev: [replicate, replicate, replicate, replicate -> replicate, replicate] [shard<0>, shard<0>, shard<0>, shard<0> -> shard<0>, shard<0>] [shard<1>, shard<1>, shard<1>, replicate -> shard<1>, shard<1>]}}
  %1:2 = aten._scaled_dot_product_flash_attention_for_cpu %q, %k, %k attn_mask %m : (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>, tensor<2x1x8x6xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8xf32>)
  // expected-remark @+1 {{bhlv,bhle,bhse,bhsv,bhlv,bhl->bhle,bhse,bhsv whole lsev: [replicate, replicate, replicate, replicate, replicate, replicate -> replicate, replicate, replicate] [shard<0>, shard<0>, shard<0>, shard<0>, shard<0>, shard<0> -> shard<0>, shard<0>, shard<0>] [shard<1>, shard<1>, shard<1>, shard<1>, shard<1>, shard<1> -> shard<1>, shard<1>, shard<1>]}}
  %2:3 = aten._scaled_dot_product_flash_attention_for_cpu_backward %q, %q, %k, %k, %q, %lse {dropout_p = 0.0 : f64, is_causal = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x6x16xf32>, tensor<2x4x6x16xf32>)
  return
}
