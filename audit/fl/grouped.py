"""K clients' local step in one forward and one hand-written backward pass, for plain
layer chains (the engine's fastest path for the CNNs of pFL papers).

The engine's general batched path runs ``torch.func.vmap(grad(loss))`` over the clients'
stacked weights; it works for any model. For a model that is a plain chain of

    Conv2d (groups=1, zero padding)  BatchNorm2d  ReLU  MaxPool2d  Dropout  Identity
    Flatten  Linear

(as ``nn`` modules or as ``F.relu`` / ``torch.relu`` / ``F.max_pool2d`` /
``torch.flatten(x, 1)`` / ``x.flatten(1)`` / ``x.relu()`` calls in ``forward``, found with
``torch.fx``), :func:`compile_chain` returns a :class:`Chain` that computes the same
per-client gradients with fewer and larger kernels and no autograd or functorch
bookkeeping. The layers must come in that order: convolutions first (batch norm and
pooling only after a convolution), then a flatten (required after them), then the linear
layers (a linear layer before the flatten acts on its input's last axis only). Anything
else (other normalisation layers, residual additions, embeddings, control flow, weight
sharing, that order broken) gives ``None`` and the engine keeps ``vmap``.

Layouts. Client k's weights are the k-th slice of each stacked parameter (K, ...).
- Convolution part: activations are ``(b, K*C, H, W)``; client k owns channels
  ``k*C .. k*C+C-1``, so a convolution with ``groups=K`` and the stacked weight viewed
  as ``(K*O, C, kh, kw)`` applies every client's filter to its own channels. ReLU,
  pooling and dropout act per channel and need nothing special; ``flatten(1)`` gives
  ``(b, K*F)``, i.e. client k's features at ``k*F .. k*F+F-1`` in torch's own order.
  Batch norm is per channel too: its statistics over ``(b, H, W)`` of channel k*C+c
  are client k's own batch statistics of its channel c, so one ``native_batch_norm`` on
  the stacked scale, shift and running statistics (viewed as ``K*C``) normalises every
  client by its own batch and updates every client's running statistics in place, as
  the module does under ``vmap`` (``num_batches_tracked`` counts the call). The engine
  never pads a batch for a model with batch norm, so no padding enters the statistics.
- Linear part: activations are ``(K, b, F)`` and a linear layer is one batched matmul.

Training mode for :meth:`Chain.grads` (dropout is applied, as in local training); eval
mode for :meth:`Chain.logits` (the clients' evaluation in one call).

Backward is written out per layer with the kernels autograd itself would call
(``convolution_backward``, ``native_batch_norm_backward``, ``threshold_backward``,
``max_pool2d_with_indices_backward``, ``native_dropout_backward``, ``bmm``). The loss is
the engine's: client k's cross-entropy averaged over its real samples (per-sample weights
``w``, 0 for padding), summed over clients, so each client's gradient is its own. Tests
compare every gradient with ``torch.func.grad`` of the module itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["Chain", "compile_chain"]

NHWC_MAX_CHANNELS = 4  # a first convolution with at most this many input channels runs NHWC


def _pair(v) -> list:
    return [int(v), int(v)] if isinstance(v, int) else [int(u) for u in v]


@dataclass
class _Op:
    kind: str                # conv | bn | linear | relu | maxpool | dropout | flatten
    name: str = ""           # module name (conv / linear: parameter prefix)
    weight: str = ""
    bias: Optional[str] = None
    args: tuple = ()
    inplace: bool = False    # relu: may overwrite its input (nothing saved it)


def _maxpool_args(kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                  return_indices=False):
    if return_indices:
        raise _Unsupported("max_pool2d with return_indices")
    stride = kernel_size if stride is None or stride == [] else stride
    return (_pair(kernel_size), _pair(stride), _pair(padding), _pair(dilation), bool(ceil_mode))


class _Unsupported(Exception):
    pass


def _flatten_ok(args, kwargs) -> bool:
    start = args[0] if args else kwargs.get("start_dim", 0)
    end = args[1] if len(args) > 1 else kwargs.get("end_dim", -1)
    return start == 1 and end == -1


def _op_of(node, modules) -> Optional[_Op]:
    """The chain op for one fx node (None for a no-op), or _Unsupported."""
    if node.op == "call_module":
        m = modules[node.target]
        if isinstance(m, nn.Conv2d):
            if m.groups != 1 or m.padding_mode != "zeros" or isinstance(m.padding, str):
                raise _Unsupported(f"conv {node.target}")
            return _Op("conv", node.target, f"{node.target}.weight",
                       None if m.bias is None else f"{node.target}.bias",
                       (_pair(m.stride), _pair(m.padding), _pair(m.dilation)))
        if isinstance(m, nn.BatchNorm2d):
            if not (m.affine and m.track_running_stats) or m.momentum is None:
                raise _Unsupported(f"batch norm {node.target}")
            return _Op("bn", node.target, f"{node.target}.weight", f"{node.target}.bias",
                       (float(m.eps), float(m.momentum)))
        if isinstance(m, nn.Linear):
            return _Op("linear", node.target, f"{node.target}.weight",
                       None if m.bias is None else f"{node.target}.bias")
        if isinstance(m, nn.ReLU):
            return _Op("relu")
        if isinstance(m, nn.MaxPool2d):
            return _Op("maxpool", args=_maxpool_args(m.kernel_size, m.stride, m.padding,
                                                     m.dilation, m.ceil_mode,
                                                     m.return_indices))
        if isinstance(m, nn.Dropout):
            if m.p >= 1.0:
                raise _Unsupported("dropout with p = 1")
            return _Op("dropout", name=node.target, args=(float(m.p),))
        if isinstance(m, nn.Identity):
            return None
        if isinstance(m, nn.Flatten) and m.start_dim == 1 and m.end_dim == -1:
            return _Op("flatten")
        raise _Unsupported(f"module {type(m).__name__}")
    rest, kwargs = tuple(node.args[1:]), dict(node.kwargs)
    if node.op == "call_function":
        if node.target in (F.relu, torch.relu) and not kwargs.get("inplace", False) \
                and not rest:
            return _Op("relu")
        if node.target is F.max_pool2d:
            return _Op("maxpool", args=_maxpool_args(*rest, **kwargs))
        if node.target is torch.flatten and _flatten_ok(rest, kwargs):
            return _Op("flatten")
        raise _Unsupported(f"function {getattr(node.target, '__name__', node.target)}")
    if node.op == "call_method":
        if node.target == "relu" and not rest and not kwargs:
            return _Op("relu")
        if node.target == "flatten" and _flatten_ok(rest, kwargs):
            return _Op("flatten")
        raise _Unsupported(f"method {node.target}")
    raise _Unsupported(node.op)


_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
               "_backward_pre_hooks")
_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks",
                 "_global_backward_hooks", "_global_backward_pre_hooks")


def _has_hooks(model: nn.Module) -> bool:
    """True when a module hook (on any submodule, or registered for every module) could
    change what the model computes: the chain calls kernels, not the modules, so it
    would skip the hook where the engine's ``vmap`` path (``functional_call``) runs it."""
    from torch.nn.modules import module as _module

    if any(getattr(_module, name, None) for name in _GLOBAL_HOOKS):
        return True
    return any(getattr(m, name, None) for m in model.modules() for name in _HOOK_DICTS)


def compile_chain(model: nn.Module) -> Optional["Chain"]:
    """A :class:`Chain` for ``model`` if it is a plain layer chain (module docstring),
    else None. Every parameter must belong to exactly one layer of the chain, and no
    module hook may be registered (:func:`_has_hooks`)."""
    import torch.fx

    if _has_hooks(model):
        return None
    try:
        graph = torch.fx.symbolic_trace(model).graph
    except Exception:  # control flow on values, unsupported Python: not a plain chain
        return None
    modules = dict(model.named_modules())
    ops, prev = [], None
    try:
        for node in graph.nodes:
            if node.op == "placeholder":
                if prev is not None:
                    raise _Unsupported("several inputs")
                prev = node
                continue
            if node.op == "output":
                if node.args[0] is not prev:
                    raise _Unsupported("output is not the last layer")
                continue
            tensors = [a for a in list(node.args) + list(node.kwargs.values())
                       if isinstance(a, torch.fx.Node)]
            if len(tensors) != 1 or node.args[:1] != (prev,):
                raise _Unsupported("not a chain")
            if len(node.users) != 1:
                raise _Unsupported("a value used twice")
            op = _op_of(node, modules)
            if op is not None:
                ops.append(op)
            prev = node
    except _Unsupported:
        return None
    used = [o.weight for o in ops if o.weight] + [o.bias for o in ops if o.bias]
    names = [n for n, _ in model.named_parameters()]
    if sorted(used) != sorted(names) or len(set(used)) != len(used):
        return None  # shared or unused weights
    stats = [f"{o.name}.{b}" for o in ops if o.kind == "bn"
             for b in ("running_mean", "running_var", "num_batches_tracked")]
    if sorted(n for n, _ in model.named_buffers()) != sorted(stats):
        return None  # buffers other than the batch norms' statistics
    # the convolution part comes first, then flatten, then the linear part
    seen_linear = seen_flatten = seen_conv = False
    for o in ops:
        if o.kind in ("conv", "maxpool", "bn") and (seen_linear or seen_flatten):
            return None
        if o.kind in ("bn", "maxpool") and not seen_conv:
            # of the input itself: without a convolution before it the activations are
            # (K, b, F), not the grouped (b, K*C, H, W), and pooling or normalising them
            # would mix clients and samples
            return None
        if o.kind == "flatten" and seen_linear:
            return None  # a linear layer on an unflattened input acts on its last axis
        seen_conv |= o.kind == "conv"
        seen_flatten |= o.kind == "flatten"
        seen_linear |= o.kind == "linear"
    if seen_conv and not seen_flatten and any(o.kind == "linear" for o in ops):
        return None  # a linear layer on convolution maps without flatten: last axis only
    chain = Chain(ops)
    for prev_op, op in zip([None] + ops, ops):  # nothing saves these layers' outputs
        if op.kind == "relu" and prev_op is not None and \
                prev_op.kind in ("conv", "linear", "maxpool", "bn"):
            op.inplace = True
    return chain


class Chain:
    """Per-client gradients of a plain layer chain (see the module docstring)."""

    def __init__(self, ops: list):
        self.ops = ops
        self.has_conv = any(o.kind == "conv" for o in ops)
        self.has_bn = any(o.kind == "bn" for o in ops)
        # a chain of linear layers with no flatten before the first: the module applies
        # it to the input's last axis, so the input must be (K, b, F) already
        first = next((o.kind for o in ops if o.kind in ("linear", "flatten", "conv")), "")
        self.needs_flat_input = first == "linear"

    def _check_input(self, x: torch.Tensor) -> None:
        if self.needs_flat_input and x.dim() != 3:
            raise ValueError(f"{self!r} starts with a linear layer, which acts on the "
                             f"input's last axis: inputs must be (clients, batch, "
                             f"features), got shape {tuple(x.shape)}")

    def __repr__(self) -> str:
        return f"Chain({' -> '.join(o.name or o.kind for o in self.ops)})"

    def grads(self, params: dict, x: torch.Tensor, y: torch.Tensor,
              w: Optional[torch.Tensor] = None, buffers: Optional[dict] = None) -> dict:
        """Gradients of sum_k loss_k with respect to every stacked parameter.

        Args:
            params: name -> (K, ...) stacked weights of the K clients.
            x: (K, b, ...) inputs; y: (K, b) class labels.
            w: (K, b) per-sample weights (0 = padding), or None for all ones. Client k's
                loss is sum_i w_ki ce_ki / sum_i w_ki.
            buffers: name -> (K, ...) stacked batch-norm statistics (contiguous), updated
                in place as the modules' forward would; required with batch norm.
        Returns name -> (K, ...) gradients (the same shapes as ``params``).
        """
        K, b = y.shape[0], y.shape[1]
        self._check_input(x)
        if self.has_bn:
            if buffers is None:
                raise ValueError("a chain with batch norm needs the stacked buffers")
            for o in self.ops:
                if o.kind == "bn":
                    buffers[f"{o.name}.num_batches_tracked"].add_(1)
        if self.has_conv:  # (K, b, C, H, W) -> (b, K*C, H, W)
            h = x.transpose(0, 1).reshape(b, K * x.shape[2], *x.shape[3:])
            layout = "g"
            if self.ops[0].kind == "conv" and x.shape[2] <= NHWC_MAX_CHANNELS \
                    and x.device.type == "cpu":
                # oneDNN's grouped convolution with few input channels per group is
                # faster on an NHWC input: the reference CNN's first layer (20 x 32
                # samples) takes 0.75 ms instead of 1.2 ms forward and backward, the
                # copy back to NCHW included; cnn2 on 32x32x3 saves 11% of a step
                h = h.contiguous(memory_format=torch.channels_last)
        else:
            h = x.reshape(K, b, -1)
            layout = "k"
        saved = []
        for op in self.ops:
            h, layout, s = self._forward(op, params, h, layout, K, b, buffers)
            saved.append(s)
        if layout == "g":  # (b, K*O) -> (K, b, O)
            out = h.reshape(b, K, -1).transpose(0, 1)
        else:
            out = h
        # d loss / d logits: (softmax - onehot) * w / sum(w), per client
        if w is None:
            w = torch.ones(K, b, dtype=out.dtype, device=out.device)
        scale = (w / w.sum(1, keepdim=True)).to(out.dtype)
        d = torch.softmax(out, -1)
        d = (d - F.one_hot(y, d.shape[-1]).to(d.dtype)) * scale.unsqueeze(-1)
        if layout == "g":
            d = d.transpose(0, 1).reshape(b, -1)
        grads = {}
        for i in range(len(self.ops) - 1, -1, -1):
            d = self._backward(self.ops[i], params, d, saved[i], grads, K, b,
                               need_input=i > 0)
        return grads

    def logits(self, params: dict, x: torch.Tensor, buffers: Optional[dict] = None
               ) -> torch.Tensor:
        """The K clients' outputs in eval mode (the module's ``eval()`` forward: no
        dropout, batch norm by its running statistics, which are read and not changed):
        ``x`` (K, b, ...) -> (K, b, classes). No autograd graph is kept. Equal to each
        client's own forward up to rounding (grouped kernels sum in another order)."""
        K, b = x.shape[0], x.shape[1]
        self._check_input(x)
        if self.has_bn and buffers is None:
            raise ValueError("a chain with batch norm needs the stacked buffers")
        if self.has_conv:
            h, layout = x.transpose(0, 1).reshape(b, K * x.shape[2], *x.shape[3:]), "g"
        else:
            h, layout = x.reshape(K, b, -1), "k"
        with torch.no_grad():
            for op in self.ops:
                if op.kind == "dropout":
                    continue
                if op.kind == "bn":
                    eps = op.args[0]
                    h = torch.ops.aten.native_batch_norm(
                        h, params[op.weight].reshape(-1), params[op.bias].reshape(-1),
                        buffers[f"{op.name}.running_mean"].reshape(-1),
                        buffers[f"{op.name}.running_var"].reshape(-1), False, 0.0, eps)[0]
                    continue
                h, layout, _ = self._forward(op, params, h, layout, K, b)
        return h.reshape(b, K, -1).transpose(0, 1) if layout == "g" else h

    # -- one layer ------------------------------------------------------------------
    @staticmethod
    def _forward(op: _Op, params, h, layout, K, b, buffers=None):
        if op.kind == "bn":
            eps, momentum = op.args
            if b * h.shape[2] * h.shape[3] == 1:  # as torch's module: no batch statistics
                raise ValueError(f"Expected more than 1 value per channel when training, "
                                 f"got input size {[b, h.shape[1] // K, *h.shape[2:]]} "
                                 f"({op.name})")
            mean = buffers[f"{op.name}.running_mean"].view(-1)  # (K*C): views, so the
            var = buffers[f"{op.name}.running_var"].view(-1)    # update reaches the stacks
            wt, bias = params[op.weight].reshape(-1), params[op.bias].reshape(-1)
            out, smean, sinvstd = torch.ops.aten.native_batch_norm(
                h, wt, bias, mean, var, True, momentum, eps)
            return out, layout, (h, wt, mean, var, smean, sinvstd)
        if op.kind == "conv":
            wt = params[op.weight]
            wg = wt.reshape(K * wt.shape[1], *wt.shape[2:])
            bias = None if op.bias is None else params[op.bias].reshape(-1)
            stride, padding, dilation = op.args
            out = F.conv2d(h, wg, bias, stride, padding, dilation, groups=K).contiguous()
            return out, "g", (h, wg, out.shape)
        if op.kind == "linear":
            a = h.reshape(b, K, -1).transpose(0, 1) if layout == "g" else h  # (K, b, F)
            wt = params[op.weight]  # (K, O, F); W a^T is the faster product on the CPU
            if op.bias is None:
                out = torch.bmm(wt, a.transpose(1, 2))
            else:
                out = torch.baddbmm(params[op.bias].unsqueeze(2), wt, a.transpose(1, 2))
            return out.transpose(1, 2), "k", (a, layout)
        if op.kind == "relu":  # in place on a fresh conv / linear / pool output
            out = torch.relu_(h) if op.inplace else torch.relu(h)
            return out, layout, out
        if op.kind == "maxpool":
            out, idx = torch.ops.aten.max_pool2d_with_indices(h, *op.args)
            return out, layout, (h, idx)
        if op.kind == "dropout":
            p = op.args[0]
            if p == 0.0:
                return h, layout, None
            out, mask = torch.ops.aten.native_dropout(h, p, True)
            return out, layout, mask
        if op.kind == "flatten":
            if layout == "g":
                return h.reshape(b, -1), "g", h.shape
            return h.reshape(K, b, -1), "k", h.shape
        raise AssertionError(op.kind)

    @staticmethod
    def _backward(op: _Op, params, d, s, grads, K, b, need_input: bool):
        if op.kind == "bn":
            h, wt, mean, var, smean, sinvstd = s
            gi, gw, gb = torch.ops.aten.native_batch_norm_backward(
                d.reshape(h.shape).contiguous(), h, wt, mean, var, smean, sinvstd, True,
                op.args[0], [need_input, True, True])
            grads[op.weight] = gw.reshape(params[op.weight].shape)
            grads[op.bias] = gb.reshape(params[op.bias].shape)
            return gi
        if op.kind == "conv":
            h, wg, out_shape = s
            stride, padding, dilation = op.args
            bias_sizes = None if op.bias is None else [wg.shape[0]]
            gi, gw, gb = torch.ops.aten.convolution_backward(
                d.reshape(out_shape).contiguous(), h, wg, bias_sizes, stride, padding,
                dilation, False, [0, 0], K, [need_input, True, op.bias is not None])
            grads[op.weight] = gw.reshape(params[op.weight].shape)
            if op.bias is not None:
                grads[op.bias] = gb.reshape(params[op.bias].shape)
            return gi
        if op.kind == "linear":
            a, in_layout = s
            grads[op.weight] = torch.bmm(d.transpose(1, 2), a)
            if op.bias is not None:
                grads[op.bias] = d.sum(1)
            if not need_input:
                return None
            wt = params[op.weight]
            if in_layout != "g":
                return torch.bmm(d, wt)  # (K, b, F)
            # in the convolution layout: the same products written straight into a
            # contiguous (b, K, F), which the next backward reads (and may overwrite)
            gi = torch.empty((b, K, wt.shape[2]), dtype=d.dtype, device=d.device)
            torch.bmm(d, wt, out=gi.transpose(0, 1))
            return gi
        if op.kind == "relu":
            if d.shape == s.shape:
                if d.is_contiguous() and s.is_contiguous():
                    # d is a fresh gradient that nothing else reads: overwritten in place
                    return torch.ops.aten.threshold_backward.grad_input(d, s, 0,
                                                                        grad_input=d)
                return torch.ops.aten.threshold_backward(d, s, 0)
            # d: a (b, K, F) view; read it per client as (b, K, C, H, W) and write the
            # result in the layout of s, in one pass
            per = (b, K, s.shape[1] // K, *s.shape[2:])
            out = torch.empty_like(s)
            torch.ops.aten.threshold_backward.grad_input(d.view(per), s.view(per), 0,
                                                         grad_input=out.view(per))
            return out
        if op.kind == "maxpool":
            h, idx = s
            d = d.reshape(idx.shape).contiguous()
            return torch.ops.aten.max_pool2d_with_indices_backward(d, h, *op.args, idx)
        if op.kind == "dropout":
            if s is None:
                return d
            return torch.ops.aten.native_dropout_backward(d.reshape(s.shape), s,
                                                          1.0 / (1.0 - op.args[0]))
        if op.kind == "flatten":
            # a strided view (a linear layer's input gradient) passes through: the next
            # op reads it in its own shape (relu without a copy, see above)
            return d.view(s) if d.is_contiguous() else d
        raise AssertionError(op.kind)
