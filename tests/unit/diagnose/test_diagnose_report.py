"""The diagnose report builder on real NCCL logs (tests/fixtures/nccl_logs, server_logs)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rich.console import Console

from tuner.diagnose import Diagnosis, decode_pick, load_diagnosis, model_decode_size, print_diagnosis, write_diagnosis
from tuner.diagnose.analysis import PROBE_MARK, build_diagnosis
from tuner.diagnose.model import DecodeSize
from tuner.diagnose.render import markdown
from tuner.inputs.config import load_config

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
LOGS = FIXTURES / "nccl_logs"
ROOT = FIXTURES.parents[1]
#: A real 2.24+ per-operation line (nccl-2.29.7-tuning.log), as a template for other sizes.
TEMPLATE = "lab:3038984:3038984 [0] NCCL INFO {func}: {n} Bytes -> Algo {algo} proto {proto} channel{{Lo..Hi}}={{0..{hi}}}"


def lines(name: str, folder: Path = LOGS) -> list[str]:
    return (folder / name).read_text().splitlines()


def op(n: int, algo: str = "RING", proto: str = "LL", hi: int = 0, func: str = "AllReduce") -> str:
    return TEMPLATE.format(func=func, n=n, algo=algo, proto=proto, hi=hi)


def test_tuning_table_and_per_op_lines_of_nccl_2_29():
    diag = build_diagnosis(lines("nccl-2.29.7-tuning.log"), decode_size=DecodeSize(14336, "given"))
    assert diag.nccl_version == "2.29.7" and diag.cuda_version == "12.9"
    cells = {(r.algorithm, r.protocol): r for r in diag.tuning}
    assert (cells["Ring", "LL"].latency_us, cells["Ring", "LL"].bandwidth_gbps) == (16.6, 1.2)
    assert cells["Ring", "Simple"].max_threads == 256 and cells["Ring", "LL128"].bandwidth_gbps == 0
    rows = {(r.func, r.nbytes): r for r in diag.sizes}
    assert (rows["Broadcast", 16384].algorithm, rows["Broadcast", 16384].protocol,
            rows["Broadcast", 16384].channels, rows["Broadcast", 16384].calls) == ("Ring", "LL", 2, 2)
    assert (rows["Broadcast", 131072].protocol, rows["Broadcast", 131072].channels) == ("Simple", 4)
    # no AllReduce per-op line: the pick at 14336 B comes from the table's cost model (Ring/LL 28.5 us)
    assert decode_pick(diag) == (14336, "Ring", "LL", None)
    assert diag.decode.pick_source.startswith("TUNING table cost model, 28.5 us")
    assert diag.echoed == {"NCCL_P2P_DISABLE": {"1": 1}}


def test_varied_choices_and_warnings_of_an_sglang_log():
    diag = build_diagnosis(lines("nccl-2.27.5-sglang-ops.log"))
    assert diag.server_nccl_version == "2.27.5" and diag.backend["server"] == "sglang"
    (row,) = diag.sizes
    assert (row.func, row.nbytes, row.calls) == ("AllReduce", 4, 2)
    assert {(c["algorithm"], c["protocol"]) for c in row.choices} == {("Tree", "LL"), ("Ring", "Simple")}
    assert any("NET/IB: Got completion" in w for w in diag.warnings)
    assert any("No TUNING table" in n for n in diag.notes)


def test_pre_2_24_lines_have_no_channel_count():
    diag = build_diagnosis(lines("nccl-2.21-trace-per-op.log"), decode_size=DecodeSize(24, "given"))
    (row,) = diag.sizes
    assert (row.func, row.nbytes, row.algorithm, row.protocol, row.channels) == ("Broadcast", 24, "Ring", "LL", None)
    assert diag.decode.algorithm is None and decode_pick(diag) is None  # no AllReduce of 24 B, no table


def test_capture_series_at_start_up_gives_the_decode_size():
    """vLLM's graph capture logs batch 1, 2, 4, 8; the probe then logs only the prompt's prefill."""
    startup = [op(4), op(117440512, proto="SIMPLE", hi=3), op(14336), op(28672), op(57344), op(114688, hi=2)]
    probe = [op(229376, hi=3), op(229376, hi=3)]
    diag = build_diagnosis([*startup, f"[nccl-tune] {PROBE_MARK}", *probe], probe_info={"requests": 2})
    assert (diag.decode.nbytes, diag.decode.size_source) == (14336, "capture")
    assert decode_pick(diag) == (14336, "Ring", "LL", 1)
    assert diag.prefill_bytes == [229376]
    roles = {r.nbytes: (r.role, r.probe_calls) for r in diag.sizes}
    assert roles[14336] == ("decode", 0) and roles[229376] == ("prefill", 2) and roles[4] == ("start-up", 0)


def test_eager_probe_gives_the_most_frequent_size():
    probe = [op(114688, hi=2)] + [op(14336)] * 20 + [op(114688, hi=2)] + [op(14336)] * 20
    diag = build_diagnosis([op(4), f"[nccl-tune] {PROBE_MARK}", *probe], probe_info={"requests": 2})
    assert (diag.decode.nbytes, diag.decode.size_source) == (14336, "probe")
    assert "40 calls" in diag.decode.size_reason and diag.prefill_bytes == [114688]


def test_a_probe_that_logged_only_the_prefill_gives_no_decode_size():
    diag = build_diagnosis([op(4), f"[nccl-tune] {PROBE_MARK}", op(114688, hi=2), op(114688, hi=2)],
                           probe_info={"requests": 2})
    assert diag.decode.nbytes is None and diag.decode.size_source == "none"
    assert diag.prefill_bytes == [114688]


def test_the_model_size_wins_and_a_disagreeing_log_is_said():
    log = [op(8192), op(16384), op(32768)]
    diag = build_diagnosis(log, decode_size=DecodeSize(14336, "from config.json"))
    assert diag.decode.nbytes == 14336 and diag.decode.size_source == "model"
    assert any("the log alone suggests 8192 B" in n for n in diag.notes)


def test_custom_allreduce_means_no_nccl_pick():
    log = [*lines("vllm-0.9-pynccl-2.26.2.log", FIXTURES / "server_logs"), op(14336)]
    diag = build_diagnosis(log, argv=["vllm", "serve", "m", "-tp", "4"], decode_size=DecodeSize(14336, "given"))
    assert diag.backend["name"] == "custom_allreduce" and diag.backend["nccl_on_decode_path"] is False
    assert decode_pick(diag) is None and diag.decode_choice() is None
    assert any("no NCCL variable can act on decode" in n for n in diag.notes)
    # with the custom kernel off NCCL carries it
    diag = build_diagnosis(log, argv=["vllm", "serve", "m", "-tp", "4", "--disable-custom-all-reduce"],
                           decode_size=DecodeSize(14336, "given"))
    assert decode_pick(diag) == (14336, "Ring", "LL", 1)


def test_json_round_trip_and_unreadable_files(tmp_path):
    diag = build_diagnosis(lines("nccl-2.29.7-tuning.log"), study="s", decode_size=DecodeSize(14336, "given"))
    json_path, md_path = write_diagnosis(diag, tmp_path / "s")
    back = load_diagnosis(tmp_path / "s")
    assert back == diag and decode_pick(back) == decode_pick(diag)
    assert back.version() is not None and str(back.version()) == "2.29.7"
    assert "| Ring | 16.6 / 1.2 | off | 36.4 / 2.4 |" in md_path.read_text()
    assert load_diagnosis(tmp_path / "missing") is None
    data = json.loads(json_path.read_text())
    json_path.write_text(json.dumps({**data, "schema": 99}))
    assert load_diagnosis(tmp_path / "s") is None
    json_path.write_text(json_path.read_text()[:40])
    assert load_diagnosis(tmp_path / "s") is None
    assert Diagnosis.from_json(data) == diag


def test_piped_output_keeps_whole_rows():
    diag = build_diagnosis(lines("nccl-2.27.5-sglang-ops.log"))
    out = io.StringIO()
    print_diagnosis(diag, Console(file=out, width=60))
    text = out.getvalue()
    backend = next(line for line in text.splitlines() if line.startswith("decode backend"))
    assert backend.rstrip().endswith("--disable-custom-all-reduce to the server command to measure NCCL")
    row = next(line for line in text.splitlines() if line.startswith("AllReduce"))
    assert row.split()[:8] == ["AllReduce", "4", "Tree", "LL", "1", "2", "0", "start-up"]
    assert row.endswith("(varied: Tree/LL x1, Ring/Simple x1)")
    assert "# What NCCL chose" in markdown(diag)


def test_decode_size_from_the_model_config():
    cfg = load_config(ROOT / "examples" / "sim.toml", resolve_space=False)
    assert model_decode_size(cfg) is None
    size = model_decode_size(cfg, FIXTURES / "model_configs" / "kimi-k2.5.config.json")
    assert size is not None and size.nbytes == 14336 and "7168" in size.reason


def test_channels_from_the_launch_rule_when_no_line_shows_them():
    """A TUNING table and a communicator (16 ranks, 16 coll channels) but no line at the decode size."""
    log = lines("nccl-2.27.5-sglang-init.log") + lines("nccl-2.29.7-tuning.log")
    diag = build_diagnosis(log, decode_size=DecodeSize(14336, "given"))
    assert diag.topology["nranks"] == 16 and diag.topology["coll_channels"] == 16
    assert decode_pick(diag) == (14336, "Ring", "LL", 1)
    assert "1 channel(s) x 96 threads from NCCL's launch rule" in diag.decode.pick_source


def test_diagnose_triage_proposes_the_space_graph_file():
    from tests.unit.nccl.test_machine import _amd_log

    log = _amd_log("2.27.3", "INFO")
    plain = build_diagnosis(log, decode_size=DecodeSize(14336, "given"))
    assert not any(f["kind"] == "files" for f in plain.triage["findings"])
    graph = "/srv/graphs/ring8.xml"
    diag = build_diagnosis(log, decode_size=DecodeSize(14336, "given"), space_files={"NCCL_GRAPH_FILE": [graph]})
    files = [f for f in diag.triage["findings"] if f["kind"] == "files"]
    assert files and files[0]["fixes"] == [
        {"name": "fix: graph file ring8.xml", "env": {"NCCL_GRAPH_FILE": graph}, "reason": files[0]["fixes"][0]["reason"]}]
