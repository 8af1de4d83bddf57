"""Linear layers the CPU runs faster: oneDNN with pre-packed weights, projections fused.

A scoring pass multiplies 50-200 token rows by every weight matrix of the model. torch's default
CPU path (MKL sgemm on the plain row-major weight) re-lays the weight out on every call; oneDNN's
inner product with a weight packed once at load runs the same fp32 arithmetic about 1.2-2x
faster at these sizes (the language-model head, 49k rows, gains the most). Projections that read
the same input are fused into one product: ``q_proj``/``k_proj``/``v_proj`` of an attention
block and ``gate_proj``/``up_proj`` of a gated MLP (Llama, Qwen2, Gemma-3 name them so).

Only the arithmetic's order changes (scores move by ~1e-5, fp32 rounding); the modules keep the
model's interface, so the model's own forward and ``generate`` run unchanged.

    use_onednn_linear(model)          # in place, after any adapter is merged
"""
from __future__ import annotations

from typing import Sequence

import torch

#: Groups of sibling projections computed as one product (the first one called computes all).
FUSED_GROUPS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


def onednn_available() -> bool:
    """Whether this torch build has oneDNN (mkldnn) and its packed linear operators."""
    return bool(torch.backends.mkldnn.is_available()) and hasattr(torch.ops.mkldnn,
                                                                  "_linear_pointwise")


def _pack(weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous())


def _linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class PackedLinear(torch.nn.Module):
    """``nn.Linear`` (inference only) on a oneDNN-packed copy of its weight."""

    def __init__(self, linears: Sequence[torch.nn.Linear]):
        super().__init__()
        weight = torch.cat([lin.weight for lin in linears]) if len(linears) > 1 \
            else linears[0].weight
        biases = [lin.bias for lin in linears]
        if any(b is None for b in biases) and not all(b is None for b in biases):
            raise ValueError("fused projections must all have a bias or none")
        self.in_features = linears[0].in_features
        self.out_features = int(weight.shape[0])
        self.packed = _pack(weight)
        self.bias = None if biases[0] is None else \
            torch.cat([b.detach() for b in biases]).contiguous()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _linear(x, self.packed, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, oneDNN packed"


class FusedProjection(PackedLinear):
    """The first projection of a fused group: computes every member's output in one product,
    returns its own part and keeps the others for :class:`FusedPart` (same input object)."""

    def __init__(self, linears: Sequence[torch.nn.Linear]):
        super().__init__(linears)
        self.sizes = [lin.out_features for lin in linears]
        self._input: torch.Tensor | None = None
        self._parts: tuple[torch.Tensor, ...] = ()

    def all_parts(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if x is not self._input:
            self._parts = _linear(x, self.packed, self.bias).split(self.sizes, dim=-1)
            self._input = x
        return self._parts

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.all_parts(x)[0]

    def release(self) -> None:
        """Drop the kept outputs (they belong to the latest call only)."""
        self._input, self._parts = None, ()


class FusedPart(torch.nn.Module):
    """A later member of a fused group: its slice of the group's product. Called with another
    input than the group's latest (a model that calls its projections in another order), it
    recomputes the product, so the result is always right."""

    def __init__(self, group: FusedProjection, index: int):
        super().__init__()
        self._group = [group]          # a list: not registered as a child module twice
        self.index = index
        self.out_features = group.sizes[index]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        group = self._group[0]
        out = group.all_parts(x)[self.index]
        if self.index == len(group.sizes) - 1:
            group.release()             # the group's last member: nothing else needs them
        return out


def _plain_linear(module) -> bool:
    return type(module) is torch.nn.Linear


def use_onednn_linear(model: torch.nn.Module) -> int:
    """Replace, in place, every plain ``nn.Linear`` of ``model`` (fp32, CPU) by a oneDNN-packed
    one, fusing :data:`FUSED_GROUPS`. Returns how many linear layers were replaced. Raises
    ValueError where oneDNN is missing or the model is not fp32 on the CPU."""
    if not onednn_available():
        raise ValueError("kernels: onednn needs a torch build with oneDNN (mkldnn)")
    param = next(model.parameters(), None)
    if param is not None and (param.device.type != "cpu" or param.dtype != torch.float32):
        raise ValueError(f"kernels: onednn runs float32 models on the CPU, not "
                         f"{param.dtype} on {param.device.type}")
    replaced = 0
    # only the parents are listed: a list of every module would keep each replaced nn.Linear
    # (and its weight) alive until the end, twice the model's memory at the peak
    parents = [m for m in model.modules() if any(_plain_linear(c) for c in m.children())]
    with torch.no_grad():
        for parent in parents:
            children = dict(parent.named_children())
            for group in FUSED_GROUPS:
                members = [children.get(name) for name in group]
                if all(_plain_linear(m) for m in members) and \
                        len({m.in_features for m in members}) == 1:
                    fused = FusedProjection(members)
                    setattr(parent, group[0], fused)
                    for i, name in enumerate(group[1:], start=1):
                        setattr(parent, name, FusedPart(fused, i))
                    replaced += len(group)
            for name, child in parent.named_children():
                if _plain_linear(child):
                    setattr(parent, name, PackedLinear([child]))
                    replaced += 1
    return replaced
