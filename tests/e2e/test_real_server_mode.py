"""The proof on the simulator in real-server mode: NCCL's lines block-buffered on the pipe (cut,
interleaved, lost at SIGKILL) unless NCCL_DEBUG_FILE is set, workers that need SIGKILL, and
vLLM 0.8.2 on Ray (workers keep `ray start`'s environment, Ray folds repeated lines)."""

from __future__ import annotations

import json

import pandas as pd

from tests.helpers import ROOT, cli, free_port

SETS = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MAX_NCHANNELS", "NCCL_BUFFSIZE")


def night(tmp_path, serve: str, env: str = "", trials: int = 2) -> tuple[object, pd.DataFrame, list[list[dict]]]:
    """A preset night (search_spaces/safe.toml, ``trials`` relaunches) on the simulator with ``serve`` flags."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    cfg = tmp_path / "exp.toml"
    cfg.write_text(f"""
[server]
command = ["{{python}}", "-m", "tuner.sim", "serve", "--profile", "pcie-8x-mla", "--port", "{{port}}",
           "--load-time", "0.3", {serve}]
port = {free_port()}
ready_timeout_s = 60
teardown_grace_s = 1
{env}
[probe]
prompt = "Count from 1 to 50."
max_tokens = 24
warmup = 0
repeats = 2
stall_timeout_s = 20
[sweep]
space = "{ROOT}/search_spaces/safe.toml"
trials = {trials}
mode = "presets"
""")
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "n", "--no-confirm",
              "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    df = pd.read_csv(tmp_path / "r" / "n" / "trials.csv")
    df = df[df["status"] != "skipped"].set_index("trial")  # relaunches only: no set not measured
    return res, df, [json.loads(p) for p in df["nccl_proof"]]


def _rows(proofs, trial: int) -> dict[str, dict]:
    return {row["name"]: row for row in proofs[trial]}


def test_block_buffered_workers_that_need_sigkill_are_confirmed_on_every_rank(tmp_path):
    _res, df, proofs = night(tmp_path, '"--stdout-buffering", "block", "--fault", "stuck-workers"', trials=5)
    assert (df["nccl_not_applied"] == "{}").all() and (df["nccl_version"].astype(str) == "2.27.3").all()
    for trial in (1, 2):
        launched = json.loads(df.loc[trial, "env"])
        rows = _rows(proofs, trial)
        for name in set(launched) & set(SETS):
            assert (rows[name]["status"], rows[name]["ranks"], rows[name]["source"]) == (
                "confirmed", "0-7 (8/8)", "NCCL_DEBUG_FILE x8"), rows[name]
    log = (tmp_path / "r" / "n" / "logs" / "trial-0001.log").read_text()
    assert "SIGKILL needed" in log  # the workers' stdout buffers were lost; their files were not


def test_without_files_cut_lines_are_rejoined_and_lost_ones_never_called_not_applied(tmp_path):
    # NCCL cannot open the file it is given (a path that exists only in a container): stdout it is
    env = 'env = { NCCL_DEBUG_FILE = "/nonexistent-dir/nccl.%h.%p.log" }'
    _res, df, proofs = night(tmp_path, '"--stdout-buffering", "block"', env)
    assert (df["nccl_not_applied"] == "{}").all()
    rows = _rows(proofs, 1)
    for name in SETS:
        assert (rows[name]["status"], rows[name]["ranks"], rows[name]["source"]) == (
            "confirmed", "0-7 (8/8)", "server log x8"), rows[name]
    # NCCL's TUNING lines (one per collective) fill many 4 KB blocks: echoes cut mid-line, mixed with the API's lines
    chatty = ('env = { NCCL_DEBUG_FILE = "/nonexistent-dir/nccl.%h.%p.log", NCCL_DEBUG = "INFO", '
              'NCCL_DEBUG_SUBSYS = "INIT,ENV,TUNING" }')
    _res, df, proofs = night(tmp_path / "chatty", '"--stdout-buffering", "block"', chatty)
    assert (df["nccl_not_applied"] == "{}").all(), df["nccl_not_applied"].tolist()
    rows = _rows(proofs, 1)
    for name in SETS:
        assert (rows[name]["status"], rows[name]["ranks"]) == ("confirmed", "0-7 (8/8)"), rows[name]
    _res, df, proofs = night(tmp_path / "stuck", '"--stdout-buffering", "block", "--fault", "stuck-workers"', env)
    assert (df["nccl_not_applied"] == "{}").all()
    rows = _rows(proofs, 1)
    assert all(rows[name]["status"] in ("confirmed", "unverifiable") for name in SETS)
    assert any(rows[name]["status"] == "unverifiable" for name in SETS)


def test_on_ray_the_variables_the_workers_never_got_are_not_applied(tmp_path):
    res, df, proofs = night(tmp_path, '"--ray", "--ray-nodes", "2"')
    assert df.loc[1, "verdict"].startswith("not applied")
    for name in SETS:
        row = _rows(proofs, 1)[name]
        assert (row["status"], row["ranks"]) == ("not applied", "1 of 8 ranks on 2 nodes (vm 1/4, vm-node1 0/4)"), row
        assert row["why"].startswith(f"ranks 1-7 logged communicator init through Init COMPLETE but never echoed {name}")
        assert "Ray workers keep the environment of `ray start`" in row["why"] and "vLLM 0.8.2" in row["why"]
    assert "trial 1 proof: NCCL_ALGO, NCCL_PROTO, NCCL_MAX_NCHANNELS, NCCL_BUFFSIZE not applied" in res.stderr


def test_on_ray_with_folding_on_a_fold_is_never_proof_for_the_ranks_it_hides(tmp_path):
    _res, df, proofs = night(tmp_path, '"--ray", "--ray-nodes", "2"', 'env = { RAY_DEDUP_LOGS = "1" }')
    assert df.loc[1, "verdict"].startswith("not applied")
    log = (tmp_path / "r" / "n" / "logs" / "trial-0001.log").read_text()
    assert "across cluster]" in log
    for name in SETS:
        row = _rows(proofs, 1)[name]
        assert row["status"] == "not applied" and row["ranks"].startswith("1 of 8 ranks on 2 nodes ("), row
        assert "1 echo for 8 ranks" in row["why"], row
