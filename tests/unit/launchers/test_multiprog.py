"""srun's --multi-prog file as nccl-tune writes it, read back by the stand-in srun of tests/launchers
(which splits words as slurmstepd does) into exactly the argv each task was given; the --label
lines read back by task; the allocation's hosts from scontrol."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.launchers import allocation_hosts, multiprog_text, split_label, srun_argv
from tuner.launchers.multiprog import quote

SRUN = Path(__file__).resolve().parents[2] / "launchers" / "srun"
ECHO = "import json, sys; print(json.dumps(sys.argv[1:]))"
HARD = ["plain", "two words", "it's", "100%", "%t", "%o", "a\\b", "$HOME", "'", '"q"', "tab\there", "--x={head}"]


def test_every_word_reaches_its_task_as_written(tmp_path):
    commands = [[sys.executable, "-c", ECHO, *HARD], [sys.executable, "-c", ECHO, "rank1", *reversed(HARD)]]
    conf = tmp_path / "step.conf"
    conf.write_text(multiprog_text(commands))
    argv = srun_argv(str(SRUN), 2, conf)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout
    by_task = {task: json.loads(text) for task, text in map(split_label, out.splitlines())}
    assert by_task == {0: HARD, 1: ["rank1", *reversed(HARD)]}


def test_the_step_command_is_the_one_the_contract_names(tmp_path):
    assert srun_argv("srun", 4, tmp_path / "f") == ["srun", "--nodes=4", "--ntasks-per-node=1", "--label",
                                                    "--multi-prog", str(tmp_path / "f")]


@pytest.mark.parametrize("word", ["a\nb", "\r"])
def test_a_newline_cannot_be_written(word):
    with pytest.raises(ValueError, match="newline"):
        quote(word)


@pytest.mark.parametrize("line, read", [
    ("0: hello", (0, "hello")), ("12: x: y", (12, "x: y")), (" 3: padded", (3, "padded")),
    ("srun: error: n1: task 1: Exited with exit code 1", (None, "srun: error: n1: task 1: Exited with exit code 1")),
    ("no label", (None, "no label")),
])
def test_labels_are_read_back(line, read):
    assert split_label(line) == read


def test_allocation_hosts_come_from_scontrol(tmp_path):
    scontrol = tmp_path / "scontrol"
    scontrol.write_text("#!/bin/sh\n[ \"$1 $2 $3\" = 'show hostnames spark-[a-b]' ] && printf 'spark-a\\nspark-b\\n'"
                        " || { echo 'scontrol: error: Invalid node name' >&2; exit 1; }\n")
    scontrol.chmod(0o755)
    env = {"PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    old = os.environ["PATH"]
    os.environ["PATH"] = env["PATH"]
    try:
        assert allocation_hosts({"SLURM_JOB_NODELIST": "spark-[a-b]"}) == (["spark-a", "spark-b"], "")
        hosts, why = allocation_hosts({"SLURM_JOB_NODELIST": "bad"})
        assert hosts == [] and "Invalid node name" in why
    finally:
        os.environ["PATH"] = old
    assert allocation_hosts({}) == ([], "SLURM_JOB_NODELIST is unset: not inside a Slurm allocation")
