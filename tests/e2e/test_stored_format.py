"""Stores nccl-tune f0e244d wrote (tests/fixtures/stores/), end to end: ``nccl-tune report``
rebuilds exactly the trials.csv and report.md their sweep wrote, a decode_tok_s study keeps
its metric, a store of a newer format is refused, and a resume on another metric is refused."""

from __future__ import annotations

import optuna
import pytest

from tests.helpers import ROOT, STORES, cli, free_port, old_store
from tuner.record import FORMAT_VERSION

OLD = STORES / "f0e244d"


@pytest.mark.parametrize("study", ["output", "decode", "screen"])
def test_report_of_an_old_store_is_what_its_sweep_wrote(tmp_path, study):
    out = old_store(study, tmp_path)
    res = cli("report", "--study", study, "--results", str(tmp_path))
    assert res.returncode == 0, res.stderr
    assert (out / "trials.csv").read_text() == (OLD / study / "trials.csv").read_text()
    assert (out / "report.md").read_text() == (OLD / study / "report.md").read_text()


def test_report_of_a_decode_study_keeps_the_decode_metric(tmp_path):
    out = old_store("decode", tmp_path)
    res = cli("report", "--study", "decode", "--results", str(tmp_path))
    assert res.returncode == 0, res.stderr
    text = (out / "report.md").read_text()
    assert "single-stream decode tok/s (1 / TPOT)" in text and "output tok/s" not in text
    assert "(judged on decode tok/s, the study's metric)" in res.stdout


def test_report_refuses_a_store_of_a_newer_format(tmp_path):
    out = old_store("output", tmp_path)
    url = f"sqlite:///{out / 'study.db'}"
    optuna.load_study(study_name="output", storage=url).set_user_attr("format_version", FORMAT_VERSION + 1)
    res = cli("report", "--study", "output", "--results", str(tmp_path))
    assert res.returncode == 2
    assert (f"study 'output': key 'format_version' has value {FORMAT_VERSION + 1} (a newer nccl-tune wrote this "
            "study") in res.stderr
    assert not (out / "report.md").exists()


def test_a_resume_on_another_metric_is_refused_before_any_launch(tmp_path):
    """The old decode study, resumed with the same settings but probe.metric = output_tok_s."""
    old_store("decode", tmp_path)
    cfg = (ROOT / "examples" / "sim.toml").read_text().replace("port = 8477", f"port = {free_port()}")
    cfg = cfg.replace('space = "search_spaces/default.toml"', f'space = "{ROOT / "search_spaces" / "default.toml"}"')
    (tmp_path / "decode.toml").write_text(cfg)
    res = cli("sweep", str(tmp_path / "decode.toml"), "--results", str(tmp_path), "--trials", "4")
    assert res.returncode == 2, res.stderr
    assert "key 'probe.metric' has value 'output_tok_s'" in res.stderr
    assert "the metric study 'decode' is judged on" in res.stderr
