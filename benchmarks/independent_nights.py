"""Issue 21's two end-to-end checks, run through the real CLI against the independent test server.

The server is tests/servers/envrate_server.py (it imports nothing from ``tuner``): its decode
rate depends on the NCCL variables it starts with (ENVRATE_EFFECTS) times one lognormal factor
per launch (ENVRATE_LAUNCH_NOISE, seeded per night and launch number); the run-to-run noise is
the machine's own timing. Each night is a real ``nccl-tune sweep`` at the default budget
(``trials = 12``, ``baseline_every = 5``, 4 runs a launch), seven presets in ``presets`` mode:

* ``--check one``: 1 % launch noise, six no-effect sets and one truly 10 % faster
  (NCCL_ALGO=Ring), four nights: the issue asks that the fast set be recommended ("Use it") in
  at least 3 and a no-effect set in none.
* ``--check two``: 2 % launch noise, three nights of six no-effect sets (at most 2 of the 18
  verdicts faster or slower), then three nights with one set truly 15 % faster (found in at
  least 2: "Use it" for it).

Prints one line per night and a summary; exit status 0 when every target holds, 1 otherwise.
Usage: ``.venv/bin/python benchmarks/independent_nights.py [--check one|two|both]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers import envrate_command, run_cli, write_config  # noqa: E402

FAST = "NCCL_ALGO=Ring"
NULL_SETS = ['NCCL_PROTO = "LL"', 'NCCL_PROTO = "Simple"', 'NCCL_MAX_NCHANNELS = "8"',
             'CUDA_DEVICE_MAX_CONNECTIONS = "1"', 'NCCL_P2P_DISABLE = "1"', 'NCCL_MIN_NCHANNELS = "4"']


@dataclass
class NightResult:
    """One night: its seed, the set "Use it" named (None: none), the no-effect sets judged and
    how many of them were called faster or slower, the fast set's own verdict."""

    seed: int
    use_it: str | None
    judged: int
    loud: int
    fast_verdict: str | None


def _space(work: Path, with_fast: bool) -> Path:
    sets = list(NULL_SETS) + (['NCCL_ALGO = "Ring"'] if with_fast else [])
    text = "".join(f'[[presets]]\nname = "p{i}"\nenv = {{ {env} }}\n' for i, env in enumerate(sets))
    path = work / f"space-{int(with_fast)}.toml"
    path.write_text(text)
    return path


def night(work: Path, seed: int, noise: float, gain: float) -> NightResult:
    """One default night against the independent server (see the module docstring)."""
    study = f"n{seed}"
    effects = json.dumps({FAST: 1.0 + gain} if gain else {})
    server_env = (f"env = {{ ENVRATE_EFFECTS = '{effects}', ENVRATE_LAUNCH_NOISE = \"{noise}\", "
                  f"ENVRATE_SEED = \"{seed}\", ENVRATE_COUNT_FILE = \"{work / study}.count\", "
                  "ENVRATE_LOAD_S = \"0.1\" }")
    cfg = write_config(work / f"{study}.toml", command=envrate_command(), space=_space(work, bool(gain)), trials=12,
                       baseline_every=5, extra_server=server_env, extra_sweep='mode = "presets"', max_tokens=60,
                       repeats=4)
    res = run_cli("sweep", str(cfg), "--results", str(work / "r"), "--study", study, timeout=900)
    if res.returncode != 0:
        raise SystemExit(f"night {seed} failed (exit {res.returncode}):\n{res.stderr[-2000:]}")
    df = pd.read_csv(work / "r" / study / "trials.csv")
    tuned = df[(df["kind"] == "preset") & (df["status"] == "ok")]
    fast = tuned[tuned["env"].astype(str).str.contains("Ring")]
    null = tuned[~tuned["env"].astype(str).str.contains("Ring")]
    use = None
    if "Use it." in res.stdout:
        use = "fast" if any(line.strip().startswith("export NCCL_ALGO=Ring") for line in res.stdout.splitlines()) else "null"
    return NightResult(seed, use, len(null), int(null["verdict"].isin(["faster", "slower"]).sum()),
                       str(fast.iloc[0]["verdict"]) if len(fast) else None)


def _show(label: str, r: NightResult) -> None:
    print(f"  {label} seed {r.seed}: Use it -> {r.use_it or 'none'}; no-effect sets faster/slower {r.loud} of "
          f"{r.judged}; the fast set's verdict: {r.fast_verdict or '-'}", flush=True)


def check_one(work: Path) -> bool:
    """1 % launch noise, +10 % among six: recommended in >= 3 of 4 nights, a no-effect set in none."""
    print("check one: 1 % launch noise, six no-effect sets and one +10 %, four default nights")
    nights = [night(work, seed, 0.01, 0.10) for seed in (101, 102, 103, 104)]
    for r in nights:
        _show("night", r)
    right = sum(r.use_it == "fast" for r in nights)
    wrong = sum(r.use_it == "null" for r in nights)
    ok = right >= 3 and wrong == 0
    print(f"  => the fast set recommended in {right} of 4 (target >= 3), a no-effect set in {wrong} (target 0): "
          f"{'holds' if ok else 'FAILS'}")
    return ok


def check_two(work: Path) -> bool:
    """2 % launch noise: <= 2 of 18 no-effect verdicts faster/slower; a +15 % set found in >= 2 of 3."""
    print("check two: 2 % launch noise, three nights of six no-effect sets, three with one +15 %")
    null_nights = [night(work, seed, 0.02, 0.0) for seed in (201, 202, 203)]
    for r in null_nights:
        _show("null night", r)
    fast_nights = [night(work, seed, 0.02, 0.15) for seed in (211, 212, 213)]
    for r in fast_nights:
        _show("+15 % night", r)
    loud = sum(r.loud for r in null_nights)
    judged = sum(r.judged for r in null_nights)
    found = sum(r.use_it == "fast" for r in fast_nights)
    wrong = sum(r.use_it == "null" for r in null_nights + fast_nights)
    ok = loud <= 2 and found >= 2
    print(f"  => no-effect verdicts faster/slower: {loud} of {judged} (target <= 2); the +15 % set recommended in "
          f"{found} of 3 (target >= 2); 'Use it' for a no-effect set: {wrong} of 6 nights: "
          f"{'holds' if ok else 'FAILS'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--check", choices=("one", "two", "both"), default="both")
    args = ap.parse_args(argv)
    ok = True
    with tempfile.TemporaryDirectory(prefix="independent-nights-") as tmp:
        work = Path(tmp)
        if args.check in ("one", "both"):
            ok &= check_one(work)
        if args.check in ("two", "both"):
            ok &= check_two(work)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
