"""The stored format's version: what each version stores, and how older ones read.

A study stores its format version as the study user attribute ``format_version``
(:attr:`tuner.record.study.StudyInfo.format_version`). This nccl-tune writes
:data:`FORMAT_VERSION` and reads every version up to it; a study written by a newer format is
refused (:func:`tuner.study.storage.check_format`, exit 2), never read half-understood nor
written into.

Versions:

1. Before the version was stored (nccl-tune up to commit f0e244d): no ``format_version`` and no
   ``metric`` study attribute. Read as version 1 (:data:`UNVERSIONED`). Its judged metric is
   the one its sweep told the sampler: that sweep's ``probe.metric``, whose median it gave
   Optuna as each ok relaunch's objective value, so a relaunch whose value is its record's
   ``decode_tok_s`` (and not its ``output_tok_s``) marks a ``decode_tok_s`` study
   (:meth:`tuner.study.storage.StudyStore.info`); without an ok relaunch it is ``output_tok_s``,
   the only metric that version's ``nccl-tune report`` judged on. (The version-1 sweep wrote
   its own report.md on ``probe.metric``, and ``report --study`` then rewrote it on output
   tok/s: the defect version 2 removes.)
2. ``format_version`` and ``metric`` (:class:`tuner.record.metric.Metric`) are stored with the
   study, and ``nccl-tune report`` judges on the stored metric. The typed parts (the screen
   summary, a trial's concurrency levels and host, the study's topology) keep version 1's JSON
   shapes, so version 1 values read unchanged. A version-1 study a sweep resumes is upgraded
   in place (its metric and the version are written).
3. The study's topology gains ``cpu_vendor`` (the CPU NCCL's GRAPH lines name: ``Intel``,
   ``AMD``, ``Zhaoxin``, ``ARM``, ``POWER``), which decides NCCL's default P2P level
   (:func:`tuner.nccl.p2p.default_p2p_level`). A version-2 study reads it as None (not known).
   The study also stores ``triage`` (:attr:`tuner.record.study.StudyInfo.triage`): NCCL's model
   of the machine judged after the first ok baseline, with the fixes planned first; a
   version-2 study reads it as ``{}`` (not judged): its night goes on without fixes.
4. The study stores ``judge_concurrency``
   (:attr:`tuner.record.study.StudyInfo.judge_concurrency`): the concurrency level the headline
   and "Use it" rest on (``probe.judge_concurrency``); a version-3 study reads it as 1, the
   single-stream probe, as it was judged.
5. The study stores ``confirm_skipped`` and ``next_run``
   (:attr:`tuner.record.study.StudyInfo.confirm_skipped`): why the last sweep's confirmation was
   not made or gave nothing, and what the next run makes first; a version-4 study reads both as
   ``""`` (the report then says no reason, as it did).
6. The study stores ``allreduce_server`` (:attr:`tuner.record.study.StudyInfo.allreduce_server`):
   the server the first baseline's command or log named (``vllm``, ``sglang``); a version-5
   study reads it as ``""`` (not known): its night stops where NCCL does not carry the decode
   allreduce, as it did, instead of measuring a backend space.
   Each trial stores ``backend_choice``, ``backend_applied`` and ``backend_reason``
   (:class:`tuner.record.trial.TrialRecord`): the backend choice its set names (a catalogue
   entry), whether its launch's log proved it ran, and the line quoted; a version-5 trial reads
   them as ``""``, None and ``""`` (no choice: judged as it was, on its NCCL proof alone).
   The study also stores ``trials`` (:attr:`tuner.record.study.StudyInfo.trials`): the relaunch
   budget of the last sweep, written when it starts, which also empties ``stop_reason`` then (an
   empty one with no live runner means the night stopped without an end mark); a running trial
   stores where its relaunch is (``phase``, :data:`tuner.study.storage.PHASE_ATTR`). A version-5
   study reads ``trials`` as None (the budget not known); its ``stop_reason`` is that of the last
   sweep that ended.

7. The study stores ``server_kind`` and ``launcher``
   (:attr:`tuner.record.study.StudyInfo.server_kind`): the server kind the first ok baseline ran
   (``vllm``, ``sglang``, ``tgi``, ``trtllm``, ``llamacpp``, ``openai``) and how it was launched;
   a version-6 study reads both as ``""`` (not known). Each trial stores ``launches``
   (:class:`tuner.record.trial.TrialRecord`): the server launches it made (2 when a
   machine-suspect failure was relaunched), and ``probe_notes``: how the probe adapted (a model
   name not from the model list, answers that ended before ``max_tokens``, multi-token chunks); a
   version-6 trial reads them as 1 and ``[]``. A running trial's ``server`` identity may hold
   ``launcher``: a short argv to stop what its launcher started outside the process tree (a
   container's client and name, a Slurm step's name; :meth:`tuner.launchers.Launcher.handle`); a
   version-6 identity reads it as empty (nothing but the process tree to stop).
8. Each trial stores the NCCL its server loaded (:class:`tuner.record.trial.TrialRecord`):
   ``nccl_loaded`` (whether any process of the server mapped a libnccl), ``nccl_library``,
   ``nccl_library_version`` and ``nccl_build_id`` (the file, its version and GNU build ID), and
   ``nccl_unlaunched_from``: where each variable echoed without nccl-tune setting it came from
   (a conf file, an env plugin, the container image). A version-7 trial reads them as None,
   ``""`` and ``{}`` (not known): its baseline is called untuned as it was, and ``compare`` says
   nothing about a library change.
9. The study stores ``config_path``, the experiment file its last sweep was given, as typed
   (:class:`tuner.record.study.StudyInfo`), so a "Not decided" decision can name the ``nccl-tune
   check`` command that would confirm its set; a version-8 study reads it as ``""`` (the command
   then says ``CONFIG``).
10. The gates (issue 34). Each trial stores its soak (:class:`tuner.record.trial.TrialRecord`:
    ``soak_s``, ``soak_failure``, ``soak_concurrency``, ``soak_requests``, ``soak_tok_s``: the
    sustained load a finalist's confirmation and the final baseline ran, tuner.measure.soak) and
    the correctness gate's finding (``answers_checked``, ``answers_diverge``); two statuses are
    new, ``wrong_output`` and ``failed_soak``. The study stores ``p2p_health``
    (:attr:`tuner.record.study.StudyInfo.p2p_health`: what the host and NCCL's own check say
    blocks GPU peer-to-peer). A version-9 trial reads them as no soak (None, ``""``, ``[]``, 0,
    None) and not checked (False, ``""``); a version-9 study reads ``p2p_health`` as ``{}`` (not
    judged).
11. A server spanning nodes (issue 36): each trial stores ``node_ranks``
    (:attr:`tuner.record.trial.TrialRecord.node_ranks`, ``{host: ranks seen}`` over every node's
    NCCL lines). A version-10 trial reads it as ``{}`` (one host, or not counted per node).

A later change that adds or changes a stored field bumps :data:`FORMAT_VERSION` by one, adds
its line above (what is new, and what an older study reads as), and gives the new field a
default that says "written before this version".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["FORMAT_VERSION", "UNVERSIONED", "newer_than_known", "stored_version"]

#: The format this nccl-tune writes (and the newest it reads).
FORMAT_VERSION = 11
#: The version of a study stored without one.
UNVERSIONED = 1


def stored_version(attrs: Mapping[str, Any]) -> int:
    """The format version of a study's user attributes ``attrs``: its ``format_version``, or
    :data:`UNVERSIONED` without one. Raises ValueError when it is not a whole number >= 1."""
    value = attrs.get("format_version")
    if value is None:
        return UNVERSIONED
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"format_version {value!r} is not a whole number >= 1")
    return value


def newer_than_known(version: int) -> bool:
    """True when ``version`` is newer than :data:`FORMAT_VERSION`: this nccl-tune cannot read it."""
    return version > FORMAT_VERSION
