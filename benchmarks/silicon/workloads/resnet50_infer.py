"""torchvision ResNet-50 inference with random weights (no downloads): silicon session.

``python resnet50_infer.py [--batch B] [--iterations N] [--device cuda]``. cuDNN is left
in its default (non-deterministic algorithm choice), which is what PKA section 5.2 warns
about for the ncu second pass: the agent's manifest must report any mismatch.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()

    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval().to(args.device)
    images = torch.randn(args.batch, 3, 224, 224, device=args.device)
    start = time.perf_counter()
    with torch.inference_mode():
        for _ in range(args.iterations):
            logits = model(images)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    print(f"resnet50: {args.iterations} x batch {args.batch} in {elapsed:.2f} s, "
          f"logit mean {float(logits.mean()):.4g}")


if __name__ == "__main__":
    main()
