"""What we write parses, under NCCL's own rules, to what we meant.

``read_like_plugin`` follows NCCL's ``plugins/tuner/example/plugin.c`` (``loadConfig`` and
``pluginGetCollInfo``, identical from NCCL 2.27.5 to 2.30.7) step by step, including its silent
defaults, so a test fails if a line we write would be cut, skipped or misread. The CSV check
applies the conversions of ``scripts/optimize_config.py`` (``PerformanceData.__init__``).
No NCCL code is used or fetched.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import pytest

from tuner.screen.plugin_export import (
    PERF_CSV_COLUMNS,
    SIZE_MAX,
    TunerChoice,
    TunerMeasurement,
    choices_by_size,
    example_plugin_exports,
    plugin_compatibility,
    plugin_names_from_env,
    tuner_api_versions,
    write_tuner_config,
    write_tuner_perf_csv,
)

# plugin.c parseCollType / parseAlgorithm / parseProtocol, with their silent defaults.
COLLS = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"}
ALGOS = {"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}
PROTOS = {"ll", "ll128", "simple"}


@dataclass
class PluginConfig:
    coll: str
    min_bytes: int
    max_bytes: int
    algo: str
    proto: str
    channels: int
    nodes: int
    ranks: int
    pipe_ops: int
    reg_buff: int
    defaulted: list[str]


def _strtoull(text: str) -> int:
    digits = ""
    for ch in text.lstrip():
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else 0


def _atoi(text: str) -> int:
    text = text.lstrip()
    sign = -1 if text[:1] == "-" else 1
    return sign * _strtoull(text[1:] if text[:1] in "+-" else text)


def read_like_plugin(path: Path) -> list[PluginConfig]:
    data = path.read_bytes()
    lines, i = [], 0
    while i < len(data):  # fgets(line, 256, file): up to the newline or 255 bytes
        nl = data.find(b"\n", i)
        end = len(data) if nl == -1 else nl + 1
        end = min(end, i + 255)
        lines.append(data[i:end].decode())
        i = end
    configs = []
    for line in lines:
        if line[:1] in ("#", "\n"):
            continue
        line = line.split("\n", 1)[0]
        tokens = [t.strip(" \t") for t in line.split(",") if t][:10]  # strtok merges empty fields
        if not 8 <= len(tokens) <= 10:
            continue
        defaulted = [t for t, known in ((tokens[0], COLLS), (tokens[3], ALGOS), (tokens[4], PROTOS))
                     if t not in known]
        configs.append(PluginConfig(
            coll=tokens[0] if tokens[0] in COLLS else "allreduce",
            min_bytes=_strtoull(tokens[1]), max_bytes=_strtoull(tokens[2]),
            algo=tokens[3] if tokens[3] in ALGOS else "ring",
            proto=tokens[4] if tokens[4] in PROTOS else "simple",
            channels=_atoi(tokens[5]), nodes=_atoi(tokens[6]), ranks=_atoi(tokens[7]),
            pipe_ops=_atoi(tokens[8]) if len(tokens) >= 9 else -1,
            reg_buff=_atoi(tokens[9]) if len(tokens) >= 10 else -1, defaulted=defaulted))
    return configs


def get_coll_info(configs: list[PluginConfig], coll: str, nbytes: int, nnodes: int = 1, nranks: int = 8,
                  pipe_ops: int = 1, reg_buff: int = 0) -> tuple[str | None, str | None, int]:
    """pluginGetCollInfo: (algo, proto, nChannels) NCCL receives; (None, None, 1) when no line matches."""
    channels = 1
    for c in configs:
        if (c.coll == coll and c.min_bytes <= nbytes <= c.max_bytes and c.nodes in (-1, nnodes)
                and c.ranks in (-1, nranks) and c.pipe_ops in (-1, pipe_ops) and c.reg_buff in (-1, reg_buff)):
            if c.channels != -1:
                channels = c.channels
            return c.algo, c.proto, channels
    return None, None, channels


OTHERS = ("no line for broadcast, reduce, allgather, reducescatter: with the example plugin loaded these "
          "collectives (e.g. the TP all-gather of logits) run on one channel")


def screen() -> list[TunerMeasurement]:
    """Screened times at the DeepSeek-V3 decode (14,336 B) and 2,000-token prefill sizes."""
    m = TunerMeasurement
    return [
        m("allreduce", 14336, None, None, -1, 68.2, 0.37),           # untuned: NCCL's own choice
        m("allreduce", 14336, "ring", "ll", 16, 41.5, 0.60),
        m("allreduce", 14336, "tree", "ll", 8, 47.0, 0.53),
        m("allreduce", 14336, "ring", "simple", 16, 77.0, 0.33),
        m("allreduce", 28672000, None, None, -1, 2410.0, 20.8),
        m("allreduce", 28672000, "ring", "ll", 16, 4890.0, 10.3),
        m("allreduce", 28672000, "ring", "simple", 24, 2395.0, 21.0),
    ]


def test_decode_and_prefill_get_their_own_choice(tmp_path: Path) -> None:
    choices, notes = choices_by_size(screen())
    assert [(c.min_bytes, c.max_bytes, c.algorithm, c.protocol, c.channels) for c in choices] == [
        (0, 641125, "ring", "ll", 16),
        (641126, SIZE_MAX, "ring", "simple", 24),
    ]
    assert notes == []
    path = tmp_path / "nccl_tuner.conf"
    notes = write_tuner_config(choices, path, header="nccl-tune export for DeepSeek-V3 on 8 GPUs")
    assert notes == [OTHERS]
    configs = read_like_plugin(path)
    assert len(configs) == 2 and all(c.defaulted == [] for c in configs)
    assert [(c.coll, c.min_bytes, c.max_bytes, c.algo, c.proto, c.channels, c.nodes, c.ranks, c.pipe_ops,
             c.reg_buff) for c in configs] == [
        ("allreduce", 0, 641125, "ring", "ll", 16, -1, -1, -1, -1),
        ("allreduce", 641126, SIZE_MAX, "ring", "simple", 24, -1, -1, -1, -1),
    ]
    assert get_coll_info(configs, "allreduce", 14336) == ("ring", "ll", 16)
    assert get_coll_info(configs, "allreduce", 28672000) == ("ring", "simple", 24)
    assert get_coll_info(configs, "allreduce", 2**40) == ("ring", "simple", 24)
    # A 73-token prefill (1 MiB) is nearer the prefill size on a log scale: not forced to LL.
    assert get_coll_info(configs, "allreduce", 1048576) == ("ring", "simple", 24)
    assert get_coll_info(configs, "allgather", 14336) == (None, None, 1)
    text = path.read_text()
    assert text.startswith("# nccl-tune export for DeepSeek-V3 on 8 GPUs\n# fastest at 14336 B: 41.50 us\n")


def test_untuned_winner_leaves_a_gap_and_says_so(tmp_path: Path) -> None:
    measurements = [m for m in screen() if not (m.size_bytes == 28672000 and m.algorithm == "ring"
                                                and m.protocol == "simple")]
    choices, notes = choices_by_size(measurements)
    assert [(c.min_bytes, c.max_bytes) for c in choices] == [(0, 641125)]
    assert notes == ["641126-18446744073709551615 B: NCCL's own choice was fastest at 28672000 B; no line written"]
    path = tmp_path / "t.conf"
    notes = write_tuner_config(choices, path)
    assert len(notes) == 2 and "641126-18446744073709551615 B has no line" in notes[0] and notes[1] == OTHERS
    assert "run on one channel" in notes[0]
    configs = read_like_plugin(path)
    # What the plugin really does there: NCCL's algorithm, one channel.
    assert get_coll_info(configs, "allreduce", 28672000) == (None, None, 1)


def test_channels_minus_one_means_one_channel(tmp_path: Path) -> None:
    choice = TunerChoice("allreduce", 0, SIZE_MAX, "tree", "ll", -1)
    notes = write_tuner_config([choice], tmp_path / "t.conf")
    assert notes == ["allreduce 0-18446744073709551615 B has channels -1: the example plugin then keeps its "
                     "default of 1 channel, not NCCL's count", OTHERS]
    assert get_coll_info(read_like_plugin(tmp_path / "t.conf"), "allreduce", 14336) == ("tree", "ll", 1)


def test_long_notes_stay_comments(tmp_path: Path) -> None:
    note = "why: " + " ".join(f"word{i}" for i in range(200))  # ~1,400 bytes
    choice = TunerChoice("allreduce", 0, SIZE_MAX, "ring", "ll", 8, note=note)
    path = tmp_path / "t.conf"
    write_tuner_config([choice], path, header="x" * 300 + " tail")
    lines = path.read_text().splitlines()
    assert all(len(line.encode()) + 1 <= 255 for line in lines)
    assert all(line.startswith("#") for line in lines[:-1]) and lines[-1] == choice.line()
    assert len(read_like_plugin(path)) == 1


def test_rejects_what_the_plugin_would_misread(tmp_path: Path) -> None:
    path = tmp_path / "t.conf"
    with pytest.raises(ValueError, match="silently use ring"):
        write_tuner_config([TunerChoice("allreduce", 0, 10, "Ring", "ll", 8)], path)
    with pytest.raises(ValueError, match="silently become allreduce"):
        write_tuner_config([TunerChoice("all_reduce", 0, 10, "ring", "ll", 8)], path)
    with pytest.raises(ValueError, match="silently use simple"):
        write_tuner_config([TunerChoice("allreduce", 0, 10, "ring", "LL", 8)], path)
    with pytest.raises(ValueError, match="overlap"):
        write_tuner_config([TunerChoice("allreduce", 0, 100, "ring", "ll", 8),
                            TunerChoice("allreduce", 100, 200, "tree", "ll", 8)], path)
    with pytest.raises(ValueError, match="min_bytes <= max_bytes"):
        write_tuner_config([TunerChoice("allreduce", 10, 5, "ring", "ll", 8)], path)
    with pytest.raises(ValueError, match="channels"):
        write_tuner_config([TunerChoice("allreduce", 0, 5, "ring", "ll", 0)], path)
    with pytest.raises(ValueError, match="one collective and topology per call"):
        choices_by_size([TunerMeasurement("allreduce", 8, "ring", "ll", 1, 1.0, 1.0),
                         TunerMeasurement("allgather", 8, "ring", "ll", 1, 1.0, 1.0)])
    assert not path.exists()
    # Same range for two topologies is fine: the plugin matches nodes/ranks too.
    write_tuner_config([TunerChoice("allreduce", 0, SIZE_MAX, "ring", "ll", 8, nodes=1),
                        TunerChoice("allreduce", 0, SIZE_MAX, "tree", "simple", 8, nodes=2)], path)
    configs = read_like_plugin(path)
    assert get_coll_info(configs, "allreduce", 10, nnodes=2) == ("tree", "simple", 8)


def test_perf_csv_reads_like_optimize_config(tmp_path: Path) -> None:
    path = tmp_path / "tuner_perf.csv"
    notes = write_tuner_perf_csv(screen(), path)
    assert notes == ["allreduce 14336 B: NCCL's own choice (68.20 us) has no algorithm/protocol to write; left out "
                     "of the CSV", "allreduce 28672000 B: NCCL's own choice (2410.00 us) has no algorithm/protocol "
                     "to write; left out of the CSV"]
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == PERF_CSV_COLUMNS
        rows = list(reader)
    assert len(rows) == 5
    for row in rows:  # optimize_config.py PerformanceData.__init__: any ValueError skips the row
        int(row["size_bytes"]), int(row["channels"]), int(row["nodes"]), int(row["ranks"])
        int(row["pipeOps"]), int(row["regBuff"])
        float(row.get("bandwidth_gbps", 0)), float(row.get("latency_us", 0))
    assert rows[0] == {"collective": "allreduce", "size_bytes": "14336", "algorithm": "ring", "protocol": "ll",
                       "channels": "16", "nodes": "-1", "ranks": "-1", "pipeOps": "-1", "regBuff": "-1",
                       "cost_metric": "41.500", "bandwidth_gbps": "0.600", "latency_us": "41.500"}
    # The script's default metric (latency_us, lower is better) picks the same winners as we do.
    best: dict[int, dict[str, str]] = {}
    for row in rows:
        key = int(row["size_bytes"])
        if key not in best or float(row["latency_us"]) < float(best[key]["latency_us"]):
            best[key] = row
    assert {k: (v["algorithm"], v["protocol"], v["channels"]) for k, v in best.items()} == {
        14336: ("ring", "ll", "16"), 28672000: ("ring", "simple", "24")}
    with pytest.raises(ValueError, match="silently use ring"):
        write_tuner_perf_csv([TunerMeasurement("allreduce", 8, "NVLSTree", "ll", 1, 1.0, 1.0)], path)
    assert len(path.read_text().splitlines()) == 6  # the failed write left the old file whole


def test_env_sets_to_plugin_names() -> None:
    assert plugin_names_from_env({"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "16"}) == (
        "ring", "ll", 16)
    assert plugin_names_from_env({"NCCL_ALGO": "NVLSTree", "NCCL_PROTO": "Simple"}) == ("nvls_tree", "simple", -1)
    assert plugin_names_from_env({"NCCL_ALGO": "collnetdirect", "NCCL_PROTO": "ll128",
                                  "NCCL_MIN_NCHANNELS": "0x8"}) == ("collnet_direct", "ll128", 8)
    assert plugin_names_from_env({"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "LL"}) is None
    assert plugin_names_from_env({"NCCL_ALGO": "^NVLS", "NCCL_PROTO": "LL"}) is None
    assert plugin_names_from_env({"NCCL_ALGO": "Ring"}) is None
    assert plugin_names_from_env({"NCCL_BUFFSIZE": "16777216"}) is None


def test_tuner_api_versions_by_nccl_release() -> None:
    assert tuner_api_versions("2.18.6") == ()
    assert tuner_api_versions("2.19.3") == (1,) and tuner_api_versions("2.20.5-1") == (1,)
    assert tuner_api_versions("2.21.5") == (2,)
    assert tuner_api_versions("2.23.4") == (3, 2)
    assert tuner_api_versions("2.27.7+cuda12.9") == (4, 3, 2)
    assert tuner_api_versions((2, 29, 7)) == (5, 4, 3, 2)
    assert tuner_api_versions("v2.30.7") == (6, 5, 4, 3, 2) and tuner_api_versions("2.31.2") == (6, 5, 4, 3, 2)
    assert tuner_api_versions("2.32.6") == (7, 6, 5, 4, 3, 2)  # v7 from 2.32 (release notes)
    assert example_plugin_exports("2.27.3") == () and example_plugin_exports("2.27.5") == (4,)
    assert example_plugin_exports("2.29.3") == (5,) and example_plugin_exports("2.30.4") == (6, 5)
    assert plugin_compatibility("2.27.7") == ("NCCL 2.27.7 loads tuner API v4, v3, v2. Build the example plugin "
                                              "from NCCL 2.27.5-2.27.7 sources.")
    assert "2.28-2.29 or 2.30+" in plugin_compatibility("2.29.7")
    assert "No NCCL release's CSV example plugin" in plugin_compatibility("2.22.3")
    assert "loads no tuner plugin" in plugin_compatibility("2.18.3")
