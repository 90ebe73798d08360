"""Checks K steps of spmd-run against K eager PyTorch steps with an LR scheduler.

  check_steps.py BUNDLE OUT_DIR K SCHEDULER LR1,LR2,...

BUNDLE is a capture of one step; OUT_DIR holds spmd-run's results after
`--steps K --lr-schedule LR1,...` (`--out`). The model is rebuilt from the
manifest (as check_bundle.py does) and trained K steps on the same batch with
torch.optim and SCHEDULER, a torch.optim.lr_scheduler expression of `opt`
(e.g. "StepLR(opt, step_size=2, gamma=0.5)"), stepped after each step. The
learning rates it gives must be LR1, ... (what spmd-run was given), and every
result must match: max |spmd - torch| <= 1e-4 * max |torch| + 1e-6.
Prints `steps ok: <K> steps, lr <list>, <n> results` or exits non-zero.
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
from check_bundle import eager_step, fail, rebuild, torch_optimizer  # noqa: E402


def main(bundle, out_dir, steps, scheduler, schedule):
    steps, schedule = int(steps), [float(x) for x in schedule.split(",")]
    manifest = json.load(open(os.path.join(bundle, "manifest.json")))
    factory, micro, _ = rebuild(manifest)
    opt, clip = torch_optimizer(manifest, factory.model)
    sched = eval(scheduler, vars(torch.optim.lr_scheduler), {"opt": opt})
    torch.manual_seed(manifest["seed"])
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        loss = eager_step(factory, micro, opt, clip, manifest.get("accumulate", 1))
        sched.step()
    if not np.allclose(lrs, schedule, rtol=1e-7, atol=0):
        fail("the scheduler's learning rates are %s, spmd-run was given %s" % (lrs, schedule))
    params = dict(factory.model.named_parameters())
    want = dict(params, **dict(factory.model.named_buffers()), loss=loss)
    for fqn, p in params.items():
        for key, t in opt.state[p].items():
            want["%s.%s" % (fqn, key)] = t
    for e in manifest["results"]:
        got = torch.from_numpy(np.load(os.path.join(out_dir, e["fqn"] + ".npy"))).double()
        ref = want[e["fqn"]].detach().double()
        err = (got - ref).abs().max().item()
        if got.shape != ref.shape or err > 1e-4 * ref.abs().max().item() + 1e-6:
            fail("%s after %d steps: max abs error %.3g (shape %s vs %s)"
                 % (e["fqn"], steps, err, tuple(got.shape), tuple(ref.shape)))
    print("steps ok: %d steps, lr %s, %d results" % (steps, lrs, len(manifest["results"])))


if __name__ == "__main__":
    main(*sys.argv[1:])
