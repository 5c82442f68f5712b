#!/usr/bin/python3
"""The compute peer of Baton's benchmarks: the same char-GPT trained by PyTorch.

nanoGPT's architecture as Baton builds it (models/gpt.ts): token and learned position
embeddings, pre-LayerNorm blocks of causal self-attention (separate q, k, v projections
with biases) and a 4x MLP with tanh-GELU, a final LayerNorm, an untied LM head without
bias; no dropout. Synchronous training as Baton's: M microbatches' gradients accumulate
(loss scaled by 1/M), then one AdamW step. Tokens are random ids (throughput only).

Threads: --threads sets PyTorch's own (OpenMP) threads; --blas-threads the OpenBLAS threads its
matrix products use (default: as many as --threads). torch.set_num_threads does not reach
Debian's OpenBLAS, which otherwise starts a thread per core: "1 thread" would use every core
for the products, and 2 OpenMP threads beside 2 spinning BLAS threads fight over 2 cores.

Prints one JSON object: {"threads", "blas_threads", "torch", "tokens_per_iteration", "iteration_s": [...]}.
Run with Debian's /usr/bin/python3 and python3-torch (scripts/install-torch-peer.sh).
Not modelled: data loading, evaluation, mixed precision, torch.compile (not in 1.13).
"""
import argparse
import json
import math
import os
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1, help="PyTorch's (OpenMP) threads")
    p.add_argument("--blas-threads", type=int, default=None, help="OpenBLAS threads (default: --threads)")
    p.add_argument("--iterations", type=int, default=5, help="iterations timed (one more runs first, untimed)")
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--microbatch-size", type=int, default=16)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=65)
    return p.parse_args()


# The whole command line is parsed before torch loads OpenBLAS (which reads
# OPENBLAS_NUM_THREADS then), so every form argparse accepts (--threads 2, --threads=2,
# a unique prefix such as --blas=2) sets the BLAS threads, and a bad one fails before the import.
ARGS = parse_args()
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads if ARGS.blas_threads is not None else ARGS.threads)

import torch  # noqa: E402  (after OPENBLAS_NUM_THREADS: OpenBLAS reads it when it loads)
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), -1e9), diagonal=1))

    def attention(self, x):
        b, t, c = x.shape
        hd = c // self.heads
        split = lambda y: y.view(b, t, self.heads, hd).transpose(1, 2)  # (B, H, T, hd)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd)) + self.mask[:t, :t]  # (B, H, T, T)
        y = F.softmax(att, dim=-1) @ v
        return self.o(y.transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class CharGPT(nn.Module):
    def __init__(self, vocab, d, layers, heads, seq):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([Block(d, heads, seq) for _ in range(layers)])
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids, targets):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(t))
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    a = ARGS
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = CharGPT(a.vocab, a.width, a.layers, a.heads, a.seq)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    ids = torch.randint(0, a.vocab, (a.microbatches, a.microbatch_size, a.seq + 1))
    times = []
    for it in range(a.iterations + 1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for j in range(a.microbatches):
            loss = model(ids[j, :, :-1], ids[j, :, 1:]) / a.microbatches
            loss.backward()
        opt.step()
        if it > 0:
            times.append(time.perf_counter() - t0)
    print(json.dumps({"threads": torch.get_num_threads(), "blas_threads": int(os.environ["OPENBLAS_NUM_THREADS"]),
                      "torch": torch.__version__,
                      "tokens_per_iteration": a.microbatches * a.microbatch_size * a.seq, "iteration_s": times}))


if __name__ == "__main__":
    main()
