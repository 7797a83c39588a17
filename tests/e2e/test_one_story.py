"""One story: a simulator night's verdict, tables, figures and notebook state the same figures.

A real sweep of the simulated motivating box (``tuner.sim``, profile pcie-8x-mla) writes its
results folder; then the verdict paragraph of report.md is read as a person reads it (the
baseline's level, its drift, the best set with its gain and interval) and every other output is
held to it: the judgement.json beside trials.csv, what each figure drew (the ``plot_*``
functions return it: the baselines' levels and drift, the forest plot's title, order and marked
set, each variable panel's points, the history's best so far), report.md's table and the
console table (one order), report.html (the same verdict and table, the forest plot inline), and
the lines notebooks/analysis.ipynb prints. The night's numbers
are whatever the simulator measured; only their agreement is checked.
"""

from __future__ import annotations

import os
import re

import nbformat
from matplotlib.figure import Figure
from nbclient import NotebookClient

from tests.e2e.test_notebook import KERNEL, NOTEBOOK, _kernel_spec
from tests.helpers import ROOT, cli, write_config
from tests.unit.report.page_reader import parse as parse_page
from tuner.record import set_key
from tuner.report.effects import plot_variable_effect, variable_effects_figure, variable_names
from tuner.report.forest import plot_trials_vs_baseline
from tuner.report.frame import env_text, judged_order, read_trials_csv
from tuner.report.history import plot_history
from tuner.report.plots import plot_baselines
from tuner.report.story import STORY_FILE, read_story

SIM = ["{python}", "-m", "tuner.sim", "serve", "--profile", "pcie-8x-mla", "--port", "{port}", "--load-time", "0.3"]
BEST = re.compile(r"Best set: (.+?) \(trial (\d+)\), ([+-]\d+\.\d) % \(95 % CI ([+-]\d+\.\d)\.\.([+-]\d+\.\d) %")


def axes():
    return Figure().subplots()


def pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}"


def _notebook_text(csv, tmp_path, monkeypatch) -> str:
    """Everything notebooks/analysis.ipynb printed or displayed as text, run against ``csv``."""
    monkeypatch.setenv("JUPYTER_PATH", str(_kernel_spec(tmp_path)))
    monkeypatch.setenv("NCCL_TUNE_TRIALS_CSV", str(csv))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "jupyter-runtime"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    monkeypatch.delenv("MPLBACKEND", raising=False)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, kernel_name=KERNEL, timeout=300, resources={"metadata": {"path": str(tmp_path)}}).execute()
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            assert out.output_type != "error", f"{out.ename}: {out.evalue}"
            texts.append(out.text if out.output_type == "stream" else out.get("data", {}).get("text/plain", ""))
    return "\n".join(texts)


def test_text_figures_and_notebook_tell_one_story(tmp_path, monkeypatch):
    cfg = write_config(tmp_path / "night.toml", command=SIM, space=ROOT / "search_spaces" / "default.toml", trials=7,
                       max_tokens=32, repeats=3, baseline_every=3)
    res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), "--study", "story", figures=True)
    assert res.returncode == 0, res.stderr
    study = tmp_path / "r" / "story"
    report = (study / "report.md").read_text()
    said = report.split("## Verdict\n\n", 1)[1].split("\n\n#", 1)[0].split("\n\n")
    decision = said[0]  # the decision first, in bold; its reasons; then the paragraph
    assert decision.startswith("**") and decision.endswith(".**"), said
    verdict = next(p for p in said if p.startswith("Baseline: "))

    # the verdict as a person reads it
    base = re.search(r"^Baseline: (\d+\.\d) single-stream output tok/s \(robust level of \d+ runs over (\d+) launches, "
                     r"drift (\d+\.\d) %", verdict)
    assert base is not None, verdict
    level, launches, drift = base.group(1), int(base.group(2)), base.group(3)
    best = BEST.search(verdict)

    # the judgement beside trials.csv, read back: the story every figure below is given
    df = read_trials_csv(study / "trials.csv")
    story = read_story(study / STORY_FILE)
    assert (f"{story.baseline_level:.1f}", len(story.baseline_levels), f"{story.drift * 100:.1f}") == (
        level, launches, drift)
    top = story.find(story.best) if story.best is not None else None
    assert (best is None) == (top is None), verdict
    if top is not None:
        assert best is not None
        assert best.groups() == (env_text(dict(top.env)), str(top.trials[0]), pct(top.ratio), pct(top.low),
                                 pct(top.high))

    # what each figure drew
    baselines = plot_baselines(axes(), df, story)
    assert (f"{baselines.level:.1f}", f"{baselines.drift * 100:.1f}", baselines.levels) == (
        level, drift, story.baseline_levels)
    ax = axes()
    rows = plot_trials_vs_baseline(ax, df, story, min_effect=0.01)
    assert f"Every measured set vs the untuned baseline ({level} tok/s)" in ax.get_title()
    keys = {int(t): set_key(e, f or ()) for t, e, f in zip(df["trial"], df["env"], df["flags"], strict=True)}
    in_rows = list(dict.fromkeys(keys[r.trial] for r in rows if r.section == "tuned" and r.trial is not None))
    assert in_rows == [k for k in story.order() if k in in_rows]  # the judgement's order, best first
    assert [r.trial for r in rows if r.mark] == (sorted(top.trials) if top is not None else [])
    for name in variable_names(df):
        panel = plot_variable_effect(axes(), df, story, name)
        assert "unset" not in panel.values
        assert [(p.key, f"{p.gain:+.1f}") for p in panel.points] == [
            (s.key, f"{s.gain_pct:+.1f}") for s in story.sets if name in s.env]
    legend = [t.get_text() for t in variable_effects_figure(df, story).legends[0].get_texts()]
    assert f"the baseline ({level} tok/s)" in legend
    history = plot_history(axes(), df, story)
    if top is not None and top.ratio > 1:
        assert history.best == top.key and f"{history.best_gains[-1]:+.1f}" == pct(top.ratio)

    # one order: report.md's table, the console table, the forest plot
    table = report.split("## Trials vs baseline", 1)[1].split("\n\n|", 1)[1].split("\n\n", 1)[0]
    md_trials = [int(line.split("|")[1]) for line in ("|" + table).splitlines()[2:]]
    head = res.stdout.index("trial  kind")
    console = res.stdout[head:].split("\n\n", 1)[0].splitlines()[1:]
    order = [int(t) for t in judged_order(df, story)["trial"]]
    assert md_trials == order and [int(line.split()[0]) for line in console] == order
    assert [r.trial for r in rows] == order

    # report.html: the same verdict, the forest plot inline, report.md's table in the same order
    page = parse_page(study / "report.html")
    assert page.sections[:3] == ["verdict", "forest", "sets"] and page.figures["forest"] == [True]
    assert page.paragraphs["verdict"][0] == decision.strip("*") and verdict in page.paragraphs["verdict"]
    assert f"\n{decision.strip('*')}\n" in res.stdout  # the terminal's verdict starts with the same line
    header, *html_rows = page.tables["sets"][0]
    assert [int(r[0]) for r in html_rows] == order
    assert [r[header.index("env")] for r in html_rows] == [env_text(e) for e in judged_order(df, story)["env"]]

    # the notebook reads the same figures back
    text = _notebook_text(study / "trials.csv", tmp_path, monkeypatch)
    assert f"Baseline: {level} single-stream output tok/s over {launches} launches, drift {drift} %" in text
    if best is not None:
        assert best.group(0) + ")" in text
