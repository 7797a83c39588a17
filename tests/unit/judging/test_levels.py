"""tuner.judging.levels: every set judged at each concurrency level, Bonferroni over the levels,
the headline at probe.judge_concurrency's level, sets that flip with concurrency."""

from __future__ import annotations

import copy
import math

import pytest

from tests.helpers import trial_record
from tuner.judging import judge
from tuner.judging.levels import SINGLE_STREAM, judge_levels, level_records, measured_levels
from tuner.record import LevelResult, Metric, Verdict

P2P_OFF = {"NCCL_P2P_DISABLE": "1"}
LL = {"NCCL_PROTO": "LL"}
RING = {"NCCL_ALGO": "Ring"}


def night(*, ll_at_8: float = 400.0, confirm: dict[str, str] | None = None) -> list:
    """A PCIe night: the baseline twice, NCCL_P2P_DISABLE=1 +12 % at one stream and -15 % at
    C=8, LL in the noise at both (or ``ll_at_8`` at C=8), Ring +20 % at C=8 only; ``confirm``:
    that set relaunched to confirm, then the final baseline."""
    base = [70.1, 71.3, 69.8, 70.6]
    out = [trial_record(0, "baseline", base, concurrency={8: 400.0}),
           trial_record(1, "preset", [79.0, 79.6, 78.7, 79.3], env=P2P_OFF, concurrency={8: 340.0}),
           trial_record(2, "preset", [70.3, 70.9, 69.9, 70.5], env=LL, concurrency={8: ll_at_8}),
           trial_record(3, "preset", [70.0, 71.0, 70.2, 70.6], env=RING, concurrency={8: 480.0})]
    if confirm is not None:
        out.append(trial_record(4, "confirm", [70.2, 70.8, 70.1, 70.7], env=confirm, concurrency={8: 482.0}))
    out.append(trial_record(5, "baseline", [70.4, 71.0, 70.0, 70.9], recheck=True, concurrency={8: 401.0}))
    return out


def test_measured_levels_start_at_the_single_stream():
    assert measured_levels(night()) == (1, 8)
    assert measured_levels([trial_record(0, "baseline", [70.0, 71.0])]) == (SINGLE_STREAM,)
    both = trial_record(0, "baseline", [70.0, 71.0], concurrency={1: 70.0, 32: 900.0, 8: 400.0})
    assert measured_levels([both]) == (1, 8, 32)  # the bench's C=1 is the probe's level


def test_level_records_are_copies_whose_runs_are_the_level():
    records = night()
    before = copy.deepcopy(records)
    at8 = level_records(records, 8)
    assert records == before  # never mutated
    assert at8[1].output_tok_s_runs == [340.0, 340.0] and at8[1].output_tok_s == 340.0
    assert at8[1].env == P2P_OFF and at8[1].kind is records[1].kind and at8[1].started_at == records[1].started_at
    lost = trial_record(7, "preset", [70.0, 71.0], concurrency={8: 300.0})
    lost.concurrency = [LevelResult(concurrency=8, ok=31, total=32, wall_s=10.0, aggregate_tok_s=300.0)]
    assert level_records([lost], 8)[0].output_tok_s_runs == []  # a level that lost a request is not a speed
    assert level_records([trial_record(8, "preset", [70.0, 71.0])], 8)[0].output_tok_s_runs == []
    with pytest.raises(ValueError, match="C=1 is the probe's runs"):
        level_records(records, 1)


def test_a_set_faster_at_one_stream_and_slower_at_eight_is_a_flip():
    lj = judge_levels(night(), metric=Metric.OUTPUT)
    key = night()[1].set_key
    assert lj.levels == (1, 8) and lj.confidence == pytest.approx(0.975)
    one, eight = lj.verdicts[1][key], lj.verdicts[8][key]
    assert one.verdict is Verdict.FASTER and one.gain_pct == pytest.approx(12.2, abs=0.5)
    assert eight.verdict is Verdict.SLOWER and eight.gain_pct == pytest.approx(-15.1, abs=0.2)
    flips = lj.flips()
    assert [f.key for f in flips] == [key]
    assert flips[0].sentence() == ("NCCL_P2P_DISABLE=1: faster at C=1 (+12.3 %), slower at C=8 (-15.1 %): it flips "
                                   "with concurrency, so judge it at the workload's own level "
                                   "(probe.judge_concurrency).")
    assert lj.sentences() == [flips[0].sentence()]  # the headline rests on C=1: nothing more to say
    assert lj.headline is lj.judgements[1] and lj.winner == key


def test_c1_is_judge_itself_and_a_level_is_one_value_per_launch():
    records = night()
    lj = judge_levels(records, metric=Metric.OUTPUT)
    plain = judge(records, metric=Metric.OUTPUT)
    assert {k: s.comparison for k, s in lj.judgements[1].sets.items()} == {
        k: s.comparison for k, s in plain.sets.items()}
    at8 = lj.judgements[8]
    assert at8.baseline_launches == [[400.0, 400.0], [401.0, 401.0]]
    # the two baseline values carry the launch noise: their spread, pooled with the prior
    assert at8.noise is not None and at8.noise.data_sigma == pytest.approx(math.log(401 / 400) / math.sqrt(2), rel=1e-6)


def test_verdicts_are_corrected_over_the_levels_judged():
    # LL -5 % at C=8: slower at 95 % on its own, not once the two levels are accounted for
    records = night(ll_at_8=380.0)
    key = records[2].set_key
    lj = judge_levels(records, metric=Metric.OUTPUT)
    assert lj.judgements[8].sets[key].comparison.verdict is Verdict.SLOWER
    v = lj.verdicts[8][key]
    assert v.verdict is Verdict.NO_DIFFERENCE and v.low < 1 < v.high
    c95 = lj.judgements[8].sets[key].comparison
    assert v.low < c95.ci_low and v.high > c95.ci_high  # wider on both sides
    assert math.log(v.high) - math.log(v.low) > math.log(c95.ci_high) - math.log(c95.ci_low)
    # with one level only, the per-level verdict is judge's own
    alone = judge_levels(records, metric=Metric.OUTPUT, levels=())
    assert alone.levels == (1,) and alone.confidence == pytest.approx(0.95) and not alone.flips()
    assert alone.verdicts[1][key].verdict is lj.judgements[1].sets[key].comparison.verdict
    # three levels: 1 - 0.05 / 3
    assert judge_levels(records, metric=Metric.OUTPUT, levels=(8, 32)).confidence == pytest.approx(1 - 0.05 / 3)


def test_judge_concurrency_moves_the_headline_to_that_level():
    ring = night()[3].set_key
    lj = judge_levels(night(confirm=RING), metric=Metric.OUTPUT, judged_level=8)
    assert lj.headline is lj.judgements[8]
    assert lj.winner == ring and lj.headline.confirmed is True  # +20 % at C=8, held on the fresh pair
    assert lj.judgements[1].winner != ring  # at one stream Ring is in the noise
    assert lj.judgements[1].sets[ring].verdict is Verdict.FAILED_CONFIRMATION
    assert lj.verdicts[1][ring].verdict is Verdict.NO_DIFFERENCE  # a level shows the comparison, not the confirmation
    assert lj.sentences()[0].startswith('The headline and "Use it" rest on C=8 (probe.judge_concurrency)')


def test_bad_levels_are_refused():
    with pytest.raises(ValueError, match="judged_level 4 is not a level judged"):
        judge_levels(night(), metric=Metric.OUTPUT, judged_level=4)
    with pytest.raises(ValueError, match="alpha"):
        judge_levels(night(), metric=Metric.OUTPUT, alpha=0.0)
    with pytest.raises(ValueError, match=">= 1"):
        judge_levels(night(), metric=Metric.OUTPUT, levels=(0,))
