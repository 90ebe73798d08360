"""Train the GPT example (examples/gpt.py) as a byte-level language model on
the Python standard library's own source files, with spmd.compile.

  mpirun -np 4 .venv/bin/python examples/train_lm.py --mode fsdp --steps 50
  mpirun -np 4 .venv/bin/python examples/train_lm.py --mode fsdp-tp --mesh 2x2 --reference

Batches are windows of `--seq` + 1 bytes at offsets drawn from a generator
seeded by (--seed, step): every rank draws the same global batch, and a
resumed run the same batches as an uninterrupted one. Options: training.py.
"""
import glob
import os
import sysconfig

from training import HERE, parser, train

import torch  # noqa: E402  (training.py put the package on the path)

from gpt import GPT, NextTokenLoss  # noqa: E402


def corpus(limit):
    """Up to `limit` bytes of the standard library's .py files, in name order."""
    data = bytearray()
    for path in sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py"))):
        with open(path, "rb") as f:
            data += f.read()
        if len(data) >= limit:
            break
    return torch.frombuffer(data[:limit], dtype=torch.uint8).long()


def main():
    p = parser(__doc__)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--corpus-bytes", type=int, default=1 << 20)
    p.add_argument("--eval-batch", type=int, default=16,
                   help="windows of held-out text (the bytes after the training corpus)")
    args = p.parse_args()
    text = corpus(args.corpus_bytes + args.eval_batch * (args.seq + 1))
    held_out, text = text[args.corpus_bytes:], text[:args.corpus_bytes]
    torch.manual_seed(args.seed)
    model = GPT(256, args.seq, args.d_model, args.heads, 4 * args.d_model, args.layers, 0.0)
    loss = NextTokenLoss()

    def batch(step):
        g = torch.Generator().manual_seed(args.seed * 1000003 + step)
        starts = torch.randint(0, len(text) - args.seq - 1, (args.batch,), generator=g)
        window = torch.stack([text[s:s + args.seq + 1] for s in starts.tolist()])
        return window[:, :-1], window[:, 1:]

    window = held_out.view(args.eval_batch, args.seq + 1)
    return train(args, model, lambda m, x, y: loss(m(x), y), batch, args.batch * args.seq,
                 default_plan=os.path.join(HERE, "gpt.tp.json"),
                 held_out=(lambda m, x, y: {"loss": loss(m(x), y)},
                           (window[:, :-1], window[:, 1:])))


if __name__ == "__main__":
    raise SystemExit(main())
