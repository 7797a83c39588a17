"""The false "use it" rate where it is highest, on more nights than night_calibration.py's 200:
the four no-effect cells of its ``--targets`` grid with the most false claims (7 no-effect sets,
4 runs a launch, budget 12, a baseline re-measure every 5), each over ``--nights`` nights, through
the same night player (benchmarks/night_calibration.py, ``run_cells``).

Usage: ``PYTHONPATH=. .venv/bin/python benchmarks/night_nulls.py [--nights 1000] [--seed 77]``;
prints one line per cell. Results: benchmarks/results/night_calibration_slots.txt.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import night_calibration as nc

#: (sigma, tau): the cells with the most false claims in night_calibration --targets.
CELLS = ((0.01, 0.02), (0.02, 0.05), (0.02, 0.02), (0.01, 0.03))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--nights", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=77)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    cells = [nc.Cell(tau, sigma, 4, 7, baseline_every=5, trials=12) for sigma, tau in CELLS]
    for c, r in zip(cells, nc.run_cells(cells, args.nights, seed=args.seed, jobs=args.jobs, at_mde=False), strict=True):
        print(f"tau {c.tau:.3f} sigma {c.sigma:.3f}: use wrong {r.use_wrong * 100:.1f} %  (n={args.nights})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
