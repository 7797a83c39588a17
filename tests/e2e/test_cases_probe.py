"""Case 35 (TGI before 2.3: no GET /v1/models) through a whole sweep, as its RUN.txt says, and
the probe's other adaptations on the simulator: a warm-up before the first token, answers that
end early, multi-token chunks (issue 32, items 4, 6 and 7)."""

from __future__ import annotations

from tests.e2e.test_cases import case_config, sweep


def test_35_tgi_without_a_model_list_is_measured_by_its_info_route(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "35-tgi-no-v1-models"), "--no-final-baseline", "--trials", "2")
    assert res.returncode == 0, res.stderr
    assert list(df["status"]) == ["ok", "ok"], df[["status", "cause"]]
    assert 60 < df.loc[0, "output_tok_s"] < 110  # about 89 tok/s (11 ms per token)
    said = res.stdout + res.stderr
    notes = [line for line in said.splitlines() if "note: GET" in line]
    assert len(notes) == 1, said  # said once a night, not once a relaunch
    assert "/v1/models answered 404 (TGI before 2.3 has no model list)" in notes[0]
    assert "came from GET" in notes[0] and "/info" in notes[0]
    report = (tmp_path / "r" / "case" / "report.md").read_text()
    assert "TGI before 2.3 has no model list" in report


def test_35_the_workaround_server_model_still_measures(tmp_path):
    res, df = sweep(tmp_path, case_config(tmp_path, "35-tgi-no-v1-models", "sweep-with-model.toml"),
                    "--no-final-baseline", "--trials", "2")
    assert res.returncode == 0, res.stderr
    assert list(df["status"]) == ["ok", "ok"], df[["status", "cause"]]
    assert 60 < df.loc[0, "output_tok_s"] < 110
    assert "no model list" not in res.stdout + res.stderr  # nothing guessed, nothing said
