"""The allreduce sizes a night measures: decode at every ``probe.concurrency`` level and the prompt's prefill.

A night's numbers come from allreduces of more than one size, and a variable that cannot act
at one of them may act at another. Under tensor parallelism one allreduce moves one hidden-state
row per token in the step (:mod:`tuner.inputs.model`: hidden_size x activation bytes x tokens):

* decode: ``C`` streams in flight decode ``C x tokens_per_step`` rows per step, so the
  single-stream probe (C=1) and each ``probe.concurrency`` level C move ``C x`` the batch-1
  decode allreduce (8 x 14,336 B = 114,688 B at C=8 for a DeepSeek-V3-sized model);
* prefill: a request's prompt is one forward pass of its prompt tokens, ``C`` requests that
  start together prefill ``C x prompt_tokens`` rows, cut into chunks of the server's
  ``--max-num-batched-tokens`` (vLLM) or ``--chunked-prefill-size`` (SGLang) when the command
  gives one. The prefill counts when the study's metric includes it, ``output_tok_s``
  (completion tokens / end-to-end time), at every level; with ``decode_tok_s`` (1 / TPOT) the
  verdicts never read it (the concurrency table's aggregate tok/s still holds it, as a figure).

The prompt's token count is ``[model] prompt_tokens`` when given, else read back from the
prefill allreduces a ``nccl-tune diagnose`` logged during its probe (those sizes are the
single stream's prefill as NCCL saw it). A size that cannot be known is listed in
:attr:`NightSizes.unknown`: the rules then drop no variable (never merge on a guess).

Between a level's full batch and one stream the batch shrinks as requests end; those partial
batches lie between the judged sizes (NCCL's launch keeps more channels only as the size grows:
src/enqueue.cc, topoGetAlgoInfo), and are not judged separately.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tuner.diagnose import Diagnosis, model_decode_size
from tuner.inputs import ExperimentConfig, load_model_shape
from tuner.record import Metric

__all__ = ["NightSize", "chunk_tokens", "night_sizes"]

#: Server flags that cap the tokens of one forward pass (vLLM ``--max-num-batched-tokens``,
#: SGLang ``--chunked-prefill-size``): a longer prefill runs in chunks of that many tokens.
CHUNK_FLAGS = ("--max-num-batched-tokens", "--chunked-prefill-size")


@dataclass(frozen=True)
class NightSize:
    """One allreduce the night measures: ``nbytes`` (B), its ``phase`` and the ``streams`` (C) in flight."""

    nbytes: int
    phase: Literal["decode", "prefill"]
    streams: int

    def label(self) -> str:
        """``"114688 B (decode, C=8)"``."""
        return f"{self.nbytes} B ({self.phase}, C={self.streams})"


@dataclass(frozen=True)
class NightSizes:
    """The sizes of :func:`night_sizes`: ``sizes`` (decode first, by streams), ``unknown``:
    allreduces the night measures whose size is not known (one phrase each, with what would
    give it), and ``why``: where the numbers came from, in one sentence."""

    sizes: tuple[NightSize, ...]
    unknown: tuple[str, ...]
    why: str

    @property
    def decode(self) -> tuple[int, ...]:
        """The decode sizes (B), one per level, batch 1 first."""
        return tuple(s.nbytes for s in self.sizes if s.phase == "decode")

    @property
    def prefill(self) -> tuple[int, ...]:
        """The prefill sizes (B) judged (empty when the prefill is not measured or not known)."""
        return tuple(s.nbytes for s in self.sizes if s.phase == "prefill")

    def text(self) -> str:
        """The sizes in words: ``"14336 B (decode, C=1), 114688 B (decode, C=8)"``."""
        return ", ".join(s.label() for s in self.sizes)


def chunk_tokens(command: Sequence[str]) -> int | None:
    """The server's prefill chunk (tokens) from its command (:data:`CHUNK_FLAGS`, ``--flag N``
    or ``--flag=N``), or None when the command does not set one."""
    for i, arg in enumerate(command):
        for flag in CHUNK_FLAGS:
            text = arg[len(flag) + 1:] if arg.startswith(flag + "=") else (
                command[i + 1] if arg == flag and i + 1 < len(command) else None)
            if text is not None and text.isdigit() and int(text) > 0:
                return int(text)
    return None


def night_sizes(cfg: ExperimentConfig | None, diag: Diagnosis | None = None) -> NightSizes:
    """The allreduce sizes ``cfg``'s night measures (module docstring), with ``diag`` (a study's
    ``nccl-tune diagnose``) for what the config does not say: the decode size without ``[model]``,
    the prompt's prefill without ``[model] prompt_tokens``. ``cfg`` None: the diagnosis alone
    (one stream; its prefill counted). Raises :class:`tuner.errors.InputError` when ``[model]
    config`` cannot be read (checked when the file was loaded)."""
    levels = (1, *sorted({c for c in (cfg.probe.concurrency if cfg else ()) if c > 1}))
    size = model_decode_size(cfg) if cfg is not None else None
    model = cfg.model if cfg is not None else None
    batch1 = size.nbytes if size is not None else (diag.decode.nbytes if diag is not None else None)
    if batch1 is None:
        return NightSizes((), ("the decode allreduce: no [model] config and no diagnosed decode size",),
                          "no decode size known")
    why = [f"decode {batch1} B per stream ({'[model] config' if size else 'the diagnosis'})"]
    if len(levels) > 1:
        why.append(f"times the streams of probe.concurrency {list(cfg.probe.concurrency) if cfg else []}")
    sizes = [NightSize(c * batch1, "decode", c) for c in levels]
    counted = list(levels) if cfg is None or cfg.probe.metric is Metric.OUTPUT else []
    if not counted:
        why.append("no prefill: the metric decode_tok_s leaves it out")
        return NightSizes(tuple(sizes), (), "; ".join(why))
    row = (load_model_shape(model.config, served_dtype=model.dtype) if model is not None else None)
    row_bytes = row.hidden_size * row.activation_bytes if row is not None else batch1
    chunk = chunk_tokens(cfg.server.command) if cfg is not None else None
    tokens = model.prompt_tokens if model is not None else None
    logged = sorted(set(diag.prefill_bytes)) if diag is not None else []
    unknown: list[str] = []
    if tokens is not None:
        why.append(f"prefill of [model] prompt_tokens {tokens} x {row_bytes} B per token"
                   + (f" in chunks of {chunk} tokens" if chunk else ""))
    elif logged:
        why.append(f"prefill as the diagnosis logged it at C=1 ({', '.join(map(str, logged))} B)")
        if len(logged) == 1 and logged[0] % row_bytes == 0:
            tokens = logged[0] // row_bytes
            if len(counted) > 1:
                why.append(f"{tokens} prompt tokens of {row_bytes} B, C streams prefill C times that")
    else:
        why.append("prefill size not known: give [model] prompt_tokens or diagnose the study")
    for c in counted:
        if tokens is None and c == 1 and logged:
            sizes += [NightSize(n, "prefill", 1) for n in logged]
        elif tokens is None:
            unknown.append(f"the prefill at C={c} (give [model] prompt_tokens)")
        else:
            sizes += [NightSize(n * row_bytes, "prefill", c) for n in _chunks(c * tokens, chunk)]
    return NightSizes(tuple(_unique(sizes)), tuple(unknown), "; ".join(why))


def _chunks(tokens: int, chunk: int | None) -> list[int]:
    """Token counts of one prefill's forward passes: whole chunks, then the rest."""
    if chunk is None or tokens <= chunk:
        return [tokens]
    return [chunk] + ([tokens % chunk] if tokens % chunk else [])


def _unique(sizes: list[NightSize]) -> list[NightSize]:
    seen: set[tuple[int, str]] = set()
    out = []
    for s in sizes:
        if (s.nbytes, s.phase) not in seen:
            seen.add((s.nbytes, s.phase))
            out.append(s)
    return out
