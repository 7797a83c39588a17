"""A shared study's workers on Slurm and on Kubernetes, end to end: docs/SCALE.md's commands
("On Slurm and Kubernetes"), run as printed against the stand-in ``sbatch`` and ``kubectl``
(tests/launchers/), each array task or pod one ``nccl-tune sweep`` worker of the simulator on a
real PostgreSQL (tests/pg.py). The stand-ins play each node or pod on this machine: what differs
between real nodes (the server's port, free on each) is each played node's own variable
(FAKE_SLURM_NODES, FAKE_KUBE_NODES), so the experiment is examples/sim.toml with its port read
from ``${PORT}`` and a tiny budget (6 relaunches, 0.3 s loads, short probes).

And the stand-ins themselves, where a test of the examples would not show a mistake: --array's
spellings and refusals, #SBATCH lines under the command line's options, --exclusive, --output's
pattern; a Job's pods kept apart by their podAntiAffinity, a Secret never created."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests import doc_commands
from tests.helpers import ROOT, example_text
from tuner.planning import counts_in_budget
from tuner.record.trial import Kind, Status, TrialRecord
from tuner.study.storage import StudyStore, open_study

SCALE = ROOT / "docs" / "SCALE.md"
LAUNCHERS = ROOT / "tests" / "launchers"
BUDGET = 6  # 2 workers: 2 baselines in the first round, then sets, and the checks' 2 slots


def _records(url: str, study: str) -> list[TrialRecord]:
    return StudyStore(open_study(study, url, create=False), {}).records()


def _workspace(tmp: Path) -> Path:
    """A checkout's root as the docs' commands expect it: examples/ (sim.toml made tiny, its port
    each node's ${PORT}) and search_spaces/."""
    ws = tmp / "ws"
    for name in ("examples", "search_spaces"):
        shutil.copytree(ROOT / name, ws / name)
    text = example_text("sim.toml").replace("port = 8477", 'port = "${PORT}"')
    text = text.replace('"--load-time", "1"', '"--load-time", "0.3"').replace("trials = 12", f"trials = {BUDGET}")
    text = text.replace("max_tokens = 96", "max_tokens = 24").replace("repeats = 6", "repeats = 2")
    assert '"${PORT}"' in text and f"trials = {BUDGET}" in text and "repeats = 2" in text
    (ws / "examples" / "sim.toml").write_text(text)
    return ws


def _bin(tmp: Path) -> Path:
    """``nccl-tune`` as installed, running this checkout (figures off, as tests/helpers.py's
    night_args does), and ``python3`` this interpreter (the stand-ins read YAML with its PyYAML)."""
    folder = tmp / "bin"
    if folder.is_dir():
        return folder
    folder.mkdir()
    shim = folder / "nccl-tune"
    shim.write_text(f"#!{sys.executable}\nimport os, sys\nsys.path.insert(0, {str(ROOT)!r})\n"
                    f"os.environ['PYTHONPATH'] = {str(ROOT)!r}  # the servers it starts run this checkout too\n"
                    "from tuner.cli import main\n"
                    "args = sys.argv[1:]\n"
                    "args += ['--no-figures'] if args[:1] and args[0] in ('sweep', 'check', 'report') else []\n"
                    "sys.exit(main(args))\n")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    (folder / "python3").symlink_to(sys.executable)
    return folder


def _nodes(count: int) -> dict[str, dict[str, str]]:
    from tests.helpers import free_port

    quick = {"NCCL_TUNE_HEARTBEAT_S": "1", "NCCL_TUNE_GRACE_S": "3"}
    return {f"node{i}": {"PORT": str(free_port()), **quick} for i in range(count)}


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "FAKE_"))}
    env.pop("PYTHONPATH", None)  # the shim finds this checkout itself, as an installed nccl-tune would
    env.update(PATH=f"{_bin(tmp)}{os.pathsep}{LAUNCHERS}{os.pathsep}{env.get('PATH', '')}",
               NCCL_TUNE_WORKERS_DIR=str(tmp / "workers"), **extra)
    return env


def _check_study(url: str, study: str, workers: int) -> None:
    records = _records(url, study)
    relaunched = [r for r in records if r.kind.relaunched]
    budgeted = [r for r in relaunched if counts_in_budget(r)]
    table = "\n".join(f"{r.trial} {r.kind.value} {r.status.value} {r.runner}" for r in relaunched)
    assert len(budgeted) <= BUDGET and all(r.status is Status.OK for r in budgeted), table
    assert [r for r in budgeted if r.kind in (Kind.PRESET, Kind.SEARCH)], table  # beyond the baselines
    assert not [r for r in relaunched if r.status is Status.RUNNING], table
    assert len({r.runner for r in relaunched}) == workers, table  # every worker measured


@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_the_slurm_array_of_workers_as_the_docs_give_it(tmp_path: Path, pg_url: str):
    ws = _workspace(tmp_path)
    nodes = _nodes(2)
    env = _env(tmp_path, NCCL_TUNE_STORAGE=pg_url, FAKE_SLURM_NODES=json.dumps(nodes),
               FAKE_SLURM_STATE=str(tmp_path / "slurm"))
    cmd = doc_commands.command(SCALE, "sbatch ")
    res = doc_commands.run(cmd, ws, env, insert=("--wait",), timeout=240)  # --wait: sbatch(1)'s, to end with the job
    outs = {p.name: p.read_text() for p in sorted(ws.glob("slurm-*.out"))}
    shown = "\n".join(f"--- {k}\n{v[-3000:]}" for k, v in outs.items())
    assert res.returncode == 0, res.stdout + shown
    assert not res.missing, res.stdout  # type: ignore[attr-defined]
    job = res.stdout.split()[-1]
    assert sorted(outs) == [f"slurm-{job}_0.out", f"slurm-{job}_1.out"], shown
    assert f"task 0 of job {job} on node0: study night-1" in outs[f"slurm-{job}_0.out"], shown
    assert f"task 1 of job {job} on node1: study night-1" in outs[f"slurm-{job}_1.out"], shown
    for node in nodes:  # each worker kept its results on its node
        assert (ws / "results" / node / "night-1" / "night.log").is_file(), shown
    _check_study(pg_url, "night-1", workers=2)
    assert pg_url.split("@")[0] not in "".join(outs.values())  # the password is never printed


@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_the_kubernetes_indexed_job_of_workers_as_the_docs_give_it(tmp_path: Path, pg_url: str):
    ws = _workspace(tmp_path)
    env = _env(tmp_path, NCCL_TUNE_STORAGE=pg_url, FAKE_KUBE_NODES=json.dumps(_nodes(2)),
               FAKE_KUBECTL_STATE=str(tmp_path / "kube"),
               FAKE_KUBECTL_SECRETS=json.dumps({"nccl-tune-storage": {"url": pg_url}}))
    prefixes = ("kubectl create secret", "kubectl create configmap", "kubectl apply", "kubectl wait")
    try:
        for prefix in prefixes:
            cmd = doc_commands.command(SCALE, prefix)
            try:
                res = doc_commands.run(cmd, ws, env, timeout=240)
            except subprocess.TimeoutExpired:
                res = None
            if res is None or res.returncode or res.missing:  # type: ignore[attr-defined]
                logs = subprocess.run(["kubectl", "logs", "-l", "batch.kubernetes.io/job-name=nccl-tune-workers",
                                       "--prefix", "--tail=40"], cwd=ws, env=env, capture_output=True, text=True)
                raise AssertionError(f"$ {cmd.line}\n{res.stdout if res else 'timed out'}\n{logs.stdout}{logs.stderr}")
        logs = subprocess.run(["kubectl", "logs", "-l", "batch.kubernetes.io/job-name=nccl-tune-workers", "--prefix",
                               "--tail=-1"], cwd=ws, env=env, capture_output=True, text=True, check=True).stdout
        assert "[pod/nccl-tune-workers-0-" in logs and "[pod/nccl-tune-workers-1-" in logs, logs[-3000:]
        assert pg_url.split("@")[0] not in logs
        _check_study(pg_url, "night-1", workers=2)
    finally:
        res = doc_commands.run(doc_commands.command(SCALE, "kubectl delete"), ws, env)
    assert res.returncode == 0 and not res.missing, res.stdout  # type: ignore[attr-defined]
    assert not list((tmp_path / "kube" / "pods").iterdir())


# -- the stand-ins ------------------------------------------------------------------------------

SCRIPT = """#!/bin/sh
#SBATCH --job-name=probe
#SBATCH --output=out-%x-%A_%3a.txt   # a comment after the option
#SBATCH --array=0-1
echo "start $SLURM_ARRAY_TASK_ID" >> trace
echo "task $SLURM_ARRAY_TASK_ID job $SLURM_JOB_ID array $SLURM_ARRAY_JOB_ID count $SLURM_ARRAY_TASK_COUNT on $SLURMD_NODENAME port ${PORT:-none} args $*"
sleep 0.2
echo "end $SLURM_ARRAY_TASK_ID" >> trace
exit $((SLURM_ARRAY_TASK_ID % 3))
#SBATCH --array=0-99
"""


def _sbatch(tmp: Path, *args: str, nodes: dict | list | None = None) -> subprocess.CompletedProcess[str]:
    env = _env(tmp, FAKE_SLURM_STATE=str(tmp / "slurm"))
    if nodes is not None:
        env["FAKE_SLURM_NODES"] = json.dumps(nodes)
    return subprocess.run(["sbatch", *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=60)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "job.sh"
    path.write_text(SCRIPT)
    return path


def _outs(tmp: Path) -> dict[str, str]:
    return {p.name: p.read_text().strip() for p in sorted(tmp.glob("out-*.txt"))}


def test_sbatch_reads_the_scripts_options_under_the_command_lines(tmp_path, script):
    nodes = {"a": {"PORT": "1"}, "b": {"PORT": "2"}}
    res = _sbatch(tmp_path, "--wait", "--exclusive", "--array=1-5:2%2", str(script), "x", "y z", nodes=nodes)
    assert res.returncode == 2, res.stderr  # the highest status: task 5 exits 5 % 3
    job = int(res.stdout.split()[-1])
    outs = _outs(tmp_path)
    assert sorted(outs) == [f"out-probe-{job}_{i:03d}.txt" for i in (1, 3, 5)]  # the script's --array=0-1 lost
    lines = [outs[f"out-probe-{job}_{i:03d}.txt"] for i in (1, 3, 5)]
    assert [line.split(" on ")[0] for line in lines] == [f"task {i} job {job + n} array {job} count 3"
                                                       for n, i in enumerate((1, 3, 5))]
    assert all(line.endswith("args x y z") for line in lines)
    assert {line.split(" on ")[1].split(" args")[0] for line in lines} <= {"a port 1", "b port 2"}


@pytest.mark.parametrize("spec,indices", [("0-2", [0, 1, 2]), ("4,1,2-3", [1, 2, 3, 4]), ("0-6:3", [0, 3, 6]),
                                          ("7", [7]), ("0-1%1", [0, 1])])
def test_sbatch_runs_each_index_of_an_array(tmp_path, script, spec, indices):
    res = _sbatch(tmp_path, "-W", "-a", spec, "--output=out-%a.txt", str(script))
    assert res.returncode == max(i % 3 for i in indices), res.stderr
    assert sorted(_outs(tmp_path)) == sorted(f"out-{i}.txt" for i in indices)


@pytest.mark.parametrize("args,nodes", [
    (("--array=0-2%1", "--exclusive"), ["n1", "n2", "n3"]),  # the limit: one at a time on three free nodes
    (("--array=0-2", "--exclusive"), ["n1"]),                # --exclusive: one node, one task on it at a time
])
def test_sbatch_runs_one_task_at_a_time_when_told(tmp_path, script, args, nodes):
    res = _sbatch(tmp_path, "--wait", *args, str(script), nodes=nodes)
    assert res.returncode == 2, res.stderr
    events = (tmp_path / "trace").read_text().split()
    assert events[0::2] == ["start", "end"] * 3 and events[1::2] == ["0", "0", "1", "1", "2", "2"], events


@pytest.mark.parametrize("spelling", [("--array=0,2",), ("--array", "0,2"), ("-a0,2",), ("-a", "0,2")])
def test_sbatch_reads_every_spelling_of_array(tmp_path, script, spelling):
    res = _sbatch(tmp_path, "--wait", *spelling, "-o", "out-%a.txt", str(script))
    assert res.returncode == 2 and sorted(_outs(tmp_path)) == ["out-0.txt", "out-2.txt"], res.stderr


@pytest.mark.parametrize("spec", ["3-1", "0-1001", "a-b", "0-4:0", "1,,2", "0-3%0", "-1", "0-3%x"])
def test_sbatch_refuses_an_array_it_cannot_read(tmp_path, script, spec):
    res = _sbatch(tmp_path, f"--array={spec}", str(script))
    assert res.returncode == 1 and "Invalid job array specification" in res.stderr, (spec, res.stderr)
    assert not _outs(tmp_path)


def test_sbatch_without_exclusive_shares_one_node_and_without_wait_returns_at_once(tmp_path, script):
    res = _sbatch(tmp_path, "--parsable", "--array=0-2", str(script), nodes=["n1", "n2"])
    assert res.returncode == 0 and res.stdout.strip().isdigit(), res.stderr
    import time

    deadline = time.monotonic() + 60
    while len([o for o in _outs(tmp_path).values() if o]) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert {line.split(" on ")[1].split()[0] for line in _outs(tmp_path).values()} == {"n1"}


#: Each pod appends "start I" and "end I" to $TRACE around a short sleep, and prints its argv,
#: node and Secret value.
POD = ("import os, sys, time\n"
       "trace = lambda w: open(os.environ['TRACE'], 'a').write(w + ' ' + sys.argv[2] + '\\n')\n"
       "trace('start'); print(' '.join(sys.argv[1:]), 'on', os.environ['NODE'], os.environ['TOKEN'], flush=True)\n"
       "time.sleep(0.2); trace('end')\n")


def _job(tmp: Path) -> Path:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "probe"},
           "spec": {"completionMode": "Indexed", "completions": 3, "parallelism": 3,
                    "template": {"metadata": {"labels": {"app": "probe"}}, "spec": {
                        "restartPolicy": "Never",
                        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": {"app": "probe"}},
                             "topologyKey": "kubernetes.io/hostname"}]}},
                        "containers": [{"name": "c", "command": ["python3", "-c", POD],
                                        "args": ["index", "$(JOB_COMPLETION_INDEX)", "$$(LITERAL)", "$(UNSET)"],
                                        "env": [{"name": "TOKEN",
                                                 "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                                                {"name": "TRACE", "value": str(tmp / "trace")}]}]}}}}
    path = tmp / "job.json"
    path.write_text(json.dumps(job))
    return path


def _kubectl(tmp: Path, *args: str, secret: str = "v", nodes: tuple[str, ...] = ("a", "b")
             ) -> subprocess.CompletedProcess[str]:
    env = _env(tmp, FAKE_KUBECTL_STATE=str(tmp / "kube"), FAKE_KUBECTL_SECRETS=json.dumps({"s": {"k": secret}}),
               FAKE_KUBE_NODES=json.dumps({n: {"NODE": n} for n in nodes}))
    return subprocess.run(["kubectl", *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("nodes", [("a", "b", "c"), ("a",)])
def test_kubectl_runs_an_indexed_job_one_pod_per_node(tmp_path, nodes):
    """Three pods whose podAntiAffinity keeps them on different nodes: on three nodes each has
    its own, on one node they run one after the other (each starts after the last one ended)."""
    _job(tmp_path)
    assert _kubectl(tmp_path, "create", "secret", "generic", "s", "--from-literal=k=v").stdout == "secret/s created\n"
    assert _kubectl(tmp_path, "apply", "-f", "job.json", nodes=nodes).stdout == "job.batch/probe created\n"
    done = _kubectl(tmp_path, "wait", "--for=condition=Complete", "jobs/probe", "--timeout=60s")
    assert done.stdout == "job.batch/probe condition met\n", done.stderr
    logs = _kubectl(tmp_path, "logs", "-l", "app=probe", "--prefix").stdout.splitlines()
    said = sorted(line.split("] ", 1)[1] for line in logs)
    assert [w.rsplit(" on ", 1)[0] for w in said] == [f"index {i} $(LITERAL) $(UNSET)" for i in range(3)], logs
    placed = [w.split(" on ", 1)[1] for w in said]
    assert all(p.endswith(" v") for p in placed)
    if len(nodes) == 3:
        assert sorted(placed) == ["a v", "b v", "c v"]
    else:
        events = (tmp_path / "trace").read_text().split("\n")[:-1]
        assert [e.split()[0] for e in events] == ["start", "end"] * 3, events
    assert _kubectl(tmp_path, "delete", "job/probe").stdout == 'job.batch "probe" deleted\n'


def test_kubectl_leaves_a_pod_waiting_for_a_secret_never_created(tmp_path):
    _job(tmp_path)
    _kubectl(tmp_path, "apply", "-f", "job.json")
    res = _kubectl(tmp_path, "wait", "--for=condition=complete", "job/probe", "--timeout=1s")
    assert res.returncode == 1 and "timed out waiting for the condition on jobs/probe" in res.stderr
    pods = _kubectl(tmp_path, "get", "pods", "-l", "job-name=probe").stdout
    assert "CreateContainerConfigError" in pods, pods
    assert _kubectl(tmp_path, "delete", "-f", "job.json").returncode == 0


def test_kubectl_refuses_a_secret_whose_value_is_not_the_tests(tmp_path):
    res = _kubectl(tmp_path, "create", "secret", "generic", "s", "--from-literal=k=other")
    assert res.returncode == 1 and "FAKE_KUBECTL_SECRETS" in res.stderr
    assert "other" not in json.dumps([p.read_text() for p in (tmp_path / "kube").rglob("*") if p.is_file()])
