"""Allreduce sizes and counts from real config.json shapes (tests/fixtures/model_configs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.errors import ExitCode, InputError
from tuner.inputs.model import (
    allreduces_per_token,
    decode_allreduce_bytes,
    load_model_shape,
    prefill_allreduce_bytes,
)

CONFIGS = Path(__file__).resolve().parents[2] / "fixtures" / "model_configs"


def write(tmp_path: Path, body: object, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def test_deepseek_v3_fp8_checkpoint() -> None:
    shape = load_model_shape(CONFIGS / "deepseek-v3.config.json")
    assert (shape.hidden_size, shape.num_hidden_layers, shape.activation_dtype) == (7168, 61, "bfloat16")
    assert shape.architectures == ("DeepseekV3ForCausalLM",) and shape.model_type == "deepseek_v3"
    assert shape.is_moe and shape.n_routed_experts == 256 and shape.uses_mla and shape.first_dense_layers == 3
    assert shape.quantization == "fp8, e4m3, block 128x128"
    decode = decode_allreduce_bytes(shape)
    assert (decode.bytes, decode.tokens, decode.dtype) == (14336, 1, "bfloat16")
    assert "7168 x 2 bytes (bfloat16) x 1 token(s) = 14336 bytes" in decode.reason
    assert "torch_dtype=bfloat16" in decode.reason and "weights are quantized (fp8" in decode.reason
    assert decode_allreduce_bytes(shape, tokens_per_step=4).bytes == 57344
    count = allreduces_per_token(shape)
    assert count.count == 122 and "2 x 61" in count.rule
    assert any("MLA" in c for c in count.caveats) and any("expert-parallel" in c for c in count.caveats)
    # With expert parallelism only attention and the 3 dense MLPs allreduce.
    assert allreduces_per_token(shape, expert_parallel=True).count == 61 + 3
    assert allreduces_per_token(shape, data_parallel_attention=True).count == 61


def test_llama_3_70b_dense() -> None:
    shape = load_model_shape(CONFIGS / "llama-3.3-70b-instruct.config.json")
    assert (shape.hidden_size, shape.num_hidden_layers, shape.activation_bytes) == (8192, 80, 2)
    assert not shape.is_moe and not shape.uses_mla and shape.quantization is None
    assert decode_allreduce_bytes(shape).bytes == 16384
    assert allreduces_per_token(shape).count == 160
    assert allreduces_per_token(shape, expert_parallel=True).count == 160  # no experts: nothing changes
    prefill = prefill_allreduce_bytes(shape, 2048)
    assert prefill.bytes == 8192 * 2 * 2048 == 33554432 and prefill.tokens == 2048


def test_kimi_k25_multimodal_text_config_int4() -> None:
    shape = load_model_shape(CONFIGS / "kimi-k2.5.config.json")
    assert shape.from_text_config and shape.model_type == "kimi_k25"
    assert shape.architectures == ("KimiK25ForConditionalGeneration",)
    assert (shape.hidden_size, shape.num_hidden_layers) == (7168, 61)
    assert shape.n_routed_experts == 384 and shape.first_dense_layers == 1
    assert shape.quantization == "pack-quantized, int4 weights, group 32"
    decode = decode_allreduce_bytes(shape)
    assert decode.bytes == 14336 and "names no dtype" in decode.reason and "int4 weights" in decode.reason
    assert allreduces_per_token(shape).count == 122
    assert allreduces_per_token(shape, expert_parallel=True).count == 62


def test_prefill_is_capped_by_chunked_prefill() -> None:
    shape = load_model_shape(CONFIGS / "deepseek-v3.config.json")
    assert prefill_allreduce_bytes(shape, 2000).bytes == 28672000
    chunked = prefill_allreduce_bytes(shape, 20000, max_num_batched_tokens=8192)
    assert chunked.bytes == 7168 * 2 * 8192 == 117440512 and chunked.tokens == 8192
    assert "prompt of 20000 tokens in chunks of 8192" in chunked.reason
    with pytest.raises(ValueError):
        prefill_allreduce_bytes(shape, 0)
    with pytest.raises(ValueError):
        decode_allreduce_bytes(shape, tokens_per_step=0)


def test_dtype_rules(tmp_path: Path) -> None:
    base = {"hidden_size": 4096, "num_hidden_layers": 32}
    newer = load_model_shape(write(tmp_path, {**base, "dtype": "float16"}))  # transformers >= 4.56 key
    assert newer.activation_dtype == "float16" and "dtype=float16" in newer.dtype_reason
    fp32 = load_model_shape(write(tmp_path, {**base, "torch_dtype": "float32"}))
    assert fp32.activation_dtype == "bfloat16" and "serves in bfloat16" in fp32.dtype_reason
    served = load_model_shape(write(tmp_path, {**base, "torch_dtype": "bfloat16"}), served_dtype="half")
    assert served.activation_dtype == "float16" and "--dtype half" in served.dtype_reason
    nested = {"model_type": "wrapper", "torch_dtype": "float16",
              "text_config": {**base, "torch_dtype": "bfloat16"}}
    assert load_model_shape(write(tmp_path, nested)).activation_dtype == "bfloat16"  # text config wins
    directory = tmp_path / "model"
    directory.mkdir()
    write(directory, base)
    assert load_model_shape(directory).hidden_size == 4096  # a model directory works too


def test_bad_configs_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        load_model_shape(tmp_path / "missing.json")
    assert err.value.exit_code == ExitCode.BAD_INPUT and "no such file" in str(err.value)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match=r"broken\.json"):
        load_model_shape(broken)
    with pytest.raises(InputError) as err:
        load_model_shape(write(tmp_path, {"num_hidden_layers": 2}))
    assert err.value.key == "hidden_size" and "positive integer" in str(err.value)
    with pytest.raises(InputError) as err:
        load_model_shape(write(tmp_path, {"text_config": {"hidden_size": 8, "num_hidden_layers": 0}}))
    assert err.value.key == "text_config.num_hidden_layers"
    with pytest.raises(InputError) as err:
        load_model_shape(write(tmp_path, {"hidden_size": 8, "num_hidden_layers": 1, "torch_dtype": "int8"}))
    assert err.value.key == "torch_dtype" and err.value.value == "int8"
    with pytest.raises(InputError, match="--dtype"):
        load_model_shape(write(tmp_path, {"hidden_size": 8, "num_hidden_layers": 1}), served_dtype="fp64")
