"""Train a small classifier on scikit-learn's bundled digits dataset (8x8
images, 10 classes; no download) with spmd.compile, then report its accuracy
on a held-out fifth of the data.

  mpirun -np 4 .venv/bin/python examples/train_digits.py --mode ddp --steps 200
  mpirun -np 2 .venv/bin/python examples/train_digits.py --mode tp --reference

Mini-batches of `--batch` samples are drawn in a shuffled order per epoch
(seeded by --seed and the epoch), the same on every rank. Options: training.py.
"""
import os

from training import HERE, parser, train

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def main():
    p = parser(__doc__)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.set_defaults(lr=3e-3)
    args = p.parse_args()
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(1234))
    test, train_idx = order[:len(x) // 5], order[len(x) // 5:]
    per_epoch = len(train_idx) // args.batch  # whole batches: one compiled shape
    torch.manual_seed(args.seed)
    model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10))

    def batch(step):
        epoch, k = divmod(step, per_epoch)
        perm = train_idx[torch.randperm(len(train_idx),
                                        generator=torch.Generator().manual_seed(
                                            args.seed * 1000003 + epoch))]
        pick = perm[k * args.batch:(k + 1) * args.batch]
        return x[pick], y[pick]

    def accuracy(model):
        with torch.no_grad():
            right = (model(x[test]).argmax(1) == y[test]).float().mean().item()
        return "held-out accuracy %.1f%% (%d images)" % (100 * right, len(test))

    def metrics(model, images, labels):
        logits = model(images)
        return {"loss": F.cross_entropy(logits, labels),
                "accuracy": (logits.argmax(1) == labels).float().mean()}

    return train(args, model, lambda m, xb, yb: F.cross_entropy(m(xb), yb), batch,
                 args.batch, default_plan=os.path.join(HERE, "digits.tp.json"),
                 evaluate=accuracy, held_out=(metrics, (x[test], y[test])))


if __name__ == "__main__":
    raise SystemExit(main())
