"""Stores nccl-tune f0e244d wrote (tests/fixtures/stores/), end to end: ``nccl-tune report``
rebuilds every stored column of the trials.csv their sweep wrote exactly (the judgement columns
are today's verdict rules, issue 21's two-stage design), report.md's sections, a decode_tok_s
study keeps its metric, a store of a newer format is refused, and a resume on another metric is
refused."""

from __future__ import annotations

import csv
import io

import optuna
import pytest

from tests.helpers import STORES, cli, envrate_command, example_text, free_port, old_store, write_config
from tuner.record import FORMAT_VERSION, Status
from tuner.study import StudyStore, open_study

OLD = STORES / "f0e244d"
#: The bundled default space as the stored studies began with it: a study's space is part of it (a
#: resume with another is refused), and the bundled one has since gained allreduce-only presets.
SPACE = STORES / "space" / "default.toml"
#: examples/sim.toml's run noise, added after the stored nights were measured (their command lacks it)
MEASURED_WITHOUT = '"--noise", "0.01", '


#: trials.csv columns added since f0e244d (the per-rank proof, the backend proof of format 6, the launches
#: and probe notes of format 7, the unlaunched variables' sources and the loaded library of issue 33, the soak
#: of issue 34, the ranks per node of issue 36); an old
#: store has them at their defaults.
ADDED_COLUMNS = {"nccl_proof": "[]", "nccl_sources": "[]", "nccl_unlaunched": "{}", "warmup_s": "",
                 "backend_choice": "", "backend_applied": "", "backend_reason": "", "launches": "1",
                 "probe_notes": "[]", "nccl_unlaunched_from": "{}", "nccl_loaded": "", "nccl_library": "",
                 "nccl_library_version": "", "nccl_build_id": "", "soak_s": "", "soak_failure": "",
                 "soak_concurrency": "[]", "soak_requests": "0", "soak_tok_s": "", "answers_checked": "False",
                 "answers_diverge": "", "node_ranks": "{}"}
#: trials.csv columns computed by today's judgement, not stored (issue 21 changed how they are judged).
JUDGED_COLUMNS = ("vs_baseline", "vs_baseline_ci_low", "vs_baseline_ci_high", "verdict", "verdict_note")


def _without_added(path) -> tuple[str, dict[str, set[str]]]:
    """trials.csv without :data:`ADDED_COLUMNS`, written as the CSV writer writes it, and the
    values those columns held."""
    rows = list(csv.reader(io.StringIO(path.read_text())))
    keep = [i for i, name in enumerate(rows[0]) if name not in ADDED_COLUMNS and name not in JUDGED_COLUMNS]
    held = {name: {r[i] for r in rows[1:]} for i, name in enumerate(rows[0]) if name in ADDED_COLUMNS}
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([[r[i] for i in keep] for r in rows])
    return buf.getvalue(), held


@pytest.mark.parametrize("study", ["output", "decode", "screen"])
def test_report_of_an_old_store_is_what_its_sweep_wrote(tmp_path, study):
    out = old_store(study, tmp_path)
    res = cli("report", "--study", study, "--results", str(tmp_path), figures=True)  # its figures: sections of the report
    assert res.returncode == 0, res.stderr
    rebuilt, held = _without_added(out / "trials.csv")
    assert held == {name: {value} for name, value in ADDED_COLUMNS.items()}
    assert rebuilt == _without_added(OLD / study / "trials.csv")[0]
    def sections(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("#")]

    now = iter(sections((out / "report.md").read_text()))
    assert all(heading in now for heading in sections((OLD / study / "report.md").read_text()))  # in order


def test_report_of_a_decode_study_keeps_the_decode_metric(tmp_path):
    out = old_store("decode", tmp_path)
    res = cli("report", "--study", "decode", "--results", str(tmp_path))
    assert res.returncode == 0, res.stderr
    text = (out / "report.md").read_text()
    assert "single-stream decode tok/s (1 / TPOT)" in text and "output tok/s" not in text
    assert "(judged on decode tok/s, the study's metric)" in res.stdout



def test_a_decode_sweep_of_today_stores_its_metric_and_report_keeps_it(tmp_path, space_file):
    """probe.metric = "decode_tok_s" in the experiment file: the sweep, its stored study and a
    later ``nccl-tune report`` all say decode tok/s."""
    cfg = write_config(tmp_path / "exp.toml", command=envrate_command(), space=space_file(
        '[[presets]]\nname = "ll"\nenv = { NCCL_PROTO = "LL" }\n'), trials=2, max_tokens=20, repeats=2,
        extra_probe='metric = "decode_tok_s"', extra_sweep='mode = "presets"')
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "dec", "--no-confirm",
              "--no-final-baseline")
    assert res.returncode == 0, res.stderr[-2000:]
    info = optuna.load_study(study_name="dec", storage=f"sqlite:///{tmp_path / 'r' / 'dec' / 'study.db'}").user_attrs
    assert info["metric"] == "decode_tok_s" and info["format_version"] == FORMAT_VERSION
    res = cli("report", "--study", "dec", "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "r" / "dec" / "report.md").read_text()
    assert "single-stream decode tok/s (1 / TPOT)" in text and "output tok/s" not in text

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
    cfg = example_text("sim.toml").replace("port = 8477", f"port = {free_port()}")
    cfg = cfg.replace(MEASURED_WITHOUT, "")
    cfg = cfg.replace('space = "search_spaces/default.toml"', f'space = "{SPACE}"')
    (tmp_path / "decode.toml").write_text(cfg)
    res = cli("sweep", str(tmp_path / "decode.toml"), "--results", str(tmp_path), "--trials", "6")
    assert res.returncode == 2, res.stderr
    assert "key 'probe.metric' has value 'output_tok_s'" in res.stderr
    assert "the metric study 'decode' is judged on" in res.stderr


def test_a_night_stored_by_the_previous_format_resumes_and_is_upgraded(tmp_path):
    """A study format 7 wrote (tests/fixtures/stores/c355452, before the loaded library and the
    settings set behind nccl-tune's back of format 8, the config path of format 9) is resumed by today's sweep: its trials are kept as they were, the
    night goes on from them, and the study is written at today's format."""
    out = old_store("output", tmp_path, commit="c355452")
    before = optuna.load_study(study_name="output", storage=f"sqlite:///{out / 'study.db'}")
    kept = {t.number: t.values for t in before.trials}
    config = example_text("sim.toml").replace("port = 8477", f"port = {free_port()}")
    config = config.replace(MEASURED_WITHOUT, "")
    config = config.replace('space = "search_spaces/default.toml"', f'space = "{SPACE}"')
    path = tmp_path / "sim.toml"
    path.write_text(config)
    res = cli("sweep", str(path), "--study", "output", "--results", str(tmp_path), "--trials", "7",
              "--no-confirm", "--no-final-baseline")
    assert res.returncode == 0, res.stderr
    after = optuna.load_study(study_name="output", storage=f"sqlite:///{out / 'study.db'}")
    assert after.user_attrs["format_version"] == FORMAT_VERSION == 11
    assert after.user_attrs["config_path"] == str(path)  # format 9: the check command a decision names
    assert {t.number: t.values for t in after.trials if t.number in kept} == kept  # nothing recorded is lost
    assert len(after.trials) > len(kept)  # and the night went on
    records = {r.trial: r for r in StudyStore(open_study("output", f"sqlite:///{out / 'study.db'}", create=False),
                                              {}).records()}
    assert all(records[n].nccl_loaded is None and records[n].nccl_build_id == "" for n in kept)  # not known
    new = [r for n, r in records.items() if n not in kept and r.status is Status.OK]
    assert new and all(r.nccl_loaded and r.nccl_build_id and r.nccl_library_version for r in new)
