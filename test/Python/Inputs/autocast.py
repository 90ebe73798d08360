"""spmd.compile of a step that computes under torch.autocast("cpu",
dtype=torch.bfloat16), PyTorch's own mixed precision: the Linears run in
bf16 on bf16 casts of the fp32 parameters, a LayerNorm takes their bf16
output with its fp32 weight (ATen's mixed-type kernel), and the gradients
and the AdamW update are fp32. Each compiled step runs next to the same
function in eager PyTorch (one process, the whole batch) for five calls.

  autocast.py MODE mlp    Linear, LayerNorm, ReLU, Linear (tp: without the
                          LayerNorm, mlp.tp.json beside this file)
  autocast.py MODE gpt2   GPT2LMHeadModel from a small config, its loss

Prints whether the step returned its bf16 logits as bf16 (autocast was
traced), and whether every call's loss and the parameters after the last
(over the whole model) are as close to eager's as bf16 allows: on one rank,
within half the distance between eager with and without autocast, so that a
step that ignored autocast (computed in fp32) fails; sharded, within that
distance, since each rank's partial products over the shards are rounded to
bf16 before the ranks sum them (as PyTorch's DDP reduces each rank's bf16
gradients), which eager's one rounding of the whole sum does not do. SGD
with momentum keeps the update linear in the gradients (Adam's first steps
turn a rounding-sized gradient into a full-size update of either sign).
"""
import copy
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

import spmd

PLAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp.tp.json")


def model_and_data(mode, case):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    if case == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(
            vocab_size=128, n_positions=32, n_embd=64, n_layer=2, n_head=4, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0))
        ids = [torch.randint(0, 128, (6, 16), generator=g) for _ in range(5)]
        return model, [(i, i) for i in ids]
    layers = [nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 3)]
    if mode != "tp":
        layers.insert(1, nn.LayerNorm(32))
    batches = [(torch.randn(12, 6, generator=g), torch.randint(0, 3, (12,), generator=g))
               for _ in range(5)]
    return nn.Sequential(*layers), batches


def step_of(case, autocast=True):
    def step(model, optimizer, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            if case == "gpt2":
                out = model(input_ids=x, labels=y)
                loss, logits = out.loss, out.logits
            else:
                logits = model(x)
                loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss, logits
    return step


def train(step, model, batches):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return [step(model, optimizer, x, y) for x, y in batches]


def main(mode, case):
    model, batches = model_and_data(mode, case)
    eager, other = copy.deepcopy(model), copy.deepcopy(model)
    # What bf16 allows: on one rank, half the distance between eager with
    # and without autocast; sharded, that whole distance (each rank's partial
    # products over the batch or the features are rounded to bf16 before
    # the ranks sum them, as DDP's bf16 gradients are).
    share = 2 if spmd.world_size() == 1 else 1
    compiled = spmd.compile(parallel_mode=mode, plan=PLAN if mode == "tp" else None)(
        step_of(case))
    got = train(lambda *a: compiled(*a), model, batches)
    want = train(step_of(case), eager, batches)
    beside = train(step_of(case, autocast=False), other, batches)
    state, others = compiled.state_dict(), dict(other.named_parameters())

    def loss_distance(a):
        return max(abs(x[0].item() - y[0].item()) / abs(y[0].item()) for x, y in zip(a, want))

    def param_distance(theirs):
        # Over the whole model: attention's key bias takes no gradient but
        # rounding noise, which AdamW turns into updates of order lr on
        # either side.
        return (torch.stack([(theirs[n] - p).norm() for n, p in eager.named_parameters()]).norm()
                / torch.stack([p.norm() for _, p in eager.named_parameters()]).norm()).item()

    def verdict(distance, bound):
        return "as close as bf16 allows" if distance <= bound else \
            "TOO FAR (%.2g, bound %.2g)" % (distance, bound)
    losses = verdict(loss_distance(got), loss_distance(beside) / share)
    params = verdict(param_distance(state), param_distance(others) / share)
    if spmd.rank() == 0:
        print("%s %s: logits %s, losses %s, parameters %s" % (
            mode, case, str(got[0][1].dtype).replace("torch.", ""), losses, params))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
