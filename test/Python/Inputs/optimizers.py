"""spmd.compile with torch.optim's matrix optimizers and with several
optimizers in one step, each compiled step run next to the same function in
eager PyTorch (one process, the whole batch) for five calls: every call's
loss, the parameters and the optimizer state after the last must match.

  optimizers.py MODE muon       torch.optim.Muon for the 2-D weights and
                                AdamW for the rest (biases, a LayerNorm),
                                passed as a list; a LambdaLR schedule on
                                the AdamW only: how many compiles
  optimizers.py MODE muon --report  the same, spmd-report's table first
  optimizers.py MODE muon-fp32  the same with Muon's Newton-Schulz
                                iteration replaced by an fp32 one (patched
                                into torch.optim._muon, as a user would):
                                the compiled step traces the replacement
  optimizers.py MODE dict       Muon (match_rms_adamw) and Adam, passed as a
                                dict, the step stepping them by name
  optimizers.py MODE llama      LlamaForCausalLM (2 layers): Muon
                                (match_rms_adamw) for the attention and MLP
                                matrices, AdamW for the embeddings, the head
                                and the norms; the fp32 iteration patched in
                                (tp with examples/hf_llama.tp.json)
  optimizers.py MODE adafactor  torch.optim.Adafactor (weight decay): its
                                factored second moments, [R, 1] and [1, C]
  optimizers.py resume DIR      the dict case (fp32 iteration) under ddp for
                                3 calls, saved to DIR, resumed under fsdp
                                by a new step and new optimizers for 2 more
  optimizers.py misuse          what spmd.compile refuses, each message

MODE is ddp, fsdp or tp (tp with mlp.tp.json beside this file), and for
llama fsdp-tp on 2x2 too. Under tp the MLP has no LayerNorm (a colwise
output feeds the rowwise layer).
"""
import copy
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import _muon

import spmd
from guard import print_refusals

PLAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp.tp.json")
LLAMA_PLAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                          "examples", "hf_llama.tp.json")


def llama_and_data():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
        tie_word_embeddings=False))
    g = torch.Generator().manual_seed(1)
    ids = [torch.randint(0, 128, (4, 16), generator=g) for _ in range(4)]
    return model, [(i, i) for i in ids]


def model_and_data(mode, case=None):
    if case == "llama":
        return llama_and_data()
    torch.manual_seed(0)
    layers = [nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)]
    if mode != "tp":
        layers.insert(1, nn.LayerNorm(8))
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(12, 6, generator=g), torch.randint(0, 3, (12,), generator=g))
               for _ in range(5)]
    return nn.Sequential(*layers), batches


def fp32_newton_schulz(grad, coefficients, steps, eps):
    """torch.optim._muon._zeropower_via_newtonschulz in fp32."""
    a, b, c = coefficients
    x = grad.to(torch.float32, copy=True)
    wide = grad.size(0) > grad.size(1)
    if wide:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if wide else x


def matrices_and_rest(model):
    return ([p for p in model.parameters() if p.ndim == 2],
            [p for p in model.parameters() if p.ndim != 2])


def optimizers_of(case, model):
    mats, rest = matrices_and_rest(model)
    if case == "llama":
        hidden = {id(p) for n, p in model.named_parameters()
                  if p.ndim == 2 and "embed" not in n and "lm_head" not in n}
        return [torch.optim.Muon([p for p in model.parameters() if id(p) in hidden], lr=0.02,
                                 adjust_lr_fn="match_rms_adamw"),
                torch.optim.AdamW([p for p in model.parameters() if id(p) not in hidden],
                                  lr=3e-3)]
    if case == "adafactor":
        return torch.optim.Adafactor(model.parameters(), lr=0.05, weight_decay=0.01)
    if case == "dict":
        return {"muon": torch.optim.Muon(mats, lr=0.01, adjust_lr_fn="match_rms_adamw"),
                "adam": torch.optim.Adam(rest, lr=3e-3)}
    return [torch.optim.Muon(mats, lr=0.02), torch.optim.AdamW(rest, lr=3e-3)]


def loss_of(model, x, y):
    """The MLP's cross-entropy, or a causal LM's own loss (x the ids)."""
    if isinstance(model, nn.Sequential):
        return F.cross_entropy(model(x), y)
    return model(input_ids=x, labels=y).loss


def step_list(model, optimizers, x, y):
    loss = loss_of(model, x, y)
    loss.backward()
    # Each optimizer's zero_grad right after its step: the next step() sees
    # the .grads the first one cleared as cleared, its own as they are.
    for opt in optimizers:
        opt.step()
        opt.zero_grad()
    return loss


def step_dict(model, optimizers, x, y):
    for opt in optimizers.values():
        opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizers["muon"].step()
    optimizers["adam"].step()
    return loss


def step_one(model, optimizer, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss


def parts(optimizers):
    if isinstance(optimizers, dict):
        return list(optimizers.values())
    return list(optimizers) if isinstance(optimizers, list) else [optimizers]


def compare(mode, case, report=False):
    if case in ("muon-fp32", "llama"):
        _muon._zeropower_via_newtonschulz = fp32_newton_schulz
    fn = {"dict": step_dict, "adafactor": step_one}.get(case, step_list)
    model, batches = model_and_data(mode, case)
    reference = copy.deepcopy(model)
    opts, ref_opts = optimizers_of(case, model), optimizers_of(case, reference)
    scheds = [torch.optim.lr_scheduler.LambdaLR(o[1], lambda k: 1 / (k + 1))
              for o in (opts, ref_opts)] if case.startswith("muon") else []
    plan = (LLAMA_PLAN if case == "llama" else PLAN) if mode in ("tp", "fsdp-tp") else None
    step = spmd.compile(parallel_mode=mode, plan=plan, report=report,
                        mesh="2x2" if mode == "fsdp-tp" else None)(fn)
    worst = 0.0
    for x, y in batches:
        loss = step(model, opts, x, y).item()
        ref = fn(reference, ref_opts, x, y).item()
        worst = max(worst, abs(loss - ref) / abs(ref))
        for s in scheds:
            s.step()
    state = step.state_dict()
    params = max((state[n] - p).norm().item() / p.norm().item()
                 for n, p in reference.named_parameters())
    step.sync(model, opts)
    # Every state tensor torch.optim keeps (moments, momentum buffers,
    # Adafactor's row and column variances, steps), relative to its norm.
    ref_params = dict(zip((id(p) for p in model.parameters()), reference.parameters()))
    moments, keys = 0.0, set()
    for opt, ref_opt in zip(parts(opts), parts(ref_opts)):
        for p, slot in opt.state.items():
            theirs = ref_opt.state[ref_params[id(p)]]
            for k, v in slot.items():
                keys.add(k)
                moments = max(moments, (v - theirs[k]).norm().item() /
                              max(theirs[k].norm().item(), 1e-12))
    if spmd.rank() == 0:
        print("%s %s: losses %s, parameters %s, optimizer state (%s) %s; %d compile%s" % (
            mode, case, "match" if worst <= 1e-5 else "DIFFER (%.2g)" % worst,
            "match" if params <= 1e-5 else "DIFFER (%.2g)" % params,
            " ".join(sorted(keys)), "matches" if moments <= 1e-5 else "DIFFERS (%.2g)" % moments,
            step.compiles, "" if step.compiles == 1 else "s"))


def resume(directory):
    """Calls 4 and 5 of the resumed run against the uninterrupted eager one."""
    _muon._zeropower_via_newtonschulz = fp32_newton_schulz
    model, batches = model_and_data("fsdp")
    reference = copy.deepcopy(model)
    opts, ref_opts = optimizers_of("dict", model), optimizers_of("dict", reference)
    step = spmd.compile(parallel_mode="ddp")(step_dict)
    for x, y in batches[:3]:
        step(model, opts, x, y)
        step_dict(reference, ref_opts, x, y)
    step.save(directory)
    fresh = model_and_data("fsdp")[0]
    fresh_opts = optimizers_of("dict", fresh)
    resumed = spmd.compile(parallel_mode="fsdp")(step_dict)
    resumed.load(directory)
    worst = 0.0
    for x, y in batches[3:]:
        loss = resumed(fresh, fresh_opts, x, y).item()
        ref = step_dict(reference, ref_opts, x, y).item()
        worst = max(worst, abs(loss - ref) / abs(ref))
    state = resumed.state_dict()
    params = max((state[n] - p).norm().item() / p.norm().item()
                 for n, p in reference.named_parameters())
    if spmd.rank() == 0:
        print("ddp -> fsdp resume: losses %s, parameters %s, %d steps" % (
            "match" if worst <= 1e-5 else "DIFFER (%.2g)" % worst,
            "match" if params <= 1e-5 else "DIFFER (%.2g)" % params, state["step"]))


def misuse():
    model, batches = model_and_data("ddp")
    x, y = batches[0]
    mats, rest = matrices_and_rest(model)

    def first_only(model, optimizers, x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizers[0].step()
        for opt in optimizers:
            opt.zero_grad()
        return loss

    cases = [
        ("one optimizer of two not stepped", first_only,
         [torch.optim.Muon(mats, lr=0.02), torch.optim.AdamW(rest)]),
        ("a parameter in two optimizers", step_list,
         [torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.AdamW(rest)]),
        ("something else in the list", step_list, [torch.optim.AdamW(rest), "adam"]),
        ("an optimizer spmd does not take", step_list,
         [torch.optim.Muon(mats, lr=0.02), torch.optim.Rprop(rest)]),
    ]
    print_refusals([(name, fn, opts, {}) for name, fn, opts in cases], model, x, y)


if __name__ == "__main__":
    if sys.argv[1] == "misuse":
        misuse()
    elif sys.argv[1] == "resume":
        resume(sys.argv[2])
    else:
        compare(sys.argv[1], sys.argv[2], "--report" in sys.argv)
