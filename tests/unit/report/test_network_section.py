"""The report's triage section across nodes: the NET triage's findings and each cross-node pair's
transport, judged from a real two-host log on sockets (tests/fixtures/nccl_logs/)."""

from __future__ import annotations

import dataclasses

from tests.helpers import ROOT, sample_records
from tuner.nccl import parse_log, read_network
from tuner.record import StudyInfo
from tuner.report.build import night_report
from tuner.report.markdown import report_markdown
from tuner.triage import Triage, network_triage, with_network

INFO = StudyInfo(server_command=["vllm", "serve", "/models/m", "--port", "8000"], storage_hint="sqlite:///s.db")
SOCKETS = ROOT / "tests" / "fixtures" / "nccl_logs" / "nccl-2.11.4-two-node-socket.log"


def test_report_md_lists_the_fallback_and_each_pairs_transport(tmp_path):
    parsed = parse_log(SOCKETS.read_text().splitlines())
    judged = with_network(Triage((), False, "NCCL logged none of its GRAPH lines"),
                          network_triage(read_network(parsed), parsed.echoes))
    info = dataclasses.replace(INFO, triage=judged.to_dict())
    md = report_markdown(night_report(sample_records(), info, "n", tmp_path, min_effect=0.01, figures=False))
    section = md.split("## NCCL's model of the machine and its network across nodes\n\n", 1)[1].split("\n## ", 1)[0]
    items = [line for line in section.splitlines() if line.startswith("- ")]
    assert items[1].startswith("- Network fallback to sockets: ip-10-0-139-244 -> ip-10-0-142-242")
    assert items[2].startswith("- network: ip-10-0-139-244 -> ip-10-0-142-242 via NET/Socket")
    assert items[3].startswith("- network: ip-10-0-142-242 -> ip-10-0-139-244 via NET/Socket")


def test_the_use_lines_of_a_server_across_nodes_say_every_node():
    """A set for a server spanning nodes works only when every node runs it: the "Use it" lines
    say so; on one host they do not."""
    import pandas as pd

    from tuner.record.study import StudyInfo, TopologyRecord
    from tuner.report.text import use_lines

    use = pd.Series({"env": {"NCCL_IB_GID_INDEX": "3"}, "flags": []})
    across = StudyInfo(server_command=["vllm", "serve", "m"], topology=TopologyRecord(nranks=2, nnodes=2))
    lines = use_lines(use, across)
    assert "export NCCL_IB_GID_INDEX=3" in lines
    assert any(line.startswith("# a server across 2 nodes: the same set on every node") for line in lines), lines
    one = StudyInfo(server_command=["vllm", "serve", "m"], topology=TopologyRecord(nranks=8, nnodes=1))
    assert not any("every node" in line for line in use_lines(use, one))
