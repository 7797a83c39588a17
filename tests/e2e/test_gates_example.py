"""The README's gates night (examples/sim-gates.toml), run as printed from a checkout's root
(tests/readme_commands.py): on the simulated box where one fast set corrupts answers and
another hangs under load, neither is recommended, and the night says why for each."""

from __future__ import annotations

import csv
from pathlib import Path

from tests import readme_commands


def test_the_gates_night_recommends_neither_the_corrupting_nor_the_hanging_set(tmp_path: Path):
    line = readme_commands.command_starting("nccl-tune sweep examples/sim-gates.toml")
    ws = readme_commands.workspace(tmp_path / "repo")
    status, out = readme_commands.run(line, ws, timeout=900)
    assert status == 0, out[-6000:]
    decision = next(ln for ln in out.splitlines() if ln.startswith(("Use ", "Not decided", "No gain", "Nothing")))
    # the clean +10 % set (NCCL_PROTO=LL, alone or with Ring) is recommended; never the corrupting set
    # (P2P across the socket link) nor the hanging one (one CUDA connection with 16 channels)
    assert decision.startswith("Use ") and "NCCL_PROTO=LL" in decision, decision
    assert "NCCL_P2P_LEVEL" not in decision and "CUDA_DEVICE_MAX_CONNECTIONS" not in decision, decision
    with open(ws / "results" / "sim-gates" / "trials.csv", newline="") as f:
        rows = {r["trial"]: r for r in csv.DictReader(f)}
    wrong = [r for r in rows.values() if r["status"] == "wrong_output"]
    assert [r["env"] for r in wrong] == ['{"NCCL_P2P_LEVEL": "SYS"}'], [(r["trial"], r["status"]) for r in rows.values()]
    assert "parted at token" in out and "never recommended" in out
    # the hanging set failed its soak, a status of its record (or, on a slow machine, hung already in its probe)
    hung = [r for r in rows.values() if "CUDA_DEVICE_MAX_CONNECTIONS" in r["env"] and r["status"] in ("failed_soak", "hung")]
    assert hung, [(r["trial"], r["status"], r["soak_failure"]) for r in rows.values()]
    assert "hung under load" in out or "hung: " in out, out[-3000:]  # the report says why for it too
