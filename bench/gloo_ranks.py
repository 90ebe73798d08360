"""The PyTorch peers' launcher for the benchmarks: N gloo ranks as spawned
processes on this machine (what torchrun would start), rank 0's answer
back."""
import torch.multiprocessing as mp


def run_on_ranks(worker, ranks, *args):
    """worker(rank, ranks, *args, out) in `ranks` spawned processes; returns
    what rank 0 puts on `out` (the others put nothing)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, ranks) + args + (out,)) for r in range(ranks)]
    for p in procs:
        p.start()
    result = out.get()
    for p in procs:
        p.join()
    return result
