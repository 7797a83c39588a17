"""``nccl-tune compare STUDY_A STUDY_B``: two nights side by side (before and after a driver or
NCCL update, two hosts): what changed between them, the sets both measured with each night's
ratio, interval and verdict and whether they agree, and the sets only one measured.

Each night is judged as its report judges it (:func:`tuner.report.nights.judge_night`); a set
is the same set in both when its environment and flags are (:func:`tuner.record.set_key`).
Two nights' results for one set *agree* when their 95 % intervals of the ratio to each night's
own baseline overlap and their verdicts are the same (a failed confirmation, a finalist whose
gain did not hold on fresh launches, claims what "no significant difference" does); they *disagree* when the intervals do not
overlap: then the two ratios differ significantly, and conservatively so (two 95 % intervals
that do not overlap mean a difference significant at well below 5 %: Schenker and Gentleman,
"On judging the significance of differences by examining the overlap between confidence
intervals", The American Statistician 55(3), 2001); overlapping intervals with different
verdicts (one "faster", the other "no significant difference") are said as *verdicts differ*:
the data does not show the nights differ, only that one night's claim did not repeat. Ratios are
compared, never tok/s: each night is measured against its own baseline.

What changed is read from each study's record of itself (:class:`tuner.record.StudyInfo`: the
NCCL version and topology its first ok baseline's log showed, the allreduce backend, the metric
and threshold) and from its first ok baseline's host record (:class:`tuner.record.HostRecord`:
GPUs, driver, the server's version), with the host type.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuner.judging import gain_pct, stats
from tuner.plaintext import plain_table
from tuner.record import Kind, TrialRecord, Verdict
from tuner.report.frame import env_text, set_text
from tuner.report.nights import HostJudgement, Night, night_baselines
from tuner.report.story import SetFigures

__all__ = ["DISAGREE", "agreement", "compare_nights", "library_change", "print_comparison"]

AGREE, VERDICTS_DIFFER, DISAGREE = "agree", "verdicts differ", "disagree"
#: The rule, as the output says it.
AGREEMENT_RULE = ("agree: the two 95 % intervals of the ratio to each night's own baseline overlap and the verdicts "
                  "are the same (a failed confirmation counting as no significant difference: neither claims a "
                  "gain); verdicts differ: they overlap but the verdicts are not the same; disagree: they do not "
                  "overlap, a significant difference (conservative: Schenker and Gentleman, The American "
                  "Statistician 55(3), 2001)")


def _claim(verdict: Verdict) -> Verdict:
    """The verdict as a claim: a failed confirmation claims what no significant difference does."""
    return Verdict.NO_DIFFERENCE if verdict is Verdict.FAILED_CONFIRMATION else verdict


@dataclass(frozen=True)
class SetPair:
    """A set both nights measured: ``key`` (:func:`tuner.record.set_key`), ``text`` (its env and
    flags), its figures in night ``a`` and ``b``, and ``agreement`` (:data:`AGREE`,
    :data:`VERDICTS_DIFFER` or :data:`DISAGREE`; ``""`` when a night has no interval for it)."""

    key: str
    text: str
    a: SetFigures
    b: SetFigures
    agreement: str


@dataclass(frozen=True)
class Change:
    """One fact of the two nights: ``what``, its value in ``a`` and ``b`` (``""``: not recorded)."""

    what: str
    a: str
    b: str

    @property
    def changed(self) -> bool:
        """True when the values differ."""
        return self.a != self.b


@dataclass
class NightComparison:
    """Two nights compared (see the module docstring): ``a``/``b`` (study names), their storages,
    host types and baseline levels (tok/s), ``facts`` (every :class:`Change`, changed or not),
    ``both`` (sets both measured, in night a's order, best first), ``only_a``/``only_b``,
    ``notes`` (what the comparison leaves out: other host types, a metric that differs)."""

    a: str
    b: str
    storage_a: str
    storage_b: str
    host_type_a: str
    host_type_b: str
    baseline_a: float
    baseline_b: float
    facts: list[Change] = field(default_factory=list)
    both: list[SetPair] = field(default_factory=list)
    only_a: list[SetFigures] = field(default_factory=list)
    only_b: list[SetFigures] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    min_effect_a: float = stats.DEFAULT_MIN_EFFECT
    min_effect_b: float = stats.DEFAULT_MIN_EFFECT

    def changes(self) -> list[Change]:
        """The facts that differ."""
        return [c for c in self.facts if c.changed]

    def disagreeing(self) -> list[SetPair]:
        """The sets whose two nights do not agree (:data:`DISAGREE` or :data:`VERDICTS_DIFFER`)."""
        return [p for p in self.both if p.agreement in (DISAGREE, VERDICTS_DIFFER)]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (NaN as null; verdicts as their values)."""
        def num(v: float) -> float | None:
            return v if math.isfinite(v) else None

        def figures(s: SetFigures) -> dict[str, Any]:
            return {"trials": list(s.trials), "ratio": num(s.ratio), "low": num(s.low), "high": num(s.high),
                    "verdict": s.verdict.value}

        def one(s: SetFigures) -> dict[str, Any]:
            return {"set": _text(s), "env": dict(s.env), "flags": list(s.flags), **figures(s)}
        return {"a": {"study": self.a, "storage": self.storage_a, "host_type": self.host_type_a,
                      "baseline_tok_s": num(self.baseline_a)},
                "b": {"study": self.b, "storage": self.storage_b, "host_type": self.host_type_b,
                      "baseline_tok_s": num(self.baseline_b)},
                "changed": [{"what": c.what, "a": c.a, "b": c.b} for c in self.changes()],
                "unchanged": [{"what": c.what, "value": c.a} for c in self.facts if not c.changed],
                "rule": AGREEMENT_RULE,
                "both": [{"set": p.text, "env": dict(p.a.env), "flags": list(p.a.flags), "a": figures(p.a),
                          "b": figures(p.b), "agreement": p.agreement} for p in self.both],
                "only_a": [one(s) for s in self.only_a], "only_b": [one(s) for s in self.only_b],
                "notes": self.notes}


def _text(s: SetFigures) -> str:
    return set_text(dict(s.env), s.flags)


def agreement(a: SetFigures, b: SetFigures) -> str:
    """Whether one set's figures in two nights agree, by :data:`AGREEMENT_RULE`; ``""`` when
    either has no interval (too few runs, not judged)."""
    if not all(math.isfinite(v) for v in (a.low, a.high, b.low, b.high)):
        return ""
    if a.high < b.low or b.high < a.low:
        return DISAGREE
    return AGREE if _claim(a.verdict) is _claim(b.verdict) else VERDICTS_DIFFER


def night_facts(night: Night, judged: HostJudgement) -> dict[str, str]:
    """What :func:`compare_nights` holds side by side for one night, as text (``""``: not
    recorded): from its :class:`tuner.record.StudyInfo` and its host type's first ok baseline."""
    info = night.info
    bases = [r for r in night_baselines(night) if r.host_type in ("", judged.host_type)]
    host = bases[0].host if bases and bases[0].host is not None else None
    topo = info.topology
    facts = {
        "NCCL version": info.nccl_version or (host.nccl if host else ""),
        "NCCL library": bases[0].nccl_library if bases else "",
        "NCCL build ID": bases[0].nccl_build_id if bases else "",
        "server version": host.server if host else "",
        "GPUs": (f"{host.gpu_count} x {host.gpu}" if host.gpu_count else host.gpu) if host else "",
        "driver": host.driver if host else "",
        "host type": judged.host_type,
        "allreduce backend": info.allreduce_backend + (f" ({info.allreduce_backend_reason})"
                                                        if info.allreduce_backend_reason else ""),
        "ranks, nodes": f"{topo.nranks}, {topo.nnodes}" if topo else "",
        "link": (topo.link or "") if topo else "",
        "NVLS": ("yes" if topo.has_nvls else "no") if topo else "",
        "GPU arch (sm)": str(topo.gpu_arch) if topo and topo.gpu_arch is not None else "",
        "CollNet": ("yes" if topo.collnet else "no") if topo else "",
        "CPU vendor": (topo.cpu_vendor or "") if topo else "",
        "fixed tuning env": env_text(info.fixed_tuning_env) if info.fixed_tuning_env else "",
        "metric": info.metric.words,
        "judged at concurrency": str(info.judge_concurrency),
        "minimum effect": f"{night.min_effect * 100:g} %",
    }
    return facts


def _library(records: Sequence[TrialRecord]) -> TrialRecord | None:
    """The first relaunch of ``records`` that names the NCCL library it mapped (baselines first)."""
    named = [r for r in records if r.kind.relaunched and (r.nccl_library or r.nccl_build_id)]
    return next((r for r in named if r.kind is Kind.BASELINE), named[0] if named else None)


def library_change(a: Sequence[TrialRecord], b: Sequence[TrialRecord], names: tuple[str, str] = ("A", "B")) -> str | None:
    """A sentence when the NCCL library the nights ``a`` and ``b`` mapped differs (its path or GNU
    build ID; :attr:`TrialRecord.nccl_library`), said even where the version is the same (two
    builds of 2.28.9 behaved differently: vllm #42354); None when both name the same library or
    either names none (recorded before libraries were, or not readable)."""
    ra, rb = _library(a), _library(b)
    if ra is None or rb is None:
        return None
    diffs = [f"{what} {x or '?'} ({names[0]}) -> {y or '?'} ({names[1]})"
             for what, x, y in (("file", ra.nccl_library, rb.nccl_library), ("build ID", ra.nccl_build_id, rb.nccl_build_id))
             if x != y and (x or y)]
    if not diffs:
        return None
    va, vb = ra.nccl_library_version or ra.nccl_version, rb.nccl_library_version or rb.nccl_version
    same = (f"the version ({va}) did not: same version, another build, which can behave differently"
            if va and va == vb else f"version {va or '?'} -> {vb or '?'}")
    return f"the NCCL library changed: {'; '.join(diffs)}; {same}"


def _pick(night: Night) -> tuple[HostJudgement, list[str]]:
    """The host type compared (the night's first) and a note when it has others."""
    first = night.judged[0]
    others = [h.host_type for h in night.judged[1:]]
    note = ([f"{night.name} was measured on {len(night.judged)} host types; only the first, {first.host_type!r}, "
             f"is compared (compare the others as their own studies)"] if others else [])
    return first, note


def compare_nights(a: Night, b: Night) -> NightComparison:
    """Night ``a`` against night ``b`` (see the module docstring). With several host types in a
    night, its first is compared and a note says so."""
    ja, notes_a = _pick(a)
    jb, notes_b = _pick(b)
    fa, fb = night_facts(a, ja), night_facts(b, jb)
    out = NightComparison(a.name, b.name, a.storage, b.storage, ja.host_type, jb.host_type, ja.story.baseline_level,
                          jb.story.baseline_level, [Change(k, fa[k], fb[k]) for k in fa], notes=notes_a + notes_b,
                          min_effect_a=a.min_effect, min_effect_b=b.min_effect)
    lib_a, lib_b = night_baselines(a), night_baselines(b)
    changed = library_change(lib_a or a.records, lib_b or b.records, (a.name, b.name))
    if changed:
        out.notes.append(changed)
    if a.info.metric is not b.info.metric:
        out.notes.append(f"the nights are judged on different metrics ({a.info.metric.words}, {b.info.metric.words}): "
                         "their ratios measure different things")
    in_b = {s.key: s for s in jb.story.sets}
    in_a = {s.key for s in ja.story.sets}
    for s in ja.story.sets:
        if s.key in in_b:
            out.both.append(SetPair(s.key, _text(s), s, in_b[s.key], agreement(s, in_b[s.key])))
        else:
            out.only_a.append(s)
    out.only_b = [s for s in jb.story.sets if s.key not in in_a]
    return out


def _cell(s: SetFigures, min_effect: float) -> tuple[str, str]:
    """``+1.2 % (-0.3..+2.8)`` and the verdict words of one night's figures."""
    def pct(v: float) -> str:
        return f"{gain_pct(v):+.1f}" if math.isfinite(v) else "?"
    ci = f" ({pct(s.low)}..{pct(s.high)})" if math.isfinite(s.low) else ""
    verdict = stats.verdict_words(s.verdict, min_effect) if isinstance(s.verdict, Verdict) else str(s.verdict)
    return f"{pct(s.ratio)} %{ci}", verdict


def _show(console: Console, table: Table) -> None:
    if console.is_terminal:
        console.print(table)
    else:
        console.out(plain_table(table), highlight=False)


def print_comparison(c: NightComparison, *, as_json: bool = False, console: Console | None = None) -> None:
    """Print ``c``: what changed, the sets both measured with their agreement, the sets measured
    in one night only, the rule (or JSON with ``as_json``); ``console``: where (default stdout)."""
    console = console or Console()
    if as_json:
        console.out(json.dumps(c.to_json(), indent=1), highlight=False)
        return

    def say(text: str = "") -> None:
        console.out(text, highlight=False)

    def level(v: float) -> str:
        return f"{v:.1f} tok/s" if math.isfinite(v) else "no ok baseline"
    say(f"A: {c.a} ({c.storage_a}), baseline {level(c.baseline_a)}")
    say(f"B: {c.b} ({c.storage_b}), baseline {level(c.baseline_b)}")
    say()
    changed = c.changes()
    if changed:
        say("What changed:")
        t = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
        for col in ("", "A", "B"):
            t.add_column(col, overflow="fold")
        for ch in changed:
            t.add_row(Text(ch.what), Text(ch.a or "-"), Text(ch.b or "-"))
        _show(console, t)
    else:
        say("What changed: nothing the studies record")
    same = [f"{ch.what} {ch.a}" for ch in c.facts if not ch.changed and ch.a]
    if same:
        say(f"Unchanged: {'; '.join(same)}")
    say()
    if c.both:
        say(f"Sets both nights measured ({len(c.both)}; ratio to each night's own baseline, 95 % CI):")
        t = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
        for col in ("set", "A", "A verdict", "B", "B verdict", "agreement"):
            t.add_column(col, justify="right" if col in ("A", "B") else "left", overflow="fold")
        for p in c.both:
            ga, va = _cell(p.a, c.min_effect_a)
            gb, vb = _cell(p.b, c.min_effect_b)
            t.add_row(*(Text(x) for x in (p.text, ga, va, gb, vb, p.agreement or "no interval")))
        _show(console, t)
    else:
        say("Sets both nights measured: none")
    for name, sets, me in ((c.a, c.only_a, c.min_effect_a), (c.b, c.only_b, c.min_effect_b)):
        if sets:
            say()
            say(f"Only in {name}:")
            for s in sets:
                gain, verdict = _cell(s, me)
                say(f"  {_text(s)}: {gain}, {verdict}")
    say()
    off = c.disagreeing()
    say(f"{len(off)} of {len(c.both)} sets do not agree" + (f": {', '.join(p.text for p in off)}" if off else "") + ".")
    say(f"Rule: {AGREEMENT_RULE}.")
    for note in c.notes:
        say(f"Note: {note}.")
