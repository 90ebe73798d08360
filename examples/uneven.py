"""Models whose sizes divide by none of 2, 3 and 4 (batch 5, hidden 35,
vocab 37, sequence 7, 5 heads), for uneven-shard tests: every Shard of them
on 2, 3 or 4 ranks has pieces of different sizes, and batch 5 on 4 ranks
(chunks 2, 2, 1, 0) gives a rank an empty shard.

  spmd-capture --model examples/uneven.py:mlp -o u.mlir --bundle u.bundle
  spmd-capture --model examples/uneven.py:gpt ...
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt as gpt_example  # noqa: E402
import mlp as mlp_example  # noqa: E402


def mlp(batch=5, d_in=13, hidden=35, d_out=7):
    return mlp_example.mlp(batch, d_in, hidden, d_out)


def gpt(batch=5, seq=7, vocab=37, d_model=35, heads=5, ffn=37, layers=1, dropout=0.0):
    return gpt_example.gpt(batch, seq, vocab, d_model, heads, ffn, layers, dropout)
