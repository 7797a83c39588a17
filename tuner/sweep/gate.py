"""The correctness gate in the night: each launch's greedy answers against the baseline's.

Every launch answers ``[gates] prompts`` greedily after its probe (:func:`tuner.sweep.trial._measure`,
kept in ``results/<study>/answers/trial-NNNN.json``, :func:`tuner.sweep.trial.answers_path`).
The study's first ok baseline launch of the host type holds the reference answers; its later
launches (re-measures) are compared with them and show where this machine forks by itself
(:func:`tuner.judging.self_divergence`), which the rule tolerates for every set. A set's launch
beyond tolerance (:func:`tuner.judging.judge_answers`) becomes ``wrong_output`` before it is
stored: told to the sampler as failed, never judged fast, never recommended; its measured
tok/s stay in the record for the report.

The reference configuration (``[gates] reference``): once a night, right after the first
baseline, the baseline is relaunched with the server's own allreduce off (the kind's
``reference_flags``) and ``NCCL_P2P_DISABLE=1`` (:data:`REFERENCE_ENV`): NCCL over host memory,
the path least likely to corrupt. When the baseline's answers part from that launch's beyond
tolerance, the machine's default path is suspect (noonghunna/club-3090 #922: vLLM's custom
allreduce returned wrong data over a patched P2P link): that is said as the machine's problem,
never blamed on a set, and from then on the sets are compared with the reference
configuration's answers instead of the baseline's (a set that fixes the path matches them; one
that keeps it does not).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tuner.judging import REFERENCE_PRESET, judge_answers, self_divergence
from tuner.measure import Answer, answers_from_json
from tuner.record import Kind, Status, TrialRecord
from tuner.study import StudyStore
from tuner.sweep.trial import answers_path

__all__ = ["REFERENCE_ENV", "REFERENCE_PRESET", "check_answers", "machine_line", "reference_record"]

#: The reference configuration's NCCL setting: no peer-to-peer transport, every transfer through
#: host memory (NCCL docs, Environment Variables, NCCL_P2P_DISABLE).
REFERENCE_ENV = {"NCCL_P2P_DISABLE": "1"}


def read_answers(study_dir: Path, trial: int) -> list[Answer]:
    """Trial ``trial``'s answers, empty when it has none (the gate off, a failed launch, an
    unreadable file)."""
    path = answers_path(study_dir, trial)
    try:
        return answers_from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []


def reference_record(store: StudyStore, host_type: str) -> TrialRecord | None:
    """The reference configuration's finished launch of ``host_type``, or None."""
    return next((r for r in store.finished() if r.preset == REFERENCE_PRESET and r.host_type in ("", host_type)),
                None)


def machine_line(rec: TrialRecord) -> str:
    """The machine's problem in words when the reference launch ``rec`` found the baseline's
    answers beyond tolerance of its own, else ``""``."""
    if not rec.answers_diverge:
        return ""
    return (f"the untuned baseline's answers part from the reference configuration's (trial {rec.trial}: the "
            f"server's own allreduce off, NCCL_P2P_DISABLE=1): {rec.answers_diverge}. The machine's default allreduce "
            "path may be corrupting answers (a custom allreduce over a bad P2P link: noonghunna/club-3090 #922); "
            "sets are compared with the reference configuration's answers, not the baseline's")


def check_answers(rec: TrialRecord, *, store: StudyStore, study_dir: Path, host_type: str,
                  log: Callable[[str], None]) -> None:
    """Judge the finished launch ``rec``'s answers (the module docstring) and settle its record:
    ``answers_checked``, ``answers_diverge``, and for a set beyond tolerance status
    ``wrong_output`` with the finding as its cause. Nothing to do without its answers or the
    baseline's."""
    answers = read_answers(study_dir, rec.trial) if rec.status.measured else []  # a failed soak answered first
    if not answers:
        return
    bases = [(r.trial, a) for r in store.ok_baselines(host_type) if (a := read_answers(study_dir, r.trial))]
    if not bases:
        return  # the first baseline: its answers are the reference
    ref_trial, ref = bases[0]
    forks = self_divergence(ref, [a for _, a in bases[1:]])
    if rec.kind is Kind.BASELINE:  # a re-measure: evidence of the machine's own forks, never judged
        check = judge_answers(ref, answers)
        rec.answers_checked, rec.answers_diverge = True, check.finding
        if check.divergence is not None:
            log(f"trial {rec.trial}: the baseline's own answers part from trial {ref_trial}'s ({check.finding}): "
                "a fork this machine makes by itself, tolerated for every set")
        return
    if rec.preset == REFERENCE_PRESET:
        check = judge_answers(answers, ref)  # the baseline judged against the reference configuration
        rec.answers_checked = True
        rec.answers_diverge = "" if check.within else check.finding
        said = machine_line(rec)
        log(f"warning: {said}" if said else f"correctness gate: the baseline's answers match the reference "
            f"configuration's (trial {rec.trial}) within tolerance")
        return
    against, whose = ref, f"the baseline's (trial {ref_trial})"
    reference = reference_record(store, host_type)
    if reference is not None and reference.answers_diverge and (ra := read_answers(study_dir, reference.trial)):
        against, whose, forks = ra, f"the reference configuration's (trial {reference.trial})", {}
    check = judge_answers(against, answers, forks_at=forks)
    rec.answers_checked, rec.answers_diverge = True, check.finding
    if not check.within:
        rec.status = Status.WRONG_OUTPUT
        rec.cause = f"wrong output: {check.finding}, against {whose} answers ({check.why})"
        log(f"trial {rec.trial}: {rec.cause}; its {rec.output_tok_s or 0:.1f} tok/s are kept but never recommended")
