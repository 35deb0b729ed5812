"""A small transformer language model and its training step (used by transformer_train.py).

Kept in its own module so ``hilsim agent profile --nvtx-module transformer_model:train_step``
can wrap the step without editing the script (the launcher patches module attributes;
the script calls ``transformer_model.train_step`` through the module).
"""

from __future__ import annotations

from typing import Any


def build(vocab: int, width: int, layers: int, heads: int, device: str) -> tuple[Any, Any]:
    """Model (embedding, encoder with a causal mask, head) and its AdamW optimiser."""
    import torch
    from torch import nn

    class TinyLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, width)
            layer = nn.TransformerEncoderLayer(width, heads, 4 * width, dropout=0.1,
                                               batch_first=True, norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(width, vocab)

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            n = tokens.shape[1]
            mask = nn.Transformer.generate_square_subsequent_mask(n, device=tokens.device)
            return self.head(self.encoder(self.embed(tokens), mask=mask, is_causal=True))

    model = TinyLM().to(device)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def train_step(model: Any, optimiser: Any, tokens: Any) -> float:
    """One next-token-prediction step; returns the loss."""
    import torch.nn.functional as F

    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    optimiser.zero_grad(set_to_none=True)
    loss.backward()
    optimiser.step()
    return float(loss.detach())
