"""Small transformer training loop with random data; every step is an NVTX range.

``python transformer_train.py [--steps N] [--device cuda]``. The script marks each step
itself with ``torch.cuda.nvtx.range`` (ranges the workload already emits); the
``transformer_model:train_step`` function can also be wrapped by the agent's
``--nvtx-module`` (put this folder on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import contextlib
import time

import transformer_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()

    import torch

    torch.manual_seed(0)
    vocab = 8192
    model, optimiser = transformer_model.build(vocab, 256, 4, 4, args.device)
    tokens = torch.randint(0, vocab, (args.batch, args.seq + 1), device=args.device)
    on_gpu = args.device.startswith("cuda")
    start = time.perf_counter()
    loss = float("nan")
    for step in range(args.steps):
        marker = torch.cuda.nvtx.range(f"step{step}") if on_gpu else contextlib.nullcontext()
        with marker:
            loss = transformer_model.train_step(model, optimiser, tokens)
    if on_gpu:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    print(f"transformer: {args.steps} steps in {elapsed:.2f} s, last loss {loss:.4f}")


if __name__ == "__main__":
    main()
