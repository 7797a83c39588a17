"""Results of a study: trials.csv, plots against the baseline, a verdict, report.md.

Everything is rebuilt from the Optuna storage (trial user attributes), so
``nccl-tune report --study NAME`` works after the sweep, on another machine, or mid-sweep.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import optuna  # noqa: E402
import pandas as pd  # noqa: E402
from optuna.trial import TrialState  # noqa: E402

from tuner import stats  # noqa: E402

COLUMNS = ["trial", "kind", "preset", "status", "cause", "env", "output_tok_s", "output_tok_s_runs",
           "vs_baseline", "vs_baseline_ci_low", "vs_baseline_ci_high", "verdict", "ttft_s", "tpot_s",
           "completion_tokens", "tokens_counted", "load_s", "probe_s", "teardown_s", "wall_s",
           "started_at", "retry_of_trial", "removed_inherited", "log"]


def trials_frame(study: optuna.Study, *, min_effect: float = stats.DEFAULT_MIN_EFFECT) -> pd.DataFrame:
    """One row per relaunch (duplicates proposed by the sampler are not relaunches).

    Columns: :data:`COLUMNS` plus ``tok_s_c<C>`` per measured concurrency level. ``env`` and
    ``output_tok_s_runs`` are JSON text; tok/s is NaN for failed trials (never 0).
    ``vs_baseline`` is the ratio of medians against the baseline
    measurement before the trial (the first one for trials before any), with its 95 % bootstrap
    CI and verdict (:func:`tuner.stats.compare`); a verdict becomes ``inconclusive`` when the
    baseline drifted across its measurements at least as much as the gain.
    """
    rows = []
    for t in study.get_trials(deepcopy=False):
        ua = t.user_attrs
        if ua.get("kind") in (None, "duplicate", "invalid") or t.state in (TrialState.WAITING,):
            continue
        if t.state == TrialState.RUNNING:
            status = "running"
        else:
            status = ua.get("status", "interrupted" if t.state == TrialState.FAIL else "failed")
        row = {
            "trial": t.number, "kind": ua.get("kind"), "preset": ua.get("preset", ""), "status": status,
            "cause": ua.get("cause", ""), "env": json.dumps(ua.get("env", {}), sort_keys=True),
            "output_tok_s": ua.get("output_tok_s", math.nan) if status == "ok" else math.nan,
            "output_tok_s_runs": json.dumps([round(r, 3) for r in ua.get("runs", [])]) if status == "ok" else "[]",
            "ttft_s": ua.get("ttft_s", math.nan), "tpot_s": ua.get("tpot_s", math.nan),
            "completion_tokens": ua.get("completion_tokens", math.nan),
            "tokens_counted": ua.get("tokens_counted", False),
            "load_s": ua.get("load_s", math.nan), "probe_s": ua.get("probe_s", math.nan),
            "teardown_s": ua.get("teardown_s", math.nan), "wall_s": ua.get("wall_s", math.nan),
            "started_at": ua.get("started_at", math.nan), "retry_of_trial": ua.get("retry_of_trial"),
            "removed_inherited": json.dumps(ua.get("removed_inherited", [])), "log": ua.get("log", ""),
        }
        for level in ua.get("concurrency", []) or []:
            row[f"tok_s_c{level['concurrency']}"] = level.get("aggregate_tok_s", math.nan)
        rows.append(row)
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    _, drift = baseline_runs(df)
    bases = df[(df["kind"] == "baseline") & (df["status"] == "ok")].sort_values(["started_at", "trial"])
    ratios, lows, highs, verdicts = [], [], [], []
    for _, row in df.iterrows():
        runs = json.loads(row["output_tok_s_runs"])
        ref = _reference_baseline(bases, row)
        if row["status"] != "ok" or not runs or ref is None:
            ratios.append(math.nan), lows.append(math.nan), highs.append(math.nan)
            verdicts.append("" if row["status"] == "ok" else "failed")
            continue
        c = stats.compare(runs, ref, min_effect=min_effect, drift=drift)
        ratios.append(c.ratio), lows.append(c.ci_low), highs.append(c.ci_high)
        verdicts.append("baseline" if row["kind"] == "baseline" else c.verdict)
    df["vs_baseline"], df["vs_baseline_ci_low"], df["vs_baseline_ci_high"], df["verdict"] = ratios, lows, highs, verdicts
    extra = [c for c in df.columns if c not in COLUMNS]
    return df[[c for c in COLUMNS if c in df.columns] + sorted(extra)].sort_values("trial").reset_index(drop=True)


def _reference_baseline(bases: pd.DataFrame, row: pd.Series) -> list[float] | None:
    """Runs of the baseline a trial is compared with: the last one measured before it started
    (the machine as it was then), else the first one. Baseline rows compare with the first."""
    if bases.empty:
        return None
    if row["kind"] == "baseline":
        ref = bases.iloc[0]
    else:
        key = "started_at" if bases["started_at"].notna().all() and not pd.isna(row["started_at"]) else "trial"
        before = bases[bases[key] < row[key]]
        ref = before.iloc[-1] if not before.empty else bases.iloc[0]
    return json.loads(ref["output_tok_s_runs"])


def baseline_runs(df: pd.DataFrame) -> tuple[list[float], float]:
    """Pooled runs (tok/s) of every ok baseline measurement, and the baseline's drift (fraction)."""
    base = df[(df["kind"] == "baseline") & (df["status"] == "ok")]
    runs = [r for text in base["output_tok_s_runs"] for r in json.loads(text)]
    return runs, stats.drift(list(base["output_tok_s"]))


def _env_text(env_json: str) -> str:
    env = json.loads(env_json)
    return " ".join(f"{k}={v}" for k, v in env.items()) or "(untuned)"


def best_row(df: pd.DataFrame) -> pd.Series | None:
    """The non-baseline ok trial with the highest median tok/s, or None."""
    ok = df[(df["status"] == "ok") & (df["kind"] != "baseline")]
    if ok.empty:
        return None
    return ok.loc[ok["output_tok_s"].idxmax()]


def export_lines(env: dict[str, str], command: list[str] | None = None) -> list[str]:
    """Ready-to-paste lines for a set: a shell ``export``, and vLLM / SGLang launch snippets."""
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


def verdict_paragraph(df: pd.DataFrame, study_attrs: dict | None = None) -> str:
    """One paragraph a person can act on: best set, gain with CI, significance, meaning."""
    attrs = study_attrs or {}
    target = attrs.get("target")
    base_runs, drift = baseline_runs(df) if not df.empty else ([], 0.0)
    if not base_runs:
        return "The untuned baseline has no successful measurement yet, so no trial can be judged."
    base_med = float(np.median(base_runs))
    n_base = int(((df["kind"] == "baseline") & (df["status"] == "ok")).sum())
    parts = [f"Baseline: {base_med:.1f} tok/s single stream (median of {len(base_runs)} runs over {n_base} launch"
             f"{'es' if n_base > 1 else ''}{f', drift {drift * 100:.1f} %' if n_base > 1 else ''})."]
    if attrs.get("target_met_untuned"):
        parts.append(f"The target of {target:g} tok/s is already met by the untuned server (CI lower bound); "
                     "no tuned relaunch was spent. Keep the defaults.")
        return " ".join(parts)
    best = best_row(df)
    settled = df[~df["status"].isin(["interrupted", "running"])]  # retried or in flight: not a result
    tried = int((settled["kind"] != "baseline").sum())
    failed = int(((settled["kind"] != "baseline") & (settled["status"] != "ok")).sum())
    if best is None:
        parts.append("Only the baseline was measured: no tuned set to judge yet." if tried == 0 else
                     f"None of the {tried} tuned sets ran successfully ({failed} failed): keep the defaults.")
        return " ".join(parts)
    gain, lo, hi = (best["vs_baseline"] - 1) * 100, (best["vs_baseline_ci_low"] - 1) * 100, (best["vs_baseline_ci_high"] - 1) * 100
    env_s = _env_text(best["env"])
    ci = f"95 % CI {lo:+.1f}..{hi:+.1f} %"
    if best["verdict"] == stats.FASTER:
        parts.append(f"Best set: {env_s} (trial {int(best['trial'])}) at {best['output_tok_s']:.1f} tok/s, "
                     f"{gain:+.1f} % ({ci}): significantly faster than the baseline. Use it.")
    elif str(best["verdict"]).startswith("inconclusive"):
        parts.append(f"Best set: {env_s} (trial {int(best['trial'])}), {gain:+.1f} % ({ci}), but the verdict is "
                     f"{best['verdict']}: the baseline moved as much as the gain; re-measure before adopting it.")
    elif best["verdict"] == stats.SLOWER:
        parts.append(f"Every tuned set was slower than the baseline (the best, {env_s}, {gain:+.1f} %, {ci}): "
                     "keep the defaults.")
    else:
        parts.append(f"No NCCL setting beat the baseline by more than the noise (best {gain:+.1f} %, {ci}, "
                     f"{env_s}): on this server NCCL configuration is not the bottleneck. Keep the defaults.")
    runs_per = json.loads(best["output_tok_s_runs"])
    mde = stats.min_detectable_effect(base_runs, len(runs_per))
    if math.isfinite(mde):
        parts.append(f"With these repeats the smallest gain that could be detected is about "
                     f"{max(mde, stats.DEFAULT_MIN_EFFECT) * 100:.1f} %.")
    if failed:
        parts.append(f"{failed} of {tried} tuned sets failed (see status and cause).")
    lost = int((df["status"] == "interrupted").sum()) - int(df["retry_of_trial"].notna().sum())
    if lost > 0:
        parts.append(f"{lost} interrupted set{'s were' if lost > 1 else ' was'} not re-measured yet: "
                     "run the same command again to finish them.")
    if target is not None:
        reached = attrs.get("target_reached_by")
        parts.append(f"Target {target:g} tok/s: " + (f"reached by trial {reached}." if reached is not None
                     else "not reached within the budget."))
    return " ".join(parts)


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def summary_table(df: pd.DataFrame, columns: list[str] | None = None) -> pd.DataFrame:
    """The table printed at the end of a sweep: sorted by tok/s, with the ratio to baseline."""
    cols = columns or ["trial", "kind", "status", "output_tok_s", "vs_baseline", "vs_baseline_ci_low",
                       "vs_baseline_ci_high", "verdict", "load_s", "env"]
    out = df.sort_values("output_tok_s", ascending=False, na_position="last")[cols].copy()
    out["env"] = out["env"].map(_env_text)
    return out


def console_table(df: pd.DataFrame) -> str:
    """The end-of-sweep table for a terminal: sorted by tok/s, ratio to baseline with its CI."""
    rows = []
    for _, r in df.sort_values("output_tok_s", ascending=False, na_position="last").iterrows():
        ok = r["status"] == "ok"
        ci = (f"{r['vs_baseline_ci_low']:.3f}..{r['vs_baseline_ci_high']:.3f}"
              if ok and not math.isnan(r["vs_baseline_ci_low"]) else "")
        rows.append({"trial": int(r["trial"]), "kind": r["kind"], "status": r["status"],
                     "tok/s": f"{r['output_tok_s']:.1f}" if ok else "-",
                     "vs base": f"{r['vs_baseline']:.3f}" if ok and not math.isnan(r["vs_baseline"]) else "-",
                     "95% CI": ci, "verdict": r["verdict"] if ok else (r["cause"] or "")[:40],
                     "env": _env_text(r["env"])})
    if not rows:
        return ""
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    right = {"trial", "tok/s", "vs base"}
    fmt = lambda c, v: str(v).rjust(width[c]) if c in right else str(v).ljust(width[c])  # noqa: E731
    lines = ["  ".join(fmt(c, c) for c in cols).rstrip()]
    lines += ["  ".join(fmt(c, r[c]) for c in cols).rstrip() for r in rows]
    return "\n".join(lines)


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-markdown table of ``df`` (no extra dependency)."""
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    body = "".join("| " + " | ".join(_fmt(v).replace("|", "\\|") for v in row) + " |\n" for row in df.itertuples(index=False))
    return head + body


# -- plots --------------------------------------------------------------------------------

def plot_trials_vs_baseline(df: pd.DataFrame, path: Path) -> None:
    """Every trial's median tok/s with 95 % CI whiskers and its runs, the baseline as a line
    with its runs' spread as a band, failed trials marked, the best annotated."""
    fig, ax = plt.subplots(figsize=(11, 5.5))
    base_runs, _ = baseline_runs(df)
    if base_runs:
        med = float(np.median(base_runs))
        ax.axhspan(min(base_runs), max(base_runs), color="tab:gray", alpha=0.25, label="baseline spread (all runs)")
        ax.axhline(med, color="black", lw=1.2, label=f"baseline median {med:.1f} tok/s")
    ok = df[df["status"] == "ok"]
    for kind, color in (("baseline", "black"), ("preset", "tab:blue"), ("search", "tab:green")):
        sub = ok[ok["kind"] == kind]
        if sub.empty:
            continue
        y = sub["output_tok_s"].to_numpy(float)
        if kind != "baseline" and sub["vs_baseline"].notna().all():
            ref = y / sub["vs_baseline"].to_numpy(float)  # the baseline each trial was compared with
            yerr = np.vstack([y - sub["vs_baseline_ci_low"].to_numpy(float) * ref,
                              sub["vs_baseline_ci_high"].to_numpy(float) * ref - y]).clip(min=0)
        else:
            yerr = None
        ax.errorbar(sub["trial"], y, yerr=yerr, fmt="o", color=color, capsize=4, label=f"{kind} (median, 95 % CI)")
        for trial, runs in zip(sub["trial"], sub["output_tok_s_runs"]):
            r = json.loads(runs)
            ax.scatter([trial] * len(r), r, s=8, color=color, alpha=0.35)
    bad = df[~df["status"].isin(["ok", "running"])]
    if not bad.empty:
        y0 = ax.get_ylim()[0] if not ok.empty else 0
        ax.scatter(bad["trial"], [y0] * len(bad), marker="x", color="tab:red", s=70, zorder=5, label="failed trial")
        for _, row in bad.iterrows():
            ax.annotate(row["status"], (row["trial"], y0), textcoords="offset points", xytext=(0, 8),
                        ha="center", fontsize=7, color="tab:red", rotation=90)
    best = best_row(df)
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi + 0.22 * (hi - lo))  # headroom for the best-trial note
    if best is not None:
        ax.annotate(f"best: trial {int(best['trial'])}, {best['output_tok_s']:.1f} tok/s "
                    f"({(best['vs_baseline'] - 1) * 100:+.1f} %, {best['verdict']})\n{_env_text(best['env'])}",
                    (best["trial"], best["output_tok_s"]), textcoords="offset points", xytext=(12, 22),
                    fontsize=8, arrowprops={"arrowstyle": "->", "color": "tab:orange"},
                    bbox={"boxstyle": "round", "fc": "lightyellow", "alpha": 0.9})
    ax.set_xlabel("trial (relaunch order; 0 = untuned baseline)")
    ax.set_ylabel("single-stream output tok/s (median of repeats)")
    ax.set_title("Trials vs the untuned baseline")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_variable_effects(df: pd.DataFrame, path: Path) -> None:
    """tok/s by value of each variable over all ok trials (unset = NCCL default)."""
    ok = df[df["status"] == "ok"]
    envs = [json.loads(e) for e in ok["env"]]
    names = sorted({k for e in envs for k in e})
    if not names:
        names = ["(no tuned variable measured)"]
    cols = min(3, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.4 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        values = [e.get(name, "unset") for e in envs]
        cats = sorted(set(values), key=lambda v: (v != "unset", len(v), v))
        for i, cat in enumerate(cats):
            ys = [y for y, v in zip(ok["output_tok_s"], values) if v == cat]
            ax.scatter(np.full(len(ys), i) + np.linspace(-0.12, 0.12, len(ys)), ys, s=18)
            ax.hlines(np.median(ys), i - 0.25, i + 0.25, color="black")
        ax.set_xticks(range(len(cats)), cats, rotation=30, fontsize=7)
        ax.set_title(name, fontsize=9)
        ax.set_ylabel("tok/s")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle("Effect of each variable (all ok trials; bar = median)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_history(df: pd.DataFrame, path: Path) -> None:
    """Best tok/s so far vs relaunch number, with the cumulative wall clock (min or h) on a second axis."""
    d = df.sort_values("trial").reset_index(drop=True)
    best = d["output_tok_s"].where((d["status"] == "ok") & (d["kind"] != "baseline")).cummax()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    x = np.arange(1, len(d) + 1)
    ax.step(x, best, where="post", color="tab:blue", label="best tuned set so far (tok/s)")
    base = d["output_tok_s"].where((d["status"] == "ok") & (d["kind"] == "baseline"))
    ax.scatter(x, base, s=24, color="black", marker="s", label="baseline (tok/s)")
    ax.scatter(x, d["output_tok_s"], s=14, color="tab:blue", alpha=0.5, label="trial (tok/s)")
    ax.set_xlabel("relaunch number")
    ax.set_ylabel("single-stream output tok/s")
    ax2 = ax.twinx()
    wall = d["wall_s"].fillna(0).cumsum()
    unit, scale = ("h", 3600) if wall.iloc[-1] >= 7200 else ("min", 60)
    ax2.plot(x, wall / scale, color="tab:gray", ls="--", label=f"wall clock ({unit})")
    ax2.set_ylabel(f"cumulative wall clock ({unit})")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=8, loc="lower right")
    ax.set_title("Sweep history")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_baselines(df: pd.DataFrame, path: Path) -> None:
    """Each baseline measurement's median and runs over the sweep (drift check)."""
    base = df[(df["kind"] == "baseline") & (df["status"] == "ok")]
    fig, ax = plt.subplots(figsize=(8, 4))
    for _, row in base.iterrows():
        runs = json.loads(row["output_tok_s_runs"])
        ax.scatter([row["trial"]] * len(runs), runs, s=10, color="gray", alpha=0.5)
    ax.plot(base["trial"], base["output_tok_s"], "o-", color="black", label="baseline median")
    _, drift = baseline_runs(df)
    ax.set_title(f"Baseline over the sweep (drift {drift * 100:.1f} %)")
    ax.set_xlabel("trial number at which the baseline was measured")
    ax.set_ylabel("single-stream output tok/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_concurrency(df: pd.DataFrame, path: Path) -> bool:
    """Aggregate tok/s vs concurrency per set (when measured). Returns False if no data."""
    cols = sorted((c for c in df.columns if c.startswith("tok_s_c")), key=lambda c: int(c[7:]))
    ok = df[df["status"] == "ok"]
    if not cols or ok[cols].isna().all().all():
        return False
    levels = [int(c[7:]) for c in cols]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for _, row in ok.iterrows():
        label = f"trial {int(row['trial'])}: {_env_text(row['env'])}"[:60]
        ax.plot(levels, [row[c] for c in cols], "o-", lw=2 if row["kind"] == "baseline" else 1,
                color="black" if row["kind"] == "baseline" else None, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [str(v) for v in levels])
    ax.set_xlabel("concurrent streams C")
    ax.set_ylabel("aggregate output tok/s")
    ax.set_title("Throughput vs concurrency per set")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_outputs(study: optuna.Study, out_dir: Path, *, min_effect: float = stats.DEFAULT_MIN_EFFECT) -> tuple[pd.DataFrame, str]:
    """Write trials.csv, the PNGs and report.md into ``out_dir``; return (frame, verdict)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    df = trials_frame(study, min_effect=min_effect)
    df.to_csv(out_dir / "trials.csv", index=False)
    attrs = dict(study.user_attrs)
    verdict = verdict_paragraph(df, attrs)
    if df.empty:
        (out_dir / "report.md").write_text(f"# nccl-tune report: {study.study_name}\n\nNo trial recorded yet.\n")
        return df, verdict
    plot_trials_vs_baseline(df, out_dir / "trials_vs_baseline.png")
    plot_variable_effects(df, out_dir / "variable_effects.png")
    plot_history(df, out_dir / "history.png")
    plot_baselines(df, out_dir / "baselines.png")
    has_conc = plot_concurrency(df, out_dir / "concurrency.png")
    best = best_row(df)
    lines = [f"# nccl-tune report: {study.study_name}", "", "## Verdict", "", verdict, ""]
    if best is not None and best["verdict"] == stats.FASTER:
        lines += ["## Use the best set", "", "```sh", *export_lines(json.loads(best["env"]), attrs.get("server_command")), "```", ""]
    lines += ["## Trials vs baseline", "", "![trials vs baseline](trials_vs_baseline.png)", "",
              markdown_table(summary_table(df)), "",
              "## Effect of each variable", "", "![variable effects](variable_effects.png)", "",
              "## History", "", "![history](history.png)", "", "## Baseline drift", "", "![baselines](baselines.png)", ""]
    if has_conc:
        lines += ["## Concurrency", "", "![concurrency](concurrency.png)", ""]
    failed = df[~df["status"].isin(["ok", "running"])]
    if not failed.empty:
        lines += ["## Failed trials", "", markdown_table(failed[["trial", "status", "cause", "env", "log"]]), ""]
    if attrs.get("stop_reason"):
        lines += [f"Sweep stopped: {attrs['stop_reason']}.", ""]
    lines += ["Open the study in optuna-dashboard: `optuna-dashboard " + attrs.get("storage_hint", "sqlite:///results/<study>/study.db") + "`", ""]
    (out_dir / "report.md").write_text("\n".join(lines))
    return df, verdict
