"""The PyTorch peers' launcher for the benchmarks: N gloo ranks as spawned
processes on this machine (what torchrun would start), rank 0's answer
back; and the collective counter they measure the peers with."""
import collections
import os

import torch
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


def comm_bytes_mode():
    """PyTorch's CommDebugMode (its collective counts, get_comm_counts())
    that also sums, per collective, the larger of its input and output
    tensors on this rank (`bytes`, a Counter): spmd-report's bytes per rank."""
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.debug._comm_mode import c10d_collective_ops

    class Bytes(CommDebugMode):
        def __init__(self):
            super().__init__()
            self.bytes = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            packet = getattr(func, "_overloadpacket", None)
            if packet in c10d_collective_ops or packet in self.comm_registry:
                sizes = [t.numel() * t.element_size()
                         for t in torch.utils._pytree.tree_leaves((args, kwargs))
                         if isinstance(t, torch.Tensor)]
                self.bytes[str(packet)] += max(sizes, default=0)
            return super().__torch_dispatch__(func, types, args, kwargs)

    return Bytes()


def fully_shard_units(model, mesh, **kwargs):
    """FSDP2's `fully_shard(..., **kwargs)` on each module-list element
    (each transformer layer) and on the root: spmd fsdp's default units."""
    from torch.distributed.fsdp import fully_shard
    for module in model.modules():
        for child in module.children():
            if isinstance(child, torch.nn.ModuleList):
                for layer in child:
                    fully_shard(layer, mesh=mesh, **kwargs)
    fully_shard(model, mesh=mesh, **kwargs)


def join_gloo(rank, ranks, port):
    """This spawned process as rank `rank` of a `ranks`-process gloo group
    on this machine (one thread, as each spmd rank); returns its 1-D device
    mesh."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    return init_device_mesh("cpu", (ranks,))
