"""One rule for "cannot act", over the sizes the night measures: decode at every probe.concurrency
level and the prompt's prefill, each under NCCL's pick from the study's diagnosis."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import ROOT, write_config
from tuner.diagnose import DecodeInfo, Diagnosis, SizeRow, TuningRow
from tuner.inputs.config import load_config
from tuner.nccl import NcclVersion
from tuner.planning import Facts, Rules, load_decode_context, night_sizes
from tuner.planning.identity import set_identity
from tuner.planning.sizes import chunk_tokens

DEEPSEEK = ROOT / "tests" / "fixtures" / "model_configs" / "deepseek-v3.config.json"
DECODE = 7168 * 2  # 14,336 B: one stream, bf16
CAP = {"NCCL_MAX_NCHANNELS": "2"}  # 14,336 B runs 1 channel, 8 x 14,336 B keeps 3
#: Ring/LL wins up to a few hundred kB, Ring/Simple at 2 MB (time = latency + bytes / (1000 x GB/s))
TUNING = [TuningRow("Ring", "LL", 10.0, 10.0), TuningRow("Ring", "Simple", 30.0, 40.0)]


def _config(tmp_path: Path, *, probe: str = "", model: str = "", command: str = "vllm serve m -tp 8") -> object:
    space = tmp_path / "space.toml"
    space.write_text('[variables.NCCL_MAX_NCHANNELS]\nvalues = ["2", "4"]\n')
    path = write_config(tmp_path / "exp.toml", command=command.split(), space=space, extra_probe=probe,
                        extra_sweep=model)
    return load_config(path, check_program=False)


def _diagnose(study: Path, *, tuning: list[TuningRow] | None = None, sizes: list[SizeRow] | None = None,
              prefill: list[int] | None = None) -> Path:
    diag = Diagnosis(
        study="s", nccl_version="2.27.3", server_nccl_version=None, cuda_version=None,
        topology={"nranks": 8, "nnodes": 1, "link": "pcie", "has_nvls": False, "coll_channels": 16,
                  "transports": ["P2P/IPC"]},
        backend={"name": "nccl", "nccl_on_decode_path": True, "reason": "", "server": "vllm"},
        echoed={}, invalid={}, warnings=[], tuning=TUNING if tuning is None else tuning, sizes=sizes or [],
        decode=DecodeInfo(DECODE, "model", "given", True, "Ring", "LL", 1, "per-operation TUNING line, 8 calls"),
        prefill_bytes=prefill or [])
    study.mkdir(parents=True, exist_ok=True)
    (study / "diagnose.json").write_text(json.dumps(diag.to_json()))
    return study


def _rules(tmp_path: Path, cfg, **diag) -> Rules:
    ctx = load_decode_context(_diagnose(tmp_path / "study", **diag), cfg)
    assert ctx is not None
    facts = Facts(NcclVersion.parse("2.27.3"), ctx.topology)
    return Rules({}, lambda: facts, decode=ctx)


DECODE_ONLY = 'metric = "decode_tok_s"'


def test_a_channel_cap_is_merged_where_the_night_measures_one_stream_only(tmp_path):
    rules = _rules(tmp_path, _config(tmp_path, probe=DECODE_ONLY))
    assert rules.key_of(CAP, []) == rules.untuned_key
    why = rules.cannot_act(CAP)
    assert why is not None and why.startswith("NCCL_MAX_NCHANNELS cannot act at 14336 B (decode, C=1)")
    assert "src/enqueue.cc" in why
    assert rules.decode is not None and "14336 B (decode, C=1) Ring/LL" in rules.decode.sentence()


def test_the_cap_is_kept_apart_where_eight_streams_decode_8_x_14336_bytes(tmp_path):
    rules = _rules(tmp_path, _config(tmp_path, probe=DECODE_ONLY + "\nconcurrency = [1, 8]"))
    assert rules.decode is not None and rules.decode.judged  # decode_tok_s: no prefill to judge
    assert rules.key_of(CAP, []) != rules.untuned_key
    assert rules.cannot_act(CAP) is None and rules.inert(CAP) == {}
    # a cap above the 3 channels 114,688 B keeps acts at neither size
    assert rules.key_of({"NCCL_MAX_NCHANNELS": "4"}, []) == rules.untuned_key
    why = rules.cannot_act({"NCCL_MAX_NCHANNELS": "4"})
    assert why is not None and "14336 B (decode, C=1), 114688 B (decode, C=8)" in why
    assert rules.decode is not None
    assert "114688 B (decode, C=8) Ring/LL" in rules.decode.sentence()
    assert rules.decode.sizes_text() == "14336 and 114688 B"


def test_the_cap_is_kept_apart_where_a_long_prompt_prefills_2_mb(tmp_path):
    model = f'[model]\nconfig = "{DEEPSEEK}"\nprompt_tokens = 150'
    rules = _rules(tmp_path, _config(tmp_path, model=model))
    assert rules.decode is not None
    assert "2150400 B (prefill, C=1) Ring/Simple" in rules.decode.sentence()  # the TUNING table's pick there
    assert rules.key_of(CAP, []) != rules.untuned_key
    assert rules.cannot_act(CAP) is None
    # NCCL_PROTO=LL keeps the decode pick but moves the prefill's: it acts
    assert rules.key_of({"NCCL_PROTO": "LL"}, []) != rules.untuned_key


def test_an_unknown_pick_at_a_size_keeps_every_variable(tmp_path):
    rules = _rules(tmp_path, _config(tmp_path, probe=DECODE_ONLY + "\nconcurrency = [1, 4]"), tuning=[])
    assert rules.decode is not None and not rules.decode.judged
    assert rules.key_of({"NCCL_MAX_NCHANNELS": "4"}, []) != rules.untuned_key
    assert rules.cannot_act({"NCCL_MAX_NCHANNELS": "4"}) is None
    assert "57344 B (decode, C=4) pick not known" in rules.decode.sentence()
    assert "no variable is left out" in rules.decode.sentence()


def test_a_per_operation_line_gives_the_pick_where_there_is_no_tuning_table(tmp_path):
    row = SizeRow("AllReduce", 20 * DECODE, "Ring", "LL", 8, 2, 2, "prefill")
    rules = _rules(tmp_path, _config(tmp_path), tuning=[], sizes=[row], prefill=[20 * DECODE])
    assert rules.decode is not None and rules.decode.judged
    assert "286720 B (prefill, C=1) Ring/LL" in rules.decode.sentence()
    # 286,720 B on Ring/LL keeps 8 channels: a cap of 8 cannot act, a cap of 4 can
    assert rules.key_of({"NCCL_MAX_NCHANNELS": "8"}, []) == rules.untuned_key
    assert rules.key_of({"NCCL_MAX_NCHANNELS": "4"}, []) != rules.untuned_key


def test_an_unknown_prefill_size_keeps_every_variable(tmp_path):
    rules = _rules(tmp_path, _config(tmp_path))  # output_tok_s, no prompt_tokens, no prefill logged
    assert rules.decode is not None and rules.decode.unknown == ("the prefill at C=1 (give [model] prompt_tokens)",)
    assert rules.key_of({"NCCL_MAX_NCHANNELS": "4"}, []) != rules.untuned_key


def test_the_prefill_the_diagnosis_logged_is_judged_and_scaled_by_the_streams(tmp_path):
    cfg = _config(tmp_path, probe="concurrency = [2]")
    rules = _rules(tmp_path, cfg, prefill=[20 * DECODE])
    assert rules.decode is not None and rules.decode.judged
    labels = [p.size.label() for p in rules.decode.picks]
    assert labels == ["14336 B (decode, C=1)", "28672 B (decode, C=2)", "286720 B (prefill, C=1)",
                      "573440 B (prefill, C=2)"]
    assert rules.key_of({"NCCL_MAX_NCHANNELS": "4"}, []) != rules.untuned_key  # 286,720 B keeps 8 channels


def test_prefill_chunks_follow_the_servers_batched_token_cap(tmp_path):
    model = f'[model]\nconfig = "{DEEPSEEK}"\nprompt_tokens = 5000'
    cfg = _config(tmp_path, model=model, command="vllm serve m -tp 8 --max-num-batched-tokens=2048")
    sizes = night_sizes(cfg)
    assert sizes.prefill == (2048 * DECODE, 904 * DECODE)
    assert "in chunks of 2048 tokens" in sizes.why
    assert chunk_tokens(["sglang", "--chunked-prefill-size", "4096"]) == 4096
    assert chunk_tokens(["vllm", "serve"]) is None


def test_without_a_diagnosis_identity_is_the_canonical_form(tmp_path):
    facts = Facts(NcclVersion.parse("2.27.3"))
    assert set_identity(CAP, [], facts) != set_identity({}, [], facts)
    assert Rules({}, lambda: facts).cannot_act(CAP) is None
    assert Rules({}, lambda: facts).cannot_act({"NCCL_BUFFSIZE": "4194304"}) == "NCCL reads it as the untuned set"
