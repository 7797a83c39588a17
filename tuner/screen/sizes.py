"""Which allreduce sizes the screen measures, and how many allreduces a decoded token makes.

From ``[screen] sizes`` (bytes; the first is the decode size, the largest the prefill size) or,
without it, from ``[model]`` (:mod:`tuner.inputs.model`): the decode size is hidden_size x activation
bytes x ``tokens_per_step`` and, with ``prompt_tokens``, the prefill size is hidden_size x
activation bytes x ``prompt_tokens``. The allreduce count per token (for the bound,
:mod:`tuner.screen.bound`) needs ``[model]``: ``allreduces_per_token`` when given, else
:func:`tuner.inputs.model.allreduces_per_token` (2 x num_hidden_layers for a standard TP transformer).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tuner.inputs import (
    ExperimentConfig,
    allreduces_per_token,
    decode_allreduce_bytes,
    load_model_shape,
    prefill_allreduce_bytes,
)

__all__ = [
    "ScreenSizes",
    "screen_sizes",
]


@dataclass(frozen=True)
class ScreenSizes:
    """``decode`` and ``prefill`` (bytes, prefill None when not screened), ``all`` the sizes to
    measure (sorted), ``per_token``: allreduces per decoded token (None without ``[model]``),
    and ``reasons``: one sentence per number saying where it came from."""

    decode: int
    prefill: int | None
    all: tuple[int, ...]
    per_token: int | None
    reasons: list[str] = field(default_factory=list)


def screen_sizes(cfg: ExperimentConfig) -> ScreenSizes:
    """The sizes of ``cfg``'s screen (``[screen]`` must be present).

    Raises :class:`tuner.errors.InputError` when ``[model] config`` cannot be read (already
    checked when the file was loaded), ValueError without ``[screen]``.
    """
    if cfg.screen is None:
        raise ValueError("the experiment has no [screen] table")
    reasons: list[str] = []
    per_token: int | None = None
    decode: int | None = None
    prefill: int | None = None
    if cfg.model is not None:
        mc = cfg.model
        shape = load_model_shape(mc.config, served_dtype=mc.dtype)
        if mc.allreduces_per_token is not None:
            per_token = mc.allreduces_per_token
            reasons.append(f"Allreduces per token: {per_token}, as [model] allreduces_per_token says.")
        else:
            count = allreduces_per_token(shape, expert_parallel=mc.expert_parallel)
            per_token = count.count
            reasons.append(f"Allreduces per token: {count.rule}")
        if not cfg.screen.sizes:
            size = decode_allreduce_bytes(shape, mc.tokens_per_step)
            decode = size.bytes
            reasons.append(size.reason)
            if mc.prompt_tokens is not None:
                pre = prefill_allreduce_bytes(shape, mc.prompt_tokens)
                prefill = pre.bytes
                reasons.append(pre.reason)
    if cfg.screen.sizes:
        decode = cfg.screen.sizes[0]
        others = [s for s in cfg.screen.sizes if s != decode]
        prefill = max(others) if others else None
        reasons.insert(0, f"Sizes from [screen] sizes: decode {decode} B (the first)"
                       + (f", prefill {prefill} B (the largest)." if prefill else "."))
    assert decode is not None  # the config's validator requires sizes or [model]
    sizes = {decode, *([prefill] if prefill else []), *cfg.screen.sizes}
    return ScreenSizes(decode=decode, prefill=prefill, all=tuple(sorted(sizes)), per_token=per_token,
                       reasons=reasons)
