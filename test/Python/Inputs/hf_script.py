"""A training script as transformers users write one, with spmd.compile,
next to the same function in eager PyTorch (one process, the whole batch):

  hf_script.py MODE [PLAN]

GPT2LMHeadModel from a small config called with labels (its loss, its
key/value cache left on), AdamW with transformers' no-decay grouping (biases
and LayerNorms without weight decay), get_linear_schedule_with_warmup (the
first step's learning rate is 0), two micro-batches with a backward() each,
clip_grad_norm_ before the step. Prints each call's loss against PyTorch's,
then whether all matched and the batch's layout; then a validation pass in
eval mode through the eval step (train_step.eval_step) on a held-out batch
of 6 with left padding (an attention mask): its loss and next-token
predictions against PyTorch's.
"""
import copy
import sys

import torch
from transformers import GPT2Config, GPT2LMHeadModel, get_linear_schedule_with_warmup

import spmd


def optimizer_of(model):
    no_decay = ("bias", "ln_")
    groups = [{"params": [p for n, p in model.named_parameters()
                          if not any(k in n for k in no_decay)], "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters()
                          if any(k in n for k in no_decay)], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=5e-4)
    return optimizer, get_linear_schedule_with_warmup(optimizer, 2, 10)


def train_step(model, optimizer, input_ids, labels, micro=2):
    total = 0
    for ids, lab in zip(input_ids.chunk(micro), labels.chunk(micro)):
        loss = model(input_ids=ids, labels=lab).loss / micro
        loss.backward()
        total += loss.detach()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    return total


def evaluate(model, input_ids, attention_mask):
    out = model(input_ids=input_ids, attention_mask=attention_mask,
                labels=input_ids.masked_fill(attention_mask == 0, -100))
    return out.loss, out.logits[:, -1].argmax(-1)


def main(mode, plan=None):
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=128, n_positions=32, n_embd=64, n_layer=2, n_head=4,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    reference = copy.deepcopy(model)
    (opt, sched), (ref_opt, ref_sched) = optimizer_of(model), optimizer_of(reference)
    step = spmd.compile(parallel_mode=mode, plan=plan)(train_step)
    g = torch.Generator().manual_seed(1)
    worst = 0.0
    for k in range(5):
        ids = torch.randint(0, 128, (8, 32), generator=g)
        lr = ref_opt.param_groups[0]["lr"]
        loss = step(model, opt, ids, ids).item()
        ref = train_step(reference, ref_opt, ids, ids).item()
        sched.step()
        ref_sched.step()
        worst = max(worst, abs(loss - ref) / abs(ref))
        if spmd.rank() == 0:
            print("call %d: lr %.2e loss %.6f pytorch %.6f" % (
                k + 1, lr, loss, ref), flush=True)
    if spmd.rank() == 0:
        print("%s: losses %s; the batch %s" % (
            mode, "match" if worst <= 1e-5 else "DIFFER (%.2g)" % worst,
            step.layouts()["input.0"]))
    ids = torch.randint(0, 128, (6, 32), generator=g)
    mask = torch.ones_like(ids)
    mask[:, :5] = 0
    model.eval()
    reference.eval()
    loss, predicted = step.eval_step(evaluate)(model, ids, mask)
    with torch.no_grad():
        ref, ref_predicted = evaluate(reference, ids, mask)
    if spmd.rank() == 0:
        print("%s eval: loss %s, predictions %s" % (
            mode, "matches" if abs(loss - ref) <= 1e-5 * abs(ref) else "DIFFERS",
            "match" if torch.equal(predicted, ref_predicted) else "DIFFER"))


if __name__ == "__main__":
    main(*sys.argv[1:])
