"""Does `make demo` say the same thing every time? N whole nights of examples/sim.toml (the
simulated 8-GPU PCIe box), each a real ``nccl-tune sweep`` through the CLI as `make demo` runs it
(its own results folder, port and worker registry; the sampler seeded with the night's number),
and how many of them reached the same decision.

The decision is read from each night's judgement.json (tuner/report: ``best``, the set the
judgement names, and ``confirmed``): "Use <set>" when the confirmation held, else "no
recommendation". The simulator's noise is not seeded: SIM_SEED would give every launch of a night
the same draws (the same launch factor, the same run factors), which removes the launch-to-launch
noise the verdict must survive; each launch draws its own, as a real box does, and the machine's
own timing adds to it (run it on a quiet machine: a busy one only makes the nights noisier).

Prints one line per night and the tally; writes them to benchmarks/results/demo_stability.txt.
Exit status 0 when every night reached the most common decision and it is a "Use ...", else 1.
Usage: ``.venv/bin/python benchmarks/demo_stability.py [--nights 30] [--jobs 2] [--config PATH]``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers import free_port, run_cli  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "demo_stability.txt"
KEEP: Path | None = None  # --keep


@dataclass
class Night:
    """One night: its seed, exit status, the decision, the best set's gain (%) and wall time (s)."""

    seed: int
    rc: int
    decision: str
    gain_pct: float | None
    wall_s: float
    noise_pct: float | None = None
    confirmation: str = ""


def _decision(study_dir: Path) -> tuple[str, float | None]:
    """``("Use NCCL_P2P_LEVEL=SYS", 7.1)`` or ``("no recommendation (best ... not confirmed)", gain)``
    from the night's judgement.json; ``("no report", None)`` when it wrote none."""
    path = study_dir / "judgement.json"
    if not path.exists():
        return "no report", None
    data = json.loads(path.read_text())
    best = json.loads(data["best"]) if data.get("best") else None
    words = " ".join(f"{k}={v}" for k, v in sorted(best.items())) if best else None
    ratio = next((s["ratio"] for s in data.get("sets", []) if s.get("key") == data.get("best")), None)
    gain = (ratio - 1) * 100 if ratio is not None else None
    if best and data.get("confirmed"):
        return f"Use {words}", gain
    return (f"no recommendation (best {words}, not confirmed)" if words else "no recommendation"), gain


def _night(config: Path, seed: int, work: Path) -> Night:
    text = re.sub(r"^port = \d+", f"port = {free_port()}", config.read_text(), flags=re.M)
    folder = work / f"night-{seed}"
    folder.mkdir()
    night = folder / config.name
    night.write_text(text)
    env = {**os.environ, "NCCL_TUNE_WORKERS_DIR": str(folder / "workers"), "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    res = run_cli("sweep", str(night), "--study", "demo", "--results", str(folder / "results"), "--seed", str(seed),
                  env=env, timeout=1800, cwd=ROOT)
    study = folder / "results" / "demo"
    decision, gain = _decision(study)
    noise, confirmation = _why(study)
    if KEEP is not None:
        shutil.copytree(folder / "results", KEEP / f"night-{seed}", dirs_exist_ok=True)
    return Night(seed, res.returncode, decision, gain, time.monotonic() - started, noise, confirmation)


def _why(study_dir: Path) -> tuple[float | None, str]:
    """The launch noise the night judged with (%) and its confirmations' notes (trials.csv)."""
    path = study_dir / "judgement.json"
    noise = json.loads(path.read_text()).get("launch_noise") if path.exists() else None
    notes = []
    if (study_dir / "trials.csv").exists():
        with open(study_dir / "trials.csv", newline="") as fh:
            notes = [f"trial {r['trial']}: {r['verdict_note']}" for r in csv.DictReader(fh)
                     if r["kind"] == "confirm" and r["verdict_note"]]
    return (noise * 100 if noise is not None else None), "; ".join(notes)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nights", type=int, default=30)
    ap.add_argument("--jobs", type=int, default=1, help="nights run side by side (each is mostly waiting)")
    ap.add_argument("--config", type=Path, default=ROOT / "examples" / "sim.toml")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--keep", type=Path, default=None, metavar="DIR",
                    help="copy each night's results folder to DIR/night-<seed> (to read why a night missed)")
    args = ap.parse_args()
    global KEEP
    KEEP = args.keep
    lines = [f"# {args.nights} nights of {args.config.relative_to(ROOT) if args.config.is_relative_to(ROOT) else args.config}"
             f", {args.jobs} at a time, {time.strftime('%Y-%m-%d %H:%M')}"]
    print(lines[0], flush=True)
    with tempfile.TemporaryDirectory(prefix="demo-stability-") as tmp, ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(_night, args.config, seed, Path(tmp))
                   for seed in range(args.first_seed, args.first_seed + args.nights)]
        nights = []
        for future in futures:
            n = future.result()
            nights.append(n)
            gain = f"{n.gain_pct:+.1f} %" if n.gain_pct is not None else "-"
            noise = f"{n.noise_pct:.2f} %" if n.noise_pct is not None else "-"
            lines.append(f"seed {n.seed:3d}  exit {n.rc}  {n.wall_s:5.0f} s  best {gain:>8}  launch noise {noise:>7}  "
                         f"{n.decision}" + (f"  [{n.confirmation}]" if not n.decision.startswith("Use ") else ""))
            print(lines[-1], flush=True)
    tally = Counter(n.decision for n in nights)
    common, count = tally.most_common(1)[0]
    lines.append(f"same decision in {count} of {len(nights)} nights: {common}")
    lines += [f"  {k} of {len(nights)}: {d}" for d, k in tally.most_common()[1:]]
    walls = sorted(n.wall_s for n in nights)
    lines.append(f"night wall time: median {walls[len(walls) // 2]:.0f} s (min {walls[0]:.0f}, max {walls[-1]:.0f})")
    print("\n".join(lines[-(len(tally) + 1):]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    return 0 if count == len(nights) and common.startswith("Use ") else 1


if __name__ == "__main__":
    sys.exit(main())
