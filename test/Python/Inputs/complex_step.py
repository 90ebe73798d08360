"""spmd.compile on steps with complex values, which spmd carries as real
pairs, each compiled step run next to the same function in eager PyTorch
(one process, the whole batch) for five calls.

  complex_step.py MODE llama DIR  examples/llama.py with rope="complex"
                              (torchtitan's view_as_complex rotary and its
                              complex freqs_cis buffer), AdamW: every loss,
                              the parameters after the last call, the buffer
                              as state_dict() gives it (complex64), sync()
                              into a fresh model, and a checkpoint saved in
                              DIR and loaded into a second compiled step.
                              AdamW's lr is 1e-3: at 1e-2 the step on an
                              element whose gradient is at rounding level
                              takes either sign, with the real rotary too
  complex_step.py MODE batch  a complex batch entry (a spectrum per sample)
                              times a learnable phase and a complex
                              parameter, SGD with momentum: every loss, the
                              parameters (the complex one complex64), sync()
                              with the complex momentum buffer
  complex_step.py misuse      a train_step that returns a complex tensor

MODE is ddp, fsdp or tp (tp with examples/llama.tp.json; batch mode runs
ddp or fsdp).
"""
import copy
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import spmd

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                        "examples")
sys.path.insert(0, EXAMPLES)
import llama  # noqa: E402

PLAN = os.path.join(EXAMPLES, "llama.tp.json")


def lm_step(model, optimizer, tokens, targets):
    loss = llama.next_token_loss(model(tokens), targets)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss


def rel(a, b):
    """The relative distance of a from b, in norm (as grads.py)."""
    return (a - b).norm().item() / max(b.norm().item(), 1e-30)


def verdict(worst, tol=1e-5):
    return "match" if worst <= tol else "DIFFER (%.2g)" % worst


def compare_llama(mode, directory):
    torch.manual_seed(0)
    model = llama.llama(batch=4, rope="complex")[0]
    reference, fresh = copy.deepcopy(model), copy.deepcopy(model)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randint(0, 128, (4, 17), generator=g) for _ in range(5)]
    opt, ref_opt = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (model, reference)]
    step = spmd.compile(parallel_mode=mode, plan=PLAN if mode == "tp" else None)(lm_step)
    worst = 0.0
    for tokens in batches:
        loss = step(model, opt, tokens[:, :-1], tokens[:, 1:])
        ref = lm_step(reference, ref_opt, tokens[:, :-1], tokens[:, 1:])
        worst = max(worst, rel(loss, ref))
    state = step.state_dict()
    params = max(rel(state[n], p.detach()) for n, p in reference.named_parameters())
    name = "layers.0.attention.rotary.freqs_cis"
    buffer = state[name]
    want = dict(reference.named_buffers())[name]
    step.sync(fresh)
    synced = max(rel(p.detach(), q.detach()) for p, q in
                 zip(fresh.parameters(), reference.parameters()))
    synced_buffer = dict(fresh.named_buffers())[name]
    # A checkpoint of the state (the buffer as its pairs) loads into a
    # second compiled step, whose next call continues as the first's.
    step.save(directory)
    again = spmd.compile(parallel_mode=mode, plan=PLAN if mode == "tp" else None)(lm_step)
    again.load(directory)
    tokens = batches[0]
    other = copy.deepcopy(fresh)
    resumed = again(other, torch.optim.AdamW(other.parameters(), lr=1e-3),
                    tokens[:, :-1], tokens[:, 1:])
    ref = lm_step(reference, ref_opt, tokens[:, :-1], tokens[:, 1:])
    if spmd.rank() == 0:
        print("%s llama: losses %s, parameters %s, freqs_cis %s %s %s, synced %s %s, "
              "resumed from a checkpoint %s" % (
                  mode, verdict(worst), verdict(params), buffer.dtype, list(buffer.shape),
                  "equal" if torch.equal(buffer, want) else "DIFFERS",
                  verdict(synced), "equal" if torch.equal(synced_buffer, want) else "DIFFERS",
                  verdict(rel(resumed, ref))))


class Spectral(nn.Module):
    """Each sample's spectrum (complex, [4]) turned by a learnable phase and
    scaled by a complex parameter, then a linear head on its real pairs."""

    def __init__(self):
        super().__init__()
        self.phase = nn.Parameter(torch.randn(4))
        self.scale = nn.Parameter(torch.randn(4, dtype=torch.complex64))
        self.head = nn.Linear(8, 3)

    def forward(self, spectrum):
        turned = spectrum * torch.polar(torch.ones_like(self.phase), self.phase) * self.scale
        return self.head(torch.view_as_real(turned).flatten(1))


def spectral_step(model, optimizer, spectrum, labels):
    loss = F.cross_entropy(model(spectrum), labels)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss


def compare_batch(mode):
    torch.manual_seed(0)
    model = Spectral()
    reference = copy.deepcopy(model)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(5, 4, dtype=torch.complex64, generator=g),
                torch.randint(0, 3, (5,), generator=g)) for _ in range(5)]
    opt, ref_opt = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
                    for m in (model, reference)]
    step = spmd.compile(parallel_mode=mode)(spectral_step)
    worst = 0.0
    for spectrum, labels in batches:
        worst = max(worst, rel(step(model, opt, spectrum, labels),
                               spectral_step(reference, ref_opt, spectrum, labels)))
    state = step.state_dict()
    params = max(rel(state[n], p.detach()) for n, p in reference.named_parameters())
    step.sync(model, opt)
    synced = max(rel(p.detach(), q.detach()) for p, q in
                 zip(model.parameters(), reference.parameters()))
    moments = rel(opt.state[model.scale]["momentum_buffer"],
                  ref_opt.state[reference.scale]["momentum_buffer"])
    if spmd.rank() == 0:
        print("%s complex batch: losses %s, parameters %s (scale %s), synced %s, the complex "
              "parameter's momentum %s, the batch %s" % (
                  mode, verdict(worst), verdict(params), state["scale"].dtype,
                  verdict(synced), verdict(moments), step.layouts()["input.0"]))


def misuse():
    torch.manual_seed(0)
    model = Spectral()

    def returns_complex(model, optimizer, spectrum, labels):
        turned = spectrum * torch.polar(torch.ones_like(model.phase), model.phase)
        loss = F.cross_entropy(model.head(torch.view_as_real(turned).flatten(1)), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss, turned

    step = spmd.compile(parallel_mode="ddp")(returns_complex)
    try:
        step(model, torch.optim.SGD(model.parameters(), lr=0.1),
             torch.randn(4, 4, dtype=torch.complex64), torch.randint(0, 3, (4,)))
    except spmd.SpmdError as e:
        if spmd.rank() == 0:
            print("SpmdError: %s" % e)


if __name__ == "__main__":
    if sys.argv[1] == "misuse":
        misuse()
    elif sys.argv[2] == "llama":
        compare_llama(sys.argv[1], sys.argv[3])
    else:
        compare_batch(sys.argv[1])
