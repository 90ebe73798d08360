// One SGD training step (lr 0.1) of Linear(16, 32) -> ReLU -> Linear(32, 8)
// with loss = output.sum(), on a batch of 4: the graph PyTorch 1.13's tracer
// (make_fx + functionalize) produces, written in the aten dialect. Regenerate
// models like this one with spmd-capture (see README).
//
// Arguments are the parameters (by FQN) and the input batch; results are the
// loss and the updated parameters.
module {
  func.func @train_step(
      %w0: tensor<32x16xf32> {spmd.role = "param", spmd.fqn = "0.weight"},
      %b0: tensor<32xf32> {spmd.role = "param", spmd.fqn = "0.bias"},
      %w2: tensor<8x32xf32> {spmd.role = "param", spmd.fqn = "2.weight"},
      %b2: tensor<8xf32> {spmd.role = "param", spmd.fqn = "2.bias"},
      %x: tensor<4x16xf32> {spmd.role = "input", spmd.fqn = "input.0"})
      -> (tensor<f32> {spmd.role = "loss"},
          tensor<32x16xf32> {spmd.updates = 0}, tensor<32xf32> {spmd.updates = 1},
          tensor<8x32xf32> {spmd.updates = 2}, tensor<8xf32> {spmd.updates = 3}) {
    // Forward.
    %t0 = aten.t %w0 : (tensor<32x16xf32>) -> tensor<16x32xf32> loc("0")
    %h = aten.addmm %b0, %x, %t0 : (tensor<32xf32>, tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32> loc("0")
    %relu = aten.relu %h : (tensor<4x32xf32>) -> tensor<4x32xf32> loc("1")
    %saved = aten.detach %relu : (tensor<4x32xf32>) -> tensor<4x32xf32> loc("1")
    %t2 = aten.t %w2 : (tensor<8x32xf32>) -> tensor<32x8xf32> loc("2")
    %y = aten.addmm %b2, %relu, %t2 : (tensor<8xf32>, tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32> loc("2")
    %loss = aten.sum %y : (tensor<4x8xf32>) -> tensor<f32>
    // Backward.
    %one = aten.ones_like %loss {dtype = f32} : (tensor<f32>) -> tensor<f32>
    %gy = aten.expand %one {size = array<i64: 4, 8>} : (tensor<f32>) -> tensor<4x8xf32>
    %t2t = aten.t %t2 : (tensor<32x8xf32>) -> tensor<8x32xf32>
    %grelu = aten.mm %gy, %t2t : (tensor<4x8xf32>, tensor<8x32xf32>) -> tensor<4x32xf32>
    %gyt = aten.t %gy : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %gw2t = aten.mm %gyt, %relu : (tensor<8x4xf32>, tensor<4x32xf32>) -> tensor<8x32xf32>
    %gw2tt = aten.t %gw2t : (tensor<8x32xf32>) -> tensor<32x8xf32>
    %gb2s = aten.sum.dim_IntList %gy {dim = array<i64: 0>, keepdim = true} : (tensor<4x8xf32>) -> tensor<1x8xf32>
    %gb2 = aten.view %gb2s {size = array<i64: 8>} : (tensor<1x8xf32>) -> tensor<8xf32>
    %gw2 = aten.t %gw2tt : (tensor<32x8xf32>) -> tensor<8x32xf32>
    %saved1 = aten.detach %saved : (tensor<4x32xf32>) -> tensor<4x32xf32>
    %gh = aten.threshold_backward %grelu, %saved1 {threshold = 0 : i64} : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
    %ght = aten.t %gh : (tensor<4x32xf32>) -> tensor<32x4xf32>
    %gw0t = aten.mm %ght, %x : (tensor<32x4xf32>, tensor<4x16xf32>) -> tensor<32x16xf32>
    %gw0tt = aten.t %gw0t : (tensor<32x16xf32>) -> tensor<16x32xf32>
    %gb0s = aten.sum.dim_IntList %gh {dim = array<i64: 0>, keepdim = true} : (tensor<4x32xf32>) -> tensor<1x32xf32>
    %gb0 = aten.view %gb0s {size = array<i64: 32>} : (tensor<1x32xf32>) -> tensor<32xf32>
    %gw0 = aten.t %gw0tt : (tensor<16x32xf32>) -> tensor<32x16xf32>
    // SGD update: p - lr * grad.
    %nw0 = aten.add.Tensor %w0, %gw0 {alpha = -1.000000e-01 : f64} : (tensor<32x16xf32>, tensor<32x16xf32>) -> tensor<32x16xf32>
    %nb0 = aten.add.Tensor %b0, %gb0 {alpha = -1.000000e-01 : f64} : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32>
    %nw2 = aten.add.Tensor %w2, %gw2 {alpha = -1.000000e-01 : f64} : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
    %nb2 = aten.add.Tensor %b2, %gb2 {alpha = -1.000000e-01 : f64} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    return %loss, %nw0, %nb0, %nw2, %nb2 : tensor<f32>, tensor<32x16xf32>, tensor<32xf32>, tensor<8x32xf32>, tensor<8xf32>
  }
}
