"""Allreduce message sizes and counts of a tensor-parallel model, read from its config.json.

The screen measures one allreduce in isolation; to be worth anything it must measure the size
the server really moves. Under tensor parallelism every ``RowParallelLinear`` ends with an
allreduce of its output (vLLM ``vllm/model_executor/layers/linear.py``, ``RowParallelLinear``
``forward``: ``tensor_model_parallel_all_reduce`` when ``reduce_results`` and tp_size > 1). That
output is one hidden-state row per token in the model's activation dtype, so

    decode allreduce bytes = hidden_size x bytes per element x tokens per step

(14,336 B for DeepSeek-V3: 7168 x 2 bytes x 1 token). The number of such allreduces per token
is 2 x num_hidden_layers for a standard TP transformer: the attention output projection
(``o_proj``) and the MLP output (``down_proj``, or the MoE block's single combined reduce), see
:func:`allreduces_per_token` for the rule and where it does not hold.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuner.errors import InputError

__all__ = ["allreduces_per_token", "decode_allreduce_bytes", "load_model_shape", "prefill_allreduce_bytes"]

#: Bytes per element of the activation dtypes a server computes in.
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
_DTYPE_ALIASES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "torch.bfloat16": "bfloat16",
                  "fp16": "float16", "half": "float16", "float16": "float16", "torch.float16": "float16",
                  "fp32": "float32", "float": "float32", "float32": "float32", "torch.float32": "float32"}
#: What an unquantized-looking dtype resolves to when config.json names none or float32: vLLM
#: ``vllm/config/model.py`` ``_resolve_auto_dtype`` ("Downcast for float32 models") serves in the
#: platform's first supported dtype, bfloat16 on GPUs that have it (float16 before Ampere:
#: the same 2 bytes).
_AUTO_DTYPE = "bfloat16"


@dataclass(frozen=True)
class ModelShape:
    """What sizes the TP allreduces of a model: read by :func:`load_model_shape`.

    ``hidden_size`` (elements) and ``num_hidden_layers`` come from the text model (``text_config``
    of a multimodal config when present). ``activation_dtype`` is the dtype the hidden states
    travel in (``bfloat16``, ``float16`` or ``float32``), ``activation_bytes`` its size, and
    ``dtype_reason`` says which key decided it and why quantization does not change it.
    ``quantization`` describes the checkpoint's weight format (None if unquantized).
    ``first_dense_layers`` is DeepSeek's ``first_k_dense_replace`` (layers with a dense MLP).
    """

    path: str
    model_type: str | None
    architectures: tuple[str, ...]
    hidden_size: int
    num_hidden_layers: int
    activation_dtype: str
    activation_bytes: int
    dtype_reason: str
    quantization: str | None = None
    from_text_config: bool = False
    is_moe: bool = False
    n_routed_experts: int | None = None
    uses_mla: bool = False
    num_nextn_predict_layers: int = 0
    first_dense_layers: int = 0


@dataclass(frozen=True)
class MessageSize:
    """One allreduce: ``bytes`` per call, ``tokens`` rows of ``hidden_size`` elements in
    ``dtype``, and ``reason`` (one paragraph: the formula with its numbers and the dtype choice)."""

    bytes: int
    tokens: int
    dtype: str
    reason: str


@dataclass(frozen=True)
class AllreduceCount:
    """Allreduces per generated token on the decode path: ``count``, the ``rule`` it follows,
    and ``caveats``: where the count may be off for this model or server setting."""

    count: int
    rule: str
    caveats: list[str] = field(default_factory=list)


def _err(path: str, key: str, value: object, accepted: str, why: str = "") -> InputError:
    return InputError(path, key, value, accepted, why)


def _positive_int(cfg: dict[str, Any], key: str, path: str, where: str) -> int:
    value = cfg.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _err(path, f"{where}{key}", value, "a positive integer",
                   "needed to size the tensor-parallel allreduce")
    return value


def _describe_quantization(q: dict[str, Any]) -> str:
    """A short description of a Hugging Face ``quantization_config``."""
    method = q.get("quant_method") or q.get("format") or "unknown method"
    parts = [str(method)]
    if q.get("quant_algo"):
        parts.append(str(q["quant_algo"]))
    if q.get("fmt"):
        parts.append(str(q["fmt"]))
    if q.get("format") and q.get("quant_method"):
        parts.append(str(q["format"]))
    groups = q.get("config_groups")
    if isinstance(groups, dict):
        for group in groups.values():
            weights = group.get("weights") if isinstance(group, dict) else None
            if isinstance(weights, dict) and weights.get("num_bits"):
                parts.append(f"{weights.get('type', '')}{weights['num_bits']} weights"
                             + (f", group {weights['group_size']}" if weights.get("group_size") else ""))
                break
    if q.get("bits"):
        parts.append(f"{q['bits']}-bit weights")
    if q.get("weight_block_size"):
        parts.append("block " + "x".join(str(b) for b in q["weight_block_size"]))
    return ", ".join(parts)


def load_model_shape(config_json_path: str | Path, *, served_dtype: str | None = None) -> ModelShape:
    """Read a Hugging Face ``config.json`` (or a model directory holding one).

    The text model's keys are taken from ``text_config`` when the config nests one (multimodal
    wrappers such as Kimi-K2.5: ``model_type`` ``kimi_k25`` with a DeepSeek-V3-shaped
    ``text_config``), else from the top level. The activation dtype is, in order: ``served_dtype``
    (the server's ``--dtype`` when not ``auto``), ``dtype`` or ``torch_dtype`` of the text config,
    then of the top level (transformers >= 4.56 writes ``dtype``); ``float32`` or nothing means
    bfloat16, as vLLM's ``auto`` serves it. Weight quantization (fp8, int4, nvfp4, awq, gptq)
    never changes it: quantized linear layers still return activations in the model dtype, and
    that output is what ``RowParallelLinear`` allreduces.

    Raises :class:`tuner.errors.InputError` (exit 2) when the file is missing or not JSON, when
    ``hidden_size`` or ``num_hidden_layers`` is missing or not a positive integer, or when a
    dtype is not one of bfloat16, float16, float32.
    """
    path = Path(config_json_path)
    if path.is_dir():
        path = path / "config.json"
    where = str(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _err(where, "[model] config", where, "the path of a Hugging Face config.json or its directory",
                   "no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _err(where, "[model] config", where, "a readable JSON file", str(exc)) from None
    if not isinstance(raw, dict):
        raise _err(where, "(top level)", type(raw).__name__, "a JSON object")
    text = raw.get("text_config")
    nested = isinstance(text, dict) and "hidden_size" in text
    cfg: dict[str, Any] = text if nested else raw  # type: ignore[assignment]
    prefix = "text_config." if nested else ""
    hidden = _positive_int(cfg, "hidden_size", where, prefix)
    layers = _positive_int(cfg, "num_hidden_layers", where, prefix)
    dtype, reason = _activation_dtype(raw, cfg, prefix, where, served_dtype)
    quant = cfg.get("quantization_config") or raw.get("quantization_config")
    quantization = _describe_quantization(quant) if isinstance(quant, dict) else None
    if quantization:
        reason += (f" The checkpoint's weights are quantized ({quantization}); that changes the "
                   "weights, not the activations a RowParallelLinear returns and allreduces.")
    experts = cfg.get("n_routed_experts") or cfg.get("num_experts") or cfg.get("num_local_experts")
    architectures = cfg.get("architectures") or raw.get("architectures") or []
    return ModelShape(
        path=where, model_type=raw.get("model_type"), architectures=tuple(str(a) for a in architectures),
        hidden_size=hidden, num_hidden_layers=layers, activation_dtype=dtype,
        activation_bytes=DTYPE_BYTES[dtype], dtype_reason=reason, quantization=quantization,
        from_text_config=nested, is_moe=bool(experts and experts > 1),
        n_routed_experts=int(experts) if experts else None, uses_mla=bool(cfg.get("kv_lora_rank")),
        num_nextn_predict_layers=int(cfg.get("num_nextn_predict_layers") or 0),
        first_dense_layers=min(int(cfg.get("first_k_dense_replace") or 0), layers))


def _activation_dtype(raw: dict[str, Any], cfg: dict[str, Any], prefix: str, where: str,
                      served_dtype: str | None) -> tuple[str, str]:
    accepted = "one of bfloat16, float16, float32 (or auto)"
    if served_dtype and served_dtype.lower() != "auto":
        name = _DTYPE_ALIASES.get(served_dtype.lower())
        if name is None:
            raise _err(where, "--dtype", served_dtype, accepted)
        return name, f"Activations are {name}: the server runs with --dtype {served_dtype}."
    for scope, key_prefix in ((cfg, prefix), (raw, "")):
        for key in ("dtype", "torch_dtype"):
            value = scope.get(key)
            if value is None:
                continue
            name = _DTYPE_ALIASES.get(str(value).lower())
            if name is None:
                raise _err(where, f"{key_prefix}{key}", value, accepted,
                           "not a dtype a server computes activations in")
            if name == "float32":
                return _AUTO_DTYPE, (f"Activations are {_AUTO_DTYPE}: config.json says {key_prefix}{key}="
                                     f"{value}, which a server's --dtype auto serves in bfloat16 (float16 on GPUs "
                                     "without bfloat16; 2 bytes either way).")
            return name, f"Activations are {name}: config.json {key_prefix}{key}={value}."
    return _AUTO_DTYPE, (f"Activations are {_AUTO_DTYPE}: config.json names no dtype, and a server's --dtype "
                         "auto then serves in bfloat16 (float16 on GPUs without it; 2 bytes either way).")


def _size(shape: ModelShape, tokens: int, what: str) -> MessageSize:
    n = shape.hidden_size * shape.activation_bytes * tokens
    reason = (f"{what}: hidden_size {shape.hidden_size} x {shape.activation_bytes} bytes "
              f"({shape.activation_dtype}) x {tokens} token(s) = {n} bytes per allreduce. {shape.dtype_reason}")
    return MessageSize(bytes=n, tokens=tokens, dtype=shape.activation_dtype, reason=reason)


def decode_allreduce_bytes(shape: ModelShape, tokens_per_step: int = 1) -> MessageSize:
    """Bytes of one decode-step TP allreduce: hidden_size x activation bytes x tokens_per_step.

    ``tokens_per_step`` is the number of tokens in one decode forward pass: 1 for one stream,
    the batch size with concurrent streams, (1 + draft length) with speculative decoding.
    Raises ValueError when it is below 1.
    """
    if tokens_per_step < 1:
        raise ValueError(f"tokens_per_step must be >= 1, got {tokens_per_step}")
    return _size(shape, tokens_per_step, "Decode allreduce")


def prefill_allreduce_bytes(shape: ModelShape, prompt_tokens: int,
                            max_num_batched_tokens: int | None = None) -> MessageSize:
    """Bytes of one prefill TP allreduce for a prompt of ``prompt_tokens`` tokens.

    With chunked prefill the server splits a long prompt into chunks of at most
    ``max_num_batched_tokens`` tokens (vLLM ``--max-num-batched-tokens``); each chunk's forward
    pass allreduces that many rows, so the size is capped there when the cap is given.
    Raises ValueError for a count below 1.
    """
    if prompt_tokens < 1 or (max_num_batched_tokens is not None and max_num_batched_tokens < 1):
        raise ValueError(f"token counts must be >= 1, got {prompt_tokens}, {max_num_batched_tokens}")
    tokens = min(prompt_tokens, max_num_batched_tokens) if max_num_batched_tokens else prompt_tokens
    what = "Prefill allreduce"
    if tokens < prompt_tokens:
        what += f" (prompt of {prompt_tokens} tokens in chunks of {tokens})"
    return _size(shape, tokens, what)


def allreduces_per_token(shape: ModelShape, *, expert_parallel: bool = False,
                         data_parallel_attention: bool = False) -> AllreduceCount:
    """TP allreduces per decoded token: 2 x num_hidden_layers for a standard TP transformer.

    Rule: each decoder layer ends two row-parallel blocks with one allreduce each, the attention
    output projection and the MLP output. Sources (vLLM): ``RowParallelLinear.forward`` in
    ``vllm/model_executor/layers/linear.py``; in ``vllm/model_executor/models/deepseek_v2.py`` the
    MLA attention's ``o_proj`` is a ``RowParallelLinear`` (the latent ``fused_qkv_a_proj`` is
    replicated, no communication), so MLA keeps one allreduce for attention; ``DeepseekV2MLP``'s
    ``down_proj`` is one for dense layers; ``DeepseekV2MoE`` builds its shared experts with
    ``reduce_results=False`` and lets the fused MoE layer reduce routed + shared output once.

    Where it does not hold (listed in ``caveats``): expert parallelism (the MoE layers exchange
    tokens with all-to-all or all-gather/reduce-scatter instead of an allreduce), attention run
    data-parallel, sequence-parallel MoE (all-gather), servers that fuse or replace allreduces
    (custom allreduce kernels, allreduce+RMSNorm fusion: still one per site, but maybe not
    through NCCL), the one extra allreduce per step of ``VocabParallelEmbedding``, and the MTP
    draft layers of speculative decoding.
    """
    layers = shape.num_hidden_layers
    attention = 0 if data_parallel_attention else layers
    mlp = layers
    caveats: list[str] = []
    rule = (f"2 x num_hidden_layers = 2 x {layers}: one allreduce after the attention output projection "
            "(o_proj) and one after the MLP (down_proj, or the MoE block's single combined reduce) per "
            "layer, each a row-parallel linear layer.")
    if shape.is_moe and expert_parallel:
        mlp = shape.first_dense_layers
        rule = (f"{attention} attention allreduces + {mlp} dense-MLP allreduces: with expert parallelism the "
                f"{layers - mlp} MoE layers exchange tokens by all-to-all (or all-gather/reduce-scatter), "
                "not allreduce.")
    elif shape.is_moe:
        caveats.append("MoE under pure TP: one allreduce per MoE layer (routed and shared experts summed first); "
                       "with --enable-expert-parallel the MoE layers use all-to-all instead.")
    if data_parallel_attention:
        rule += " Attention runs data-parallel: no attention allreduce."
    if shape.uses_mla:
        caveats.append("MLA under TP keeps one allreduce per layer for attention (o_proj); the latent "
                       "projections are replicated.")
    caveats.append("One more allreduce per step comes from the vocabulary-parallel input embedding "
                   "(VocabParallelEmbedding), not counted here.")
    caveats.append("A server may carry small allreduces outside NCCL (a custom allreduce, symmetric "
                   "memory, allreduce+RMSNorm fusion): the count is the same, NCCL's share may not be.")
    if shape.num_nextn_predict_layers:
        caveats.append(f"{shape.num_nextn_predict_layers} MTP layer(s) add their own allreduces when "
                       "speculative decoding uses them.")
    return AllreduceCount(count=attention + mlp, rule=rule, caveats=caveats)
