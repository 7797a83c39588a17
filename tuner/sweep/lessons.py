"""What the night learns as it goes: from its first baseline, and from the sets it measured.

After the first ok baseline the study records what its log showed (:func:`learn`), and NCCL's
model of the machine judged (:func:`tuner.triage.triage`); every runner of the study then plans
the triage's fix sets first (:func:`plan_fixes`). When NCCL does not carry the decode allreduce
(:func:`backend_check`), a night on a known server (vLLM, SGLang) measures that server's backend
space first (:func:`measure_backends`); one that cannot choose it stops before its budget is
spent unless ``--force`` or the space varies a server flag. What the measured sets teach is this
host type's judgement (:func:`host_judgement`), on which the screen, the outlier re-measure and the
confirmations act.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from tuner.diagnose import load_diagnosis
from tuner.errors import BaselineFailed, StoppedByCheck
from tuner.inputs import BACKEND_SPACE, ExperimentConfig, SearchSpace, backend_space_path, load_space
from tuner.judging import (
    SINGLE_STREAM,
    UNKNOWN_TYPE,
    Judgement,
    cannot_act_on,
    host_type_groups,
    judge,
    judge_by_host_type,
    judge_levels,
    stats,
)
from tuner.launchers import launcher_of
from tuner.nccl import NEVER_LOADED, NcclVersion, Topology, machine_from_log, read_network
from tuner.planning import Planner, night_sizes
from tuner.record import Kind, Metric, StudyInfo, TopologyRecord, TrialRecord
from tuner.servers import BACKEND_SERVERS, kind_named
from tuner.study import StudyStore
from tuner.sweep import evidence
from tuner.sweep.p2p import night_health
from tuner.triage import Triage, network_triage, triage, with_network

__all__ = ["backend_check", "baseline_failed", "host_judgement", "learn", "measure_backends", "plan_fixes"]


def host_judgement(store: StudyStore, host_type: str, metric: Metric, level: int = SINGLE_STREAM) -> Judgement:
    """The sets of ``host_type`` (else of hosts of no known type) judged against their own
    baseline launches on ``metric``, with the study's ``min_effect`` and what cannot act:
    single-stream, or the headline at concurrency ``level`` (:func:`tuner.judging.judge_levels`)."""
    info = store.info()
    min_effect = info.min_effect if info.min_effect is not None else stats.DEFAULT_MIN_EFFECT
    if level == SINGLE_STREAM:
        finished = store.finished()
        groups = judge_by_host_type(finished, metric=metric, min_effect=min_effect,
                                    cannot_act=cannot_act_on(info, finished))
        found = groups.get(host_type, groups.get(UNKNOWN_TYPE))
        return found if found is not None else judge([], metric=metric)
    mine = host_type_groups(store.finished())
    records = mine.get(host_type, mine.get(UNKNOWN_TYPE, []))
    return judge_levels(records, metric=metric, levels=(level,), judged_level=level, min_effect=min_effect,
                        cannot_act=cannot_act_on(info, records)).headline


def baseline_failed(finished: Sequence[TrialRecord], host_type: str) -> BaselineFailed:
    """The error of a night whose untuned baseline of ``host_type`` failed (``finished``: the
    study's finished trials): the last failure's status, cause and server log, and that no set
    was launched."""
    failed = [r for r in finished if r.kind is Kind.BASELINE and r.host_type in ("", host_type)]
    last = failed[-1] if failed else None
    return BaselineFailed(
        f"the untuned baseline failed ({last.status if last else '?'}: {last.cause if last else ''}"
        + (f"; server log {last.log}" if last and last.log else "") + "); "
        "no tuned set was launched, since nothing could be compared. Fix the server command or "
        "environment and run the same command again")


def learn(store: StudyStore, found: evidence.Evidence, cfg: ExperimentConfig, space: SearchSpace, study_dir: Path,
          log: Callable[[str], None], detail: Callable[[str], None] | None = None) -> None:
    """After the first ok baseline: record in ``store`` the NCCL version, topology and
    decode-allreduce backend its log showed (``found``), the triage of the machine and its P2P
    health (:func:`tuner.sweep.p2p.night_health`, NCCL's DIAG lines included), and say them: the triage's first line by ``log``, the rest by ``detail`` (default ``log``: the
    night's log file keeps them, the report has the triage whole)."""
    detail = detail or log
    topo = found.topology()
    version = found.version
    backend = found.backend
    store.update_info(nccl_learned=True, nccl_version=str(version or ""),
                      topology=TopologyRecord(**dataclasses.asdict(topo)) if topo else None,
                      allreduce_backend=backend.name, allreduce_backend_reason=backend.reason,
                      allreduce_nccl_on_decode_path=backend.nccl_on_decode_path,
                      allreduce_server=backend.server or "", server_kind=found.server_kind,
                      launcher=launcher_of(cfg.server.argv()).name)
    where = (f"{topo.nranks} ranks, {topo.nnodes} node{'s' if topo.nnodes != 1 else ''}, {topo.link or '?'}"
             if topo else "topology not logged")
    server = kind_named(found.server_kind).title if found.server_kind else "the server"
    detail(f"baseline: {server} {found.server_version or '(version not logged)'}, launched as "
           f"{launcher_of(cfg.server.argv()).name}")
    detail(f"baseline: NCCL {version or '(version not logged)'}, {where}; decode allreduce: "
           f"{backend.name} ({backend.reason})")
    judged = _triage(found, topo, cfg, space, study_dir)
    if not found.never_loaded:  # across nodes: each pair's transport, a socket fallback and its cause
        judged = with_network(judged, network_triage(read_network(found.parsed), found.parsed.echoes))
    store.update_info(triage=judged.to_dict())
    for i, line in enumerate(judged.lines()):
        (log if i == 0 else detail)(f"triage: {line}")
    health = night_health(found.parsed.diag)  # the host again, with NCCL's own P2P check where it ran
    store.update_info(p2p_health=health.to_dict())
    for line in health.lines():
        (log if line.startswith("P2P gate") else detail)(line)


def _triage(found: evidence.Evidence, topo: Topology | None, cfg: ExperimentConfig, space: SearchSpace,
            study_dir: Path) -> Triage:
    """NCCL's model of the machine from the baseline's log, judged at the allreduce sizes the
    night measures (:func:`tuner.planning.night_sizes`)."""
    if found.never_loaded:  # nothing of NCCL's to judge, and no logging setting would change that
        return Triage((), False, NEVER_LOADED)
    machine = machine_from_log(found.parsed, found.version)
    nranks = topo.nranks if topo is not None else (machine.local_gpus or 0) if machine is not None else 0
    sizes = night_sizes(cfg, load_diagnosis(study_dir))
    decode, prefill = sorted(set(sizes.decode)), (max(sizes.prefill) if sizes.prefill else None)
    if nranks < 2:
        return triage(None, version=found.version, nranks=2)
    disabled = cfg.server.env.get("NCCL_P2P_DISABLE", "") not in ("", "0")
    return triage(machine, version=found.version, nranks=nranks, decode_bytes=decode, prefill_bytes=prefill,
                  nnodes=topo.nnodes if topo is not None else 1, p2p_disabled=disabled, files=space.files())


def plan_fixes(info: StudyInfo, planner: Planner, log: Callable[[str], None]) -> None:
    """Plan the stored triage's fix sets first (every runner of the study reads the same)."""
    if not info.triage:
        return
    for line in planner.fixes_first(Triage.from_dict(info.triage).fix_sets()):
        log(f"triage: {line}")


def backend_check(info: StudyInfo, cfg: ExperimentConfig, space: SearchSpace, *, study: str, force: bool,
                  log: Callable[[str], None]) -> tuple[Path, str] | None:
    """When the study's first baseline showed (``info``) that NCCL does not carry the decode
    allreduce: with the server known (vLLM, SGLang) and its backend space found, ``(path, why)``
    of that space to measure first; else None, said as a note when the space varies a server
    flag or under ``force``. Raises StoppedByCheck (naming the backend space and the command)
    otherwise. None, silently, when NCCL carries it or that is not known."""
    if info.allreduce_nccl_on_decode_path is not False:
        return None
    message = (f"NCCL does not carry the decode allreduce on this server: {info.allreduce_backend} "
               f"({info.allreduce_backend_reason})")
    if info.allreduce_backend != "none" and info.allreduce_server in BACKEND_SERVERS:
        path, found = backend_space_path(info.allreduce_server, cfg.path)
        if found:
            return path, f"NCCL does not carry the decode allreduce on this server ({info.allreduce_backend} does)"
        advice = (f"the backend space of {info.allreduce_server}, {path}, was not found (looked for it as "
                  "sweep.space's default is found: from the current directory, then beside the experiment file)")
    elif info.allreduce_backend == "none":
        advice = "no backend choice can help: there is no allreduce to tune"
    else:
        first, *rest = BACKEND_SERVERS
        titles = [kind_named(s).title for s in BACKEND_SERVERS]
        others = "; ".join(f"{BACKEND_SPACE.format(server=s)} for {kind_named(s).title}'s" for s in rest)
        advice = (f"the server is none of {', '.join(titles)} by its command or log, so the night cannot choose its "
                  "backend space: to measure the backend choice itself run "
                  f"`nccl-tune sweep {cfg.path} --space {BACKEND_SPACE.format(server=first)} --study "
                  f"{study}-backends` ({kind_named(first).title}'s switches; {others})")
    message += ". NCCL variables cannot change decode speed here, so no tuned relaunch was spent"
    varies = [n for n in space.choices() if n.startswith("-")]
    if varies:
        log(f"note: {message}; the space varies {', '.join(varies)}, which can move it to NCCL")
    elif force:
        log(f"note: {message}; sweeping anyway (--force)")
    else:
        raise StoppedByCheck(f"{message}; {advice}. --force sweeps anyway")
    return None


def measure_backends(path: Path, message: str, *, store: StudyStore, planner: Planner, allow_unsafe: bool,
                     version: NcclVersion | None, log: Callable[[str], None]) -> None:
    """Plan the presets of the backend space at ``path`` first in this night (every runner of
    the study the same), said in one progress line after ``message``; a preset whose value of a
    name the night's space already searches with other candidates cannot join the study, and
    is said and left out. Raises what :func:`tuner.inputs.space.load_space` raises."""
    backends = load_space(path, allow_unsafe=allow_unsafe, version=version)
    for notice in backends.notices:
        log(notice)
    refused = set(store.plan_also(backends.choices()))
    if refused:
        kept = [p for p in backends.presets if not {f"{k}={v}" for k, v in p.env.items()} & refused]
        log(f"note: {path}: {', '.join(sorted(refused))} cannot join this study (the space "
            "searches that name with other candidates); the presets holding it are left out")
        backends = dataclasses.replace(backends, presets=kept)
    names = planner.backends_first(backends)
    sets = f"{len(names)} backend set{'s' if len(names) != 1 else ''}: {', '.join(names)}" if names else "no new set"
    log(f"note: {message}; the night measures the backend space {path} next ({sets}), then the "
        "space's NCCL sets, whose NCCL variables cannot act at decode here")
