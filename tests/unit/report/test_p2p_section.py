"""The report's "P2P health" section, from the study's stored P2P health (StudyInfo.p2p_health):
report.md's section, the terminal's gate lines after the verdict, nothing for a study stored
before it was read. Judged from the real fixture trees (tests/fixtures/p2phost/)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

from rich.console import Console

from tests.helpers import sample_records
from tuner.record import StudyInfo
from tuner.report.build import night_report
from tuner.report.markdown import report_markdown
from tuner.report.text import p2p_section, print_results
from tuner.server import p2phost
from tuner.triage import p2p_health

TREES = Path(__file__).resolve().parents[2] / "fixtures" / "p2phost"
INFO = StudyInfo(server_command=["vllm", "serve", "/models/m", "--port", "8000"], storage_hint="sqlite:///s.db")


def _info(tree: str) -> StudyInfo:
    return dataclasses.replace(INFO, p2p_health=p2p_health(p2phost.read_host(TREES / tree)).to_dict())


def test_a_gated_host_its_gates_in_report_md_and_on_the_terminal(tmp_path):
    info = _info("acs_redirect")
    night = night_report(sample_records(), info, "n", tmp_path, min_effect=0.01, figures=False)
    md = report_markdown(night)
    section = md.split("## P2P health\n\n", 1)[1].split("\n## ", 1)[0]
    items = [line for line in section.splitlines() if line.startswith("- ")]
    assert items[0].startswith("- P2P gate: ACS redirect (ReqRedir+ CmpltRedir+) on bridges 0000:40:01.1, 0000:60:01.1")
    assert items[1].startswith("- P2P gate: IOMMU in translated mode (DMA-FQ, ivhd0)")
    assert items[2].startswith("- P2P health: not known: BAR1 size and the driver's P2P matrix")
    out = io.StringIO()
    print_results(night, night.verdict, info, Console(file=out, width=200))
    shown = [line for line in out.getvalue().splitlines() if line.startswith("P2P")]
    assert [line[:40] for line in shown] == ["P2P gate: ACS redirect (ReqRedir+ CmpltR", "P2P gate: IOMMU in translated mode (DMA-"]


def test_a_clean_host_one_line_in_report_md_none_on_the_terminal(tmp_path):
    info = _info("clean")
    assert p2p_section(info).blocks[0].items[0] == (
        "P2P health: nothing blocks P2P that this host shows (2 GPUs, ACS redirect off on 2 bridges, IOMMU identity)")
    night = night_report(sample_records(), info, "n", tmp_path, min_effect=0.01, figures=False)
    out = io.StringIO()
    print_results(night, night.verdict, info, Console(file=out, width=200))
    assert "P2P" not in out.getvalue()


def test_a_study_stored_before_it_has_no_section(tmp_path):
    assert p2p_section(INFO) is None
    night = night_report(sample_records(), INFO, "n", tmp_path, min_effect=0.01, figures=False)
    assert night.p2p is None and "P2P health" not in report_markdown(night)
