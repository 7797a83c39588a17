"""A baseline whose NCCL read variables its launch did not set is never called untuned."""

from __future__ import annotations

import pandas as pd

from tuner.record import Kind, Status, TrialRecord
from tuner.report import library_change
from tuner.report.frame import baseline_name, launched_text
from tuner.report.proof import proof_section


def _base(**kw) -> TrialRecord:
    return TrialRecord(trial=0, kind=Kind.BASELINE, status=Status.OK, **kw)


def test_the_baseline_label_says_not_untuned_with_the_names():
    assert baseline_name(_base()) == "baseline (untuned)"
    stray = _base(nccl_unlaunched={"NCCL_P2P_DISABLE": "1 on ranks 0-1"})
    assert baseline_name(stray) == "baseline (not untuned: NCCL_P2P_DISABLE set behind nccl-tune's back)"
    row = pd.Series({"nccl_unlaunched": '{"NCCL_ALGO": "Ring on rank 0"}'})  # trials.csv's JSON text
    assert baseline_name(row) == "baseline (not untuned: NCCL_ALGO set behind nccl-tune's back)"
    assert baseline_name(pd.Series({"trial": 0})) == "baseline (untuned)"  # a frame written before the column


def test_the_proof_section_names_what_set_it():
    rec = _base(nccl_unlaunched={"NCCL_P2P_DISABLE": "1 on ranks 0-1"},
                nccl_unlaunched_from={"NCCL_P2P_DISABLE": "image vllm/vllm-openai's environment (Config.Env)"})
    section = proof_section([rec])
    assert section is not None
    [block] = section.blocks
    assert block.text == ("Trial 0 (baseline): set behind nccl-tune's back: NCCL_P2P_DISABLE=1 on ranks 0-1 (from image "
                          "vllm/vllm-openai's environment (Config.Env)). This baseline is not untuned: it ran with "
                          "NCCL_P2P_DISABLE as set there.")
    assert "untuned baseline" not in block.text


def test_a_library_change_is_said_even_where_the_version_is_the_same():
    a = [_base(nccl_version="2.28.9", nccl_library="/venv/nvidia/nccl/lib/libnccl.so.2", nccl_build_id="a7f420a1")]
    b = [_base(nccl_version="2.28.9", nccl_library="/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.9",
               nccl_library_version="2.28.9", nccl_build_id="c0db9360")]
    said = library_change(a, b)
    assert said is not None and "file /venv/nvidia/nccl/lib/libnccl.so.2 (A) -> " in said
    assert "build ID a7f420a1 (A) -> c0db9360 (B)" in said and "the version (2.28.9) did not" in said
    assert library_change(a, a) is None
    assert library_change(a, [_base(nccl_version="2.28.9")]) is None  # a night that named none: not known


def test_the_table_names_what_each_row_ran_with_behind_the_tool_s_back():
    base = pd.Series({"env": {}, "flags": [], "nccl_unlaunched": '{"NCCL_PROTO": "Simple on ranks 0-7"}'})
    assert launched_text(base) == "(not untuned: NCCL_PROTO=Simple set behind nccl-tune's back)"
    tuned = pd.Series({"env": {"NCCL_P2P_LEVEL": "SYS"}, "flags": [],
                       "nccl_unlaunched": {"NCCL_ALGO": "Ring on rank 0", "NCCL_PROTO": "Simple on ranks 0-7"}})
    assert launched_text(tuned) == "NCCL_P2P_LEVEL=SYS (+ NCCL_ALGO=Ring NCCL_PROTO=Simple set behind nccl-tune's back)"
    assert launched_text(pd.Series({"env": {}, "flags": []})) == "(untuned)"  # a frame written before the column

