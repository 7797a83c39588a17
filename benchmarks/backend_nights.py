"""Issue 22's check, repeated: backend nights through the real CLI on the simulator.

Each night is a real ``nccl-tune sweep`` over the shipped ``search_spaces/vllm-backends.toml``
at ``--trials 6`` (every relaunch counted), 4 runs a launch, on the simulator's
``pcie-4x-backends`` box (4 PCIe GPUs, vLLM 0.30.0, NCCL carrying decode):

* ``gain``: FlashInfer's PCIe IPC allreduce about 10 % faster at decode than NCCL (the profile
  as shipped): the night should say "Use it" for ``VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC=1``.
* ``null``: the same box with that backend exactly as fast as NCCL (a profile extending it with
  ``fi_pcie_ipc_us = 0``): any "Use it" is a false claim.
* ``missing``: FlashInfer's package missing (``--sim-missing flashinfer``): the switch must be
  ``not applied`` in every night and nothing recommended.

The launch-to-launch noise is the machine's own timing (the simulator adds none), so run it on
a quiet machine. Prints one line per night and a summary; exit status 0 when every gain night
recommends the backend and no null or missing night recommends anything.
Usage: ``.venv/bin/python benchmarks/backend_nights.py [--nights 4]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers import free_port, run_cli  # noqa: E402

IPC = "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC=1"


def _config(work: Path, name: str, profile: str, extra: list[str]) -> Path:
    args = "".join(f', "{a}"' for a in extra)
    path = work / f"{name}.toml"
    path.write_text(f"""
[server]
command = ["{sys.executable}", "-m", "tuner.sim", "serve", "--profile", "{profile}", "--port", "{{port}}",
           "--load-time", "0.3"{args}]
port = {free_port()}
ready_timeout_s = 60
teardown_grace_s = 5
[probe]
max_tokens = 64
repeats = 4
[sweep]
space = "{ROOT / 'search_spaces' / 'vllm-backends.toml'}"
trials = 6
""")
    return path


def night(work: Path, kind: str, seed: int) -> tuple[str | None, int, int]:
    """One night of ``kind``: (the set "Use it" named or None, relaunches spent, launches of the
    PCIe IPC choice not applied)."""
    profile, extra = "pcie-4x-backends", []
    if kind == "null":
        null = work / "null-ipc.toml"
        null.write_text('extends = "pcie-4x-backends"\nfi_pcie_ipc_us = 0.0\n')
        profile = str(null)
    elif kind == "missing":
        extra = ["--sim-missing", "flashinfer"]
    study = f"{kind}{seed}"
    cfg = _config(work, study, profile, extra)
    res = run_cli("sweep", str(cfg), "--results", str(work / "r"), "--study", study, "--seed", str(seed))
    if res.returncode != 0:
        raise SystemExit(f"{study}: exit {res.returncode}\n{res.stderr[-2000:]}")
    out = res.stdout
    use = None
    if "Use it:" in out:
        block = out[out.index("Use it:"):].splitlines()
        use = next((line.split("export ", 1)[1].strip() for line in block if "export " in line), "(flags only)")
    df = pd.read_csv(work / "r" / study / "trials.csv")
    launched = df[df["status"] != "skipped"]
    ipc = launched[launched["backend_choice"] == "vllm-flashinfer-pcie-ipc"]
    return use, len(launched), int((ipc["backend_applied"] == False).sum())  # noqa: E712


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nights", type=int, default=4, help="nights of each kind (default 4)")
    args = ap.parse_args()
    found = false = missing_ok = 0
    spent: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for kind in ("gain", "null", "missing"):
            for seed in range(1, args.nights + 1):
                use, n, not_applied = night(work, kind, seed)
                spent.append(n)
                print(f"{kind:8s} seed {seed}: Use it: {use or '-'}; {n} relaunches; PCIe IPC not applied in "
                      f"{not_applied} launch(es)", flush=True)
                if kind == "gain":
                    found += use == IPC
                elif use is not None:
                    false += 1
                if kind == "missing":
                    missing_ok += not_applied >= 1 and use is None
    k = args.nights
    print(f"\ngain nights recommending {IPC}: {found}/{k}; null and missing nights recommending anything: "
          f"{false}/{2 * k}; missing nights with the switch not applied: {missing_ok}/{k}; at most "
          f"{max(spent)} relaunches a night")
    return 0 if found == k and false == 0 and missing_ok == k and max(spent) <= 6 else 1


if __name__ == "__main__":
    raise SystemExit(main())
