"""A command that draws nothing never imports matplotlib (about 0.5 s of every start).

The report package loads its figure modules on first use; the sweep, status and compare paths
and a ``--no-figures`` report import only the words. Checked in a fresh interpreter, where
``sys.modules`` tells what was imported.
"""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT

CODE = """
import sys, tempfile
from pathlib import Path
import tuner.cli.dispatch, tuner.sweep, tuner.report as report
from tuner.record import StudyInfo
from tests.helpers import sample_records
out = Path(tempfile.mkdtemp())
report.write_outputs(sample_records(), StudyInfo(), "s", out, min_effect=0.01, figures=False)
assert (out / "report.html").is_file()
print("before", "matplotlib" in sys.modules)
report.plot_history  # a figure function, asked for: now it loads
print("after", "matplotlib" in sys.modules)
"""


def test_a_report_without_figures_never_imports_matplotlib():
    res = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["before", "False", "after", "True"], res.stdout


def test_the_lazy_names_are_listed_and_unknown_ones_refused():
    import pytest

    import tuner.report as report

    assert set(report.__all__) <= set(dir(report))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = report.no_such_name  # type: ignore[attr-defined]
