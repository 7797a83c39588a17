#!/usr/bin/env python3
"""Print the simulator's decode-speed landscape per profile, and time the cost model.

Usage: ``python benchmarks/bench_sim_costmodel.py [--profile NAME|FILE.toml ...]``

For each profile: expected single-stream tok/s (cost model, no noise) at NCCL defaults and under
a set of NCCL environments (NCCL src/graph/tuning.cc; docs/NCCL.md), the change against the default,
the allreduce share of decode time and what NCCL runs; then the aggregate tok/s at 1/2/4/8
concurrent streams and how long one uncached cost-model evaluation takes (us).
"""

from __future__ import annotations

import argparse
import time

from tuner.sim.costmodel import CostModel, check_init
from tuner.sim.ncclenv import NcclInitError, settings_from
from tuner.sim.profiles import BUILTIN, load_profile

ENVS = {
    "default": {},
    "deployment-tuned": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "16",
                         "NCCL_BUFFSIZE": "16777216", "CUDA_DEVICE_MAX_CONNECTIONS": "1"},
    "proto=LL": {"NCCL_PROTO": "LL"},
    "proto=Simple": {"NCCL_PROTO": "Simple"},
    "proto=LL128": {"NCCL_PROTO": "LL128"},
    "algo=Tree": {"NCCL_ALGO": "Tree"},
    "max_nchannels=1": {"NCCL_MAX_NCHANNELS": "1"},
    "min_nchannels=32": {"NCCL_MIN_NCHANNELS": "32"},
    "buffsize=256K": {"NCCL_BUFFSIZE": "262144"},
    "buffsize=32K": {"NCCL_BUFFSIZE": "32768"},
    "buffsize=4M (typo)": {"NCCL_BUFFSIZE": "4M"},
    "nthreads=64": {"NCCL_NTHREADS": "64"},
    "max_connections=1": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"},
    "max_connections=32": {"CUDA_DEVICE_MAX_CONNECTIONS": "32"},
    "p2p_disable=1": {"NCCL_P2P_DISABLE": "1"},
    "p2p_level=SYS": {"NCCL_P2P_LEVEL": "SYS"},
    "shm_disable=1": {"NCCL_SHM_DISABLE": "1"},
}


def report(profile) -> None:
    print(f"== {profile.name}  (tp={profile.tp}, {profile.link}, "
          f"{profile.decode_bytes}-byte decode allreduce x {profile.allreduces_per_token})")
    base = CostModel(profile, settings_from({})).breakdown(1).tok_s
    for name, env in ENVS.items():
        try:
            settings = settings_from(env)
            check_init(profile, settings)
        except NcclInitError as exc:
            print(f"  {name:20s} refused: {exc.warn_lines[0][:70]}")
            continue
        bd = CostModel(profile, settings).breakdown(1)
        a = bd.allreduce
        print(f"  {name:20s} {bd.tok_s:8.2f} tok/s {100 * (bd.tok_s / base - 1):+6.1f}%  "
              f"share {bd.share:5.3f}  allreduce {a.time_us:7.1f} us via {a.via} "
              f"{a.algo}/{a.proto} ch={a.nchannels}")
    cm = CostModel(profile, settings_from({}))
    agg = [round(cm.breakdown(b).tok_s * b, 1) for b in (1, 2, 4, 8)]
    print(f"  aggregate tok/s at concurrency 1/2/4/8: {agg}")
    t0 = time.perf_counter()
    n = 2000
    for i in range(n):
        CostModel(profile, settings_from({})).breakdown(1 + i % 8)
    print(f"  cost model: {1e6 * (time.perf_counter() - t0) / n:.1f} us per uncached evaluation")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", action="append", default=None)
    args = ap.parse_args()
    for spec in args.profile or list(BUILTIN):
        report(load_profile(spec))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
