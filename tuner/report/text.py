"""The report in words: the verdict paragraph, export lines, the console and markdown tables.

Everything here reads a :func:`tuner.report.frame.trials_frame` and a
:class:`tuner.record.StudyInfo`; nothing is measured or judged again. The console table is a
``rich.table.Table``; when the output is not a terminal (piped, CI, a log file) its rows are
written whole, one line each, so ``grep`` sees every row.
"""

from __future__ import annotations

import io
import math
import shlex
from collections.abc import Sequence

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuner import stats
from tuner.record import Kind, Status, StudyInfo, Verdict
from tuner.report.frame import baseline_runs, best_row, env_text, ok_baselines, verdict_text

#: Columns of the console table, in order.
CONSOLE_COLUMNS: tuple[str, ...] = ("trial", "kind", "status", "tok/s", "vs base", "95% CI", "verdict", "env")
_RIGHT = frozenset({"trial", "tok/s", "vs base"})
_FOLDS = frozenset({"verdict", "env"})
_WIDE = 100_000  # characters: wider than any row, so a piped table never wraps
_CAUSE_CHARS = 40


def export_lines(env: dict[str, str], command: Sequence[str] | None = None) -> list[str]:
    """Ready-to-paste lines for the set ``env``: a shell ``export``, vLLM and SGLang launch
    snippets, and ``command`` (the study's server argv) under ``env`` when given."""
    if not env:
        return ["# the untuned baseline: unset every NCCL_* variable"]
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    lines = [f"export {assigns}",
             f"{assigns} vllm serve MODEL --tensor-parallel-size 8",
             f"{assigns} python -m sglang.launch_server --model-path MODEL --tp 8"
             + ("   # note: SGLang overrides CUDA_DEVICE_MAX_CONNECTIONS" if "CUDA_DEVICE_MAX_CONNECTIONS" in env else "")]
    if command:
        lines.append(f"env {assigns} {shlex.join(command)}")
    return lines


def _not_retried(df: pd.DataFrame) -> int:
    """Interrupted relaunches no later trial re-measured."""
    retried = set(df["retry_of_trial"].dropna().astype(int))
    lost = df[(df["status"] == Status.INTERRUPTED) & df["retried_by_trial"].isna() & ~df["trial"].isin(retried)]
    return len(lost)


def verdict_paragraph(df: pd.DataFrame, info: StudyInfo, *, min_effect: float | None = None) -> str:
    """One paragraph a person can act on: the baseline, the best set, its gain with the 95 % CI
    and what it means, the smallest detectable gain, failures, and the target when set.

    ``df``: a :func:`tuner.report.frame.trials_frame`. ``min_effect`` (fraction): the judging
    threshold, floor of the detectable-gain sentence (default ``info.min_effect``, else
    :data:`tuner.stats.DEFAULT_MIN_EFFECT`).
    """
    if min_effect is None:
        min_effect = info.min_effect if info.min_effect is not None else stats.DEFAULT_MIN_EFFECT
    target = info.target
    base_runs, drift = baseline_runs(df) if not df.empty else ([], 0.0)
    if not base_runs:
        return "The untuned baseline has no successful measurement yet, so no trial can be judged."
    base_med = float(np.median(base_runs))
    n_base = len(ok_baselines(df))
    parts = [f"Baseline: {base_med:.1f} tok/s single stream (median of {len(base_runs)} runs over {n_base} launch"
             f"{'es' if n_base > 1 else ''}{f', drift {drift * 100:.1f} %' if n_base > 1 else ''})."]
    if info.target_met_untuned and target is not None:
        parts.append(f"The target of {target:g} tok/s is already met by the untuned server (CI lower bound); "
                     "no tuned relaunch was spent. Keep the defaults.")
        return " ".join(parts)
    best = best_row(df)
    settled = df[~df["status"].isin([Status.INTERRUPTED, Status.RUNNING])]  # retried or in flight: not a result
    tuned = settled["kind"] != Kind.BASELINE
    tried = int(tuned.sum())
    failed = int((tuned & (settled["status"] != Status.OK)).sum())
    if best is None:
        parts.append("Only the baseline was measured: no tuned set to judge yet." if tried == 0 else
                     f"None of the {tried} tuned sets ran successfully ({failed} failed): keep the defaults.")
        return " ".join(parts)
    gain = (best["vs_baseline"] - 1) * 100
    lo, hi = (best["vs_baseline_ci_low"] - 1) * 100, (best["vs_baseline_ci_high"] - 1) * 100
    env_s = env_text(best["env"])
    ci = f"95 % CI {lo:+.1f}..{hi:+.1f} %"
    if best["verdict"] == Verdict.FASTER:
        parts.append(f"Best set: {env_s} (trial {int(best['trial'])}) at {best['output_tok_s']:.1f} tok/s, "
                     f"{gain:+.1f} % ({ci}): significantly faster than the baseline. Use it.")
    elif best["verdict"] == Verdict.INCONCLUSIVE:
        parts.append(f"Best set: {env_s} (trial {int(best['trial'])}), {gain:+.1f} % ({ci}), but the verdict is "
                     f"{verdict_text(best)}: the baseline moved as much as the gain; re-measure before adopting it.")
    elif best["verdict"] == Verdict.SLOWER:
        parts.append(f"Every tuned set was slower than the baseline (the best, {env_s}, {gain:+.1f} %, {ci}): "
                     "keep the defaults.")
    else:
        parts.append(f"No NCCL setting beat the baseline by more than the noise (best {gain:+.1f} %, {ci}, "
                     f"{env_s}): on this server NCCL configuration is not the bottleneck. Keep the defaults.")
    mde = stats.min_detectable_effect(base_runs, len(best["output_tok_s_runs"]))
    if math.isfinite(mde):
        parts.append(f"With these repeats the smallest gain that could be detected is about "
                     f"{max(mde, min_effect) * 100:.1f} %.")
    if failed:
        parts.append(f"{failed} of {tried} tuned sets failed (see status and cause).")
    lost = _not_retried(df)
    if lost > 0:
        parts.append(f"{lost} interrupted set{'s were' if lost > 1 else ' was'} not re-measured yet: "
                     "run the same command again to finish them.")
    if target is not None:
        reached = info.target_reached_by
        parts.append(f"Target {target:g} tok/s: " + (f"reached by trial {reached}." if reached is not None
                     else "not reached within the budget."))
    return " ".join(parts)


def _console_row(r: pd.Series) -> list[str]:
    ok = r["status"] == Status.OK
    has_ratio = ok and not math.isnan(r["vs_baseline"])
    return [str(int(r["trial"])), str(r["kind"]), str(r["status"]),
            f"{r['output_tok_s']:.1f}" if ok else "-",
            f"{r['vs_baseline']:.3f}" if has_ratio else "-",
            f"{r['vs_baseline_ci_low']:.3f}..{r['vs_baseline_ci_high']:.3f}" if has_ratio else "",
            verdict_text(r) if ok else r["cause"][:_CAUSE_CHARS],
            env_text(r["env"])]


def console_table(df: pd.DataFrame) -> Table:
    """The end-of-sweep table: one row per relaunch sorted by tok/s (failed last), columns
    :data:`CONSOLE_COLUMNS`: ratio to the baseline with its 95 % CI, the verdict (with its note)
    for measured rows and the cause for failed ones, the set."""
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for col in CONSOLE_COLUMNS:  # on a narrow terminal only the verdict and the set fold
        table.add_column(col, justify="right" if col in _RIGHT else "left", no_wrap=col not in _FOLDS,
                         overflow="fold")  # never an ellipsis: a cut value could be pasted
    for _, r in df.sort_values("output_tok_s", ascending=False, na_position="last").iterrows():
        table.add_row(*(Text(cell) for cell in _console_row(r)))  # Text: no markup in causes or values
    return table


def plain_table(table: Table) -> str:
    """``table`` as plain text, one line per row whatever the width (trailing blanks removed)."""
    console = Console(file=io.StringIO(), width=_WIDE, color_system=None, legacy_windows=False)
    with console.capture() as capture:
        console.print(table)
    return "\n".join(line.rstrip() for line in capture.get().splitlines())


def print_results(df: pd.DataFrame, verdict: str, info: StudyInfo, console: Console | None = None) -> None:
    """Print the console table, the verdict paragraph and, when the best set is significantly
    faster, the ready-to-paste "Use it:" lines (:func:`export_lines`).

    ``console``: where to print (default: stdout). On a terminal rich lays the table out to its
    width; elsewhere every row is written whole on one line.
    """
    console = console or Console()
    if not df.empty:
        table = console_table(df)
        if console.is_terminal:
            console.print(table)
        else:
            console.out(plain_table(table), highlight=False)
    console.out("")
    console.out(verdict, highlight=False)
    best = best_row(df)
    if best is not None and best["verdict"] == Verdict.FASTER:
        console.out("\nUse it:", highlight=False)
        for line in export_lines(best["env"], info.server_command):
            console.out(f"  {line}", highlight=False)


# -- markdown ------------------------------------------------------------------------------

def _fmt(v: object) -> str:
    if v is None or v is pd.NA:
        return ""
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    if isinstance(v, dict):
        return env_text(v)
    return str(v)


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-markdown table of ``df`` (no extra dependency): floats to 3 decimals below 10,
    1 above, NaN/None empty, sets as ``NAME=value`` words."""
    head = "| " + " | ".join(map(str, df.columns)) + " |\n|" + "---|" * len(df.columns) + "\n"
    body = "".join("| " + " | ".join(_fmt(v).replace("|", "\\|") for v in row) + " |\n"
                   for row in df.itertuples(index=False))
    return head + body


def summary_table(df: pd.DataFrame, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """The trials of ``df`` sorted by tok/s (failed last), for report.md: ``columns`` (default:
    trial, kind, status, output_tok_s, the ratio and its CI, verdict with its note, load_s, env
    as ``NAME=value`` words)."""
    cols = list(columns or ["trial", "kind", "status", "output_tok_s", "vs_baseline", "vs_baseline_ci_low",
                            "vs_baseline_ci_high", "verdict", "load_s", "env"])
    ordered = df.sort_values("output_tok_s", ascending=False, na_position="last")
    out = ordered[cols].copy()
    if "verdict" in cols:
        out["verdict"] = [verdict_text(r) for _, r in ordered.iterrows()]
    if "env" in cols:
        out["env"] = out["env"].map(env_text)
    return out


#: report.md sections of the figures: file stem -> (heading, alt text).
FIGURE_SECTIONS: dict[str, tuple[str, str]] = {
    "trials_vs_baseline": ("Trials vs baseline", "trials vs baseline"),
    "variable_effects": ("Effect of each variable", "variable effects"),
    "history": ("History", "history"),
    "baselines": ("Baseline drift", "baselines"),
    "concurrency": ("Concurrency", "concurrency"),
}


def report_markdown(df: pd.DataFrame, verdict: str, info: StudyInfo, study_name: str,
                    figures: Sequence[str] = ()) -> str:
    """The text of report.md: the verdict, the best set's export lines when it is significantly
    faster, a section per figure (``figures``: PNG file names written next to report.md, in
    :data:`FIGURE_SECTIONS` order, each linking to the SVG beside it) with the trials table under
    the first, failed relaunches,
    why the sweep stopped and how to open the study in optuna-dashboard."""
    lines = [f"# nccl-tune report: {study_name}", ""]
    if df.empty:
        return "\n".join([*lines, "No trial recorded yet.", ""])
    lines += ["## Verdict", "", verdict, ""]
    best = best_row(df)
    if best is not None and best["verdict"] == Verdict.FASTER:
        lines += ["## Use the best set", "", "```sh", *export_lines(best["env"], info.server_command), "```", ""]
    names = {name.rsplit(".", 1)[0]: name for name in figures}
    for stem, (heading, alt) in FIGURE_SECTIONS.items():
        if stem in names:
            svg = names[stem].rsplit(".", 1)[0] + ".svg"  # the image links to its SVG, for zooming
            lines += [f"## {heading}", "", f"[![{alt}]({names[stem]})]({svg})", ""]
        if stem == "trials_vs_baseline":
            if stem not in names:
                lines += [f"## {heading}", ""]
            lines += [markdown_table(summary_table(df)), ""]
    failed = df[df["status"].map(lambda s: Status(s).failed)]
    if not failed.empty:
        lines += ["## Failed trials", "", markdown_table(failed[["trial", "status", "cause", "env", "log"]]), ""]
    if info.stop_reason:
        lines += [f"Sweep stopped: {info.stop_reason}.", ""]
    lines += ["Open the study in optuna-dashboard: `optuna-dashboard "
              + (info.storage_hint or "sqlite:///results/<study>/study.db") + "`", ""]
    return "\n".join(lines)
