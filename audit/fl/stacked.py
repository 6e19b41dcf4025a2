"""K clients' local step for the small decoder-only Transformer, written once over stacked
weights (the engine's fast path for FedTLU's language model, which the grouped chain
of :mod:`audit.fl.grouped` cannot trace: embeddings, residual additions, attention).

The forward of :class:`audit.fl.models.TinyTransformerLM` is restated with every weight
carrying a leading client dimension K: linear layers are batched matrix products
(``baddbmm``), the embeddings a ``gather`` per client, layer norm normalises without an
affine part and then scales and shifts by each client's own weights; attention runs on
the K*b sequences at once. One ordinary ``torch.autograd.grad`` of the sum over clients
of each client's loss gives every client its own gradient (client k's loss reads only
the k-th slice of each weight), without ``vmap``'s batching rules: 1.7x faster than
``vmap(grad(...))`` on FedTLU's smoke model (10 clients, d_model 16, 4 blocks, one
thread). The loss is the engine's: client k's token cross-entropy, averaged over the
tokens of its real samples (per-sample weights ``w``, 0 for padding). Tests compare the
gradients with ``torch.func.grad`` of the module itself.

Only a model without dropout (``dropout=0``, the default) takes this path: the masks
would be drawn in another order than under ``vmap``.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from .models import MLP, Block, CausalSelfAttention, TinyTransformerLM

__all__ = ["StackedLM", "compile_stacked"]


def compile_stacked(model: nn.Module) -> Optional["StackedLM"]:
    """A :class:`StackedLM` for ``model`` when it is a :class:`TinyTransformerLM` as
    built (exactly these classes for it and its blocks' modules, every parameter its
    own, none tied, no dropout, no buffers), else None: anything else keeps ``vmap``."""
    if type(model) is not TinyTransformerLM:
        return None
    kinds = {"tok_emb": nn.Embedding, "pos_emb": nn.Embedding, "ln_f": nn.LayerNorm,
             "head": nn.Linear, "blocks": nn.Sequential}
    if any(type(getattr(model, k, None)) is not t for k, t in kinds.items()):
        return None
    parts = {"ln1": nn.LayerNorm, "ln2": nn.LayerNorm, "attn": CausalSelfAttention,
             "mlp": MLP, "attn.qkv": nn.Linear, "attn.proj": nn.Linear,
             "mlp.fc1": nn.Linear, "mlp.fc2": nn.Linear}
    for b in model.blocks:
        if type(b) is not Block or any(type(b.get_submodule(k)) is not t
                                       for k, t in parts.items()):
            return None
    if any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in model.modules()):
        return None
    if any(True for _ in model.named_buffers()):
        return None
    names = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    if len(set(names)) != len(names) or \
            len({id(p) for p in model.parameters()}) != len(names):
        return None  # a parameter shared between two places (tied weights)
    if any(m.bias is None for m in model.modules() if isinstance(m, nn.Linear)) or \
            any(not m.elementwise_affine or m.bias is None
                for m in model.modules() if isinstance(m, nn.LayerNorm)):
        return None
    return StackedLM(model)


class StackedLM:
    """Per-client gradients of a :class:`TinyTransformerLM` (see the module docstring)."""

    has_bn = False

    def __init__(self, model: TinyTransformerLM):
        self.d = model.tok_emb.embedding_dim
        self.vocab = model.head.out_features
        self.blocks = [(f"blocks.{i}.", b.attn.n_heads, b.ln1.eps, b.ln2.eps)
                       for i, b in enumerate(model.blocks)]
        self.eps_f = model.ln_f.eps

    def __repr__(self) -> str:
        return f"StackedLM(d={self.d}, blocks={len(self.blocks)}, vocab={self.vocab})"

    @staticmethod
    def _linear(h, p, name):  # h (K, n, in), weight (K, out, in) -> (K, n, out)
        return torch.baddbmm(p[name + ".bias"].unsqueeze(1), h,
                             p[name + ".weight"].transpose(1, 2))

    @staticmethod
    def _norm(h, p, name, eps):
        d = h.shape[-1]
        return torch.addcmul(p[name + ".bias"].unsqueeze(1), F.layer_norm(h, (d,), eps=eps),
                             p[name + ".weight"].unsqueeze(1))

    def outputs(self, p: dict, x: torch.Tensor) -> torch.Tensor:
        """The K clients' logits: ``x`` (K, b, t) token ids -> (K, b, t, vocab)."""
        K, b, t = x.shape
        d = self.d
        idx = x.reshape(K, b * t, 1).expand(K, b * t, d)
        h = torch.gather(p["tok_emb.weight"], 1, idx).view(K, b, t, d)
        h = (h + p["pos_emb.weight"][:, :t].unsqueeze(1)).reshape(K, b * t, d)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        for pre, heads, eps1, eps2 in self.blocks:
            z = self._linear(self._norm(h, p, pre + "ln1", eps1), p, pre + "attn.qkv")
            q, k, v = (u.reshape(K * b, t, heads, d // heads).transpose(1, 2)
                       for u in z.split(d, dim=-1))
            att = (q @ k.transpose(-1, -2)) / math.sqrt(d // heads)
            att = att.masked_fill(~causal, float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(K, b * t, d)
            h = h + self._linear(y, p, pre + "attn.proj")
            z = F.gelu(self._linear(self._norm(h, p, pre + "ln2", eps2), p, pre + "mlp.fc1"))
            h = h + self._linear(z, p, pre + "mlp.fc2")
        out = self._linear(self._norm(h, p, "ln_f", self.eps_f), p, "head")
        return out.view(K, b, t, -1)

    def grads(self, params: dict, x: torch.Tensor, y: torch.Tensor,
              w: Optional[torch.Tensor] = None, buffers: Optional[dict] = None) -> dict:
        """Gradients of sum_k loss_k with respect to every stacked parameter.

        Args:
            params: name -> (K, ...) stacked weights of the K clients.
            x: (K, b, t) token ids; y: (K, b, t) next-token targets.
            w: (K, b) per-sample weights (0 = padding), or None for all ones. Client k's
                loss is sum_i w_ki mean_t ce_kit / sum_i w_ki.
            buffers: unused (the model has none).
        Returns name -> (K, ...) gradients (the same shapes as ``params``).
        """
        K, b = y.shape[0], y.shape[1]
        names = list(params)
        p = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        with torch.enable_grad():
            out = self.outputs(p, x)
            ce = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1),
                                 reduction="none").view(K, b, -1).mean(2)
            if w is None:
                loss = ce.mean(1).sum()
            else:
                w = w.to(ce.dtype)
                loss = ((ce * w).sum(1) / w.sum(1)).sum()
            g = torch.autograd.grad(loss, [p[k] for k in names])
        return dict(zip(names, g))
