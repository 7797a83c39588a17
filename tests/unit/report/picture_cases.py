"""Sweeps to draw in the picture tests (and to render for a person to look at), built from real
trial records (:func:`tests.helpers.trial_record`): a sweep with failures, a sweep with a
winner, a sweep of one trial, a 10-set sweep with one faster, one slower and one failed set, and
a sweep of 70 sets (more rows than the forest plot draws)."""

from __future__ import annotations

import numpy as np

from tests.helpers import sample_records, trial_record
from tuner.record.trial import TrialRecord

MiB = 1 << 20


def _runs(rng: np.random.Generator, level: float, n: int = 4, noise: float = 0.008) -> list[float]:
    return [round(float(v), 2) for v in level * np.exp(rng.normal(0, noise, n))]


def with_failures() -> list[TrialRecord]:
    """The sample night: a crash, a hang, an interrupted trial and its retry, one still running."""
    return sample_records()


def with_winner() -> list[TrialRecord]:
    """Baseline, five presets (one clearly faster: +9 %), a confirmation of the winner, the final
    baseline re-measure; a concurrency table for each."""
    rng = np.random.default_rng(7)
    sets = [({"NCCL_PROTO": "LL"}, 1.005), ({"NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "16"}, 1.09),
            ({"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}, 0.97), ({"NCCL_BUFFSIZE": str(16 * MiB)}, 1.0),
            ({"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_PROTO": "LL128"}, 1.012)]
    def conc(factor: float) -> dict[int, float]:  # the gain fades as the batch grows
        return {c: round(80.0 * c * 0.9 ** (c.bit_length() - 1) * (1 + (factor - 1) / c), 1) for c in (1, 2, 4, 8)}

    recs = [trial_record(0, "baseline", _runs(rng, 80.0), concurrency=conc(1.0))]
    for i, (env, factor) in enumerate(sets, start=1):
        recs.append(trial_record(i, "preset", _runs(rng, 80.0 * factor), env=env, concurrency=conc(factor)))
    recs.append(trial_record(6, "confirm", _runs(rng, 80.0 * 1.09), env=sets[1][0], concurrency=conc(1.08)))
    recs.append(trial_record(7, "baseline", _runs(rng, 80.3), recheck=True, concurrency=conc(1.004)))
    return recs


def one_trial() -> list[TrialRecord]:
    """Only the baseline was measured."""
    return [trial_record(0, "baseline", [70.1, 71.3, 69.8, 70.6])]


def ten_sets() -> list[TrialRecord]:
    """Ten tuned sets: one 12 % faster, one 15 % slower, one crashed, seven within the noise;
    the baseline at the start and the end."""
    rng = np.random.default_rng(3)
    envs = [{"NCCL_PROTO": "LL"}, {"NCCL_PROTO": "LL128"}, {"NCCL_PROTO": "Simple"},
            {"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree"}, {"NCCL_MAX_NCHANNELS": "8"},
            {"NCCL_MAX_NCHANNELS": "32", "NCCL_PROTO": "LL"}, {"NCCL_BUFFSIZE": str(4 * MiB)},
            {"NCCL_BUFFSIZE": str(16 * MiB), "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_MAX_NCHANNELS": "16",
             "CUDA_DEVICE_MAX_CONNECTIONS": "1"},
            {"NCCL_NTHREADS": "256", "NCCL_PROTO": "Simple"}]
    factors = [1.003, None, 0.85, 0.998, 1.006, 0.995, 1.12, 1.001, 1.004, 0.997]
    recs = [trial_record(0, "baseline", _runs(rng, 64.0))]
    for i, (env, factor) in enumerate(zip(envs, factors, strict=True), start=1):
        if factor is None:
            recs.append(trial_record(i, "search", status="crashed", env=env,
                                     cause="exited with code 1: NCCL WARN [LL128] protocol disabled"))
        else:
            recs.append(trial_record(i, "search", _runs(rng, 64.0 * factor), env=env))
    recs.append(trial_record(11, "baseline", _runs(rng, 64.2), recheck=True))
    return recs


def many_sets(n: int = 70) -> list[TrialRecord]:
    """``n`` (at most 70) tuned sets (channels x protocol), the baseline before and after, two failures."""
    rng = np.random.default_rng(11)
    recs = [trial_record(0, "baseline", _runs(rng, 70.0))]
    for i in range(1, n + 1):
        env = {"NCCL_MAX_NCHANNELS": str(1 + (i - 1) % 35), "NCCL_PROTO": ("LL", "Simple")[(i - 1) // 35]}
        if i in (13, 40):
            recs.append(trial_record(i, "search", status="hung", env=env, cause="no token for 120 s"))
        else:
            recs.append(trial_record(i, "search", _runs(rng, 70.0 * (0.85 + 0.3 * rng.random())), env=env))
    recs.append(trial_record(n + 1, "baseline", _runs(rng, 70.4), recheck=True))
    return recs


CASES = {"failures": with_failures, "winner": with_winner, "one-trial": one_trial, "ten-sets": ten_sets,
         "many-sets": many_sets}


def every_verdict() -> list[TrialRecord]:
    """The baseline twice and one tuned set per verdict a measured set can get (faster ...
    not enough runs; the report sets the verdicts, see ``JUDGED``), from +12 % down to -12 %."""
    rng = np.random.default_rng(5)
    recs = [trial_record(0, "baseline", _runs(rng, 70.0))]
    for i, factor in enumerate(np.linspace(1.12, 0.88, len(JUDGED)), start=1):
        recs.append(trial_record(i, "search", _runs(rng, 70.0 * factor), env={"NCCL_MAX_NCHANNELS": str(i)}))
    recs.append(trial_record(len(JUDGED) + 1, "baseline", _runs(rng, 70.3), recheck=True))
    return recs


#: Verdicts given to the tuned sets of :func:`every_verdict`, trial 1 first.
JUDGED = ("faster", "faster, below the minimum effect", "failed confirmation", "inconclusive", "not applied",
          "unverifiable", "no significant difference", "not enough runs to judge",
          "slower, below the minimum effect", "slower")
