"""An independent test server whose decode rate and faults depend on the NCCL variables it
started with, the way a real server's behaviour depends on NCCL's. Not the project's simulator:
a stdlib wrapper around tests/refserver.py, which imports nothing from ``tuner``.

At start it prints ``SAW_ENV {json}`` (every NCCL_* and CUDA_DEVICE_MAX_CONNECTIONS it got)
and ``WORKERS pid pid`` (two child processes, so teardown is real).

Rate: ENVRATE_BASE (400) tok/s x 1.05 for NCCL_PROTO=LL, x 0.85 for Simple, x 0.9 for
NCCL_ALGO=Tree, x 0.95 for NCCL_MAX_NCHANNELS=1, x 1.02 for NCCL_MAX_NCHANNELS=8, x 1.005 for
CUDA_DEVICE_MAX_CONNECTIONS=1, x ENVRATE_SCALE (1.0); with ENVRATE_DRIFT_FILE, launches number
ENVRATE_DRIFT_AT (2) and later run 5 % faster (a drifting machine). ENVRATE_EFFECTS (JSON
``{"NAME=value": factor}``) replaces those built-in factors by the given ones (``{}``: no variable
changes anything). With ENVRATE_AR_US set, the rate comes from the allreduce landscape of
tests/servers/landscape.py (shared with the all_reduce_perf stand-in, allreduce_standin.py),
times ENVRATE_SCALE and the ENVRATE_EFFECTS factors (for what a benchmark cannot see, such as
CUDA_DEVICE_MAX_CONNECTIONS), and ENVRATE_BASE is not used. ENVRATE_LAUNCH_NOISE (fraction, 1 sigma, lognormal) draws one factor per launch
from the system's entropy, or with ENVRATE_SEED and ENVRATE_COUNT_FILE (a launch counter) from
the seed and the launch's number: the launch-to-launch noise of a real relaunch, reproducible.
With ENVRATE_HOLD_FILE, a launch stays in its load while that file exists (a test holds a runner
mid-trial for as long as it needs, whatever the machine's speed).

With NCCL_RUN_DIAGNOSTICS=1 and ENVRATE_DIAG set, NCCL 2.31's init-diagnostics report on stdout, as
src/include/diagnostics_log.h's DIAG_PRINT writes it (``host:pid NCCL DIAG ...``, whatever NCCL_DEBUG
says): ENVRATE_DIAG=ok every pair verified, =write-mismatch GPU 0's writes to GPU 1 lost over PHB
(src/diagnostics/p2p.cc, ncclDiagP2pReport's words). ENVRATE_NCCL_VERSION: the version line's (2.21.5).

NCCL's log, as NCCL 2.21.5 writes it, only when NCCL_DEBUG is INFO or TRACE: the version line, a
communicator line (rank 0 of ENVRATE_NRANKS, 2) and ``NAME set by environment to VALUE`` for each
NCCL_* variable it got, except those named in ENVRATE_NO_ECHO (comma list): a server that
overwrites or drops a variable before NCCL reads it.

Faults, chosen by ``NCCL_NTHREADS`` (or ``ENVRATE_FAULT`` by name):
  64  crash-start   prints an NCCL WARN and exits 1 while "loading"
  96  hang-start    never binds the port
  128 crash-mid     serves, then exits 1 ENVRATE_CRASH_AFTER_S (1.5) s after binding
  160 hang-mid      every stream stops after 20 tokens and stays open
  192 http-500      /health 200, every completion HTTP 500 "EngineCore encountered an issue"
  224 orphans       workers start their own session, ignore SIGTERM; the parent exits at once
  256 slow-exit     on SIGTERM, takes 2 s to exit
  288 wrong-answer  answers the smoke question without "Paris" (also every set the allreduce
                    landscape lists in ENVRATE_AR_WRONG)
  320 hang-load     serves, and from its ENVRATE_HANG_AFTER-th (10) completion request on every
                    new stream stops before its first token and stays open, /health still 200;
                    it prints PyTorch's watchdog line as the hang begins (torch waits its
                    collective timeout, 10 min by default, first: this server's minutes are
                    scaled to nothing). Also every launch whose environment holds ENVRATE_HANG_SET
                    (``NAME=value``): a set that is fast and hangs after some load.
NCCL_PROTO=LL128 always fails at start with an NCCL WARN, as on a PCIe box.
"""

import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
import landscape
import refserver

FAULTS = {"64": "crash-start", "96": "hang-start", "128": "crash-mid", "160": "hang-mid",
          "192": "http-500", "224": "orphans", "256": "slow-exit", "288": "wrong-answer",
          "320": "hang-load"}
#: PyTorch's ProcessGroupNCCL watchdog line (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp), as
#: a vLLM TP worker prints it.
WATCHDOG_LINE = ("[rank0]:[E1206 03:12:44.000000000 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective "
                 "operation timeout: WorkNCCL(SeqNum=48211, OpType=ALLREDUCE, NumelIn=14336, NumelOut=14336, "
                 "Timeout(ms)=600000) ran for 600021 milliseconds before timing out.")


def rate_for(env) -> float:
    rate = float(env.get("ENVRATE_BASE", "400")) * float(env.get("ENVRATE_SCALE", "1"))
    if landscape.active(env):  # the allreduce landscape the all_reduce_perf stand-in shares
        rate = landscape.decode_rate(env) * float(env.get("ENVRATE_SCALE", "1"))
        for setting, factor in json.loads(env.get("ENVRATE_EFFECTS", "{}")).items():
            name, _, value = setting.partition("=")
            rate *= float(factor) if env.get(name) == value else 1.0
    elif "ENVRATE_EFFECTS" in env:
        for setting, factor in json.loads(env["ENVRATE_EFFECTS"]).items():
            name, _, value = setting.partition("=")
            rate *= float(factor) if env.get(name) == value else 1.0
    else:
        rate *= {"LL": 1.05, "Simple": 0.85}.get(env.get("NCCL_PROTO"), 1.0)
        rate *= 0.9 if env.get("NCCL_ALGO") == "Tree" else 1.0
        rate *= {"1": 0.95, "8": 1.02}.get(env.get("NCCL_MAX_NCHANNELS"), 1.0)
        rate *= 1.005 if env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1" else 1.0
    noise = float(env.get("ENVRATE_LAUNCH_NOISE", "0"))
    if noise > 0:
        rng = random.Random()
        if "ENVRATE_SEED" in env and "ENVRATE_COUNT_FILE" in env:
            rng = random.Random(f"{env['ENVRATE_SEED']}:{_count(env['ENVRATE_COUNT_FILE'])}")
        rate *= math.exp(rng.gauss(0.0, noise))
    drift_file = env.get("ENVRATE_DRIFT_FILE")
    if drift_file:  # the machine drifts: launches from ENVRATE_DRIFT_AT on run 5 % faster
        n = 0
        if os.path.exists(drift_file):
            with open(drift_file) as f:
                n = int(f.read() or 0)
        with open(drift_file, "w") as f:
            f.write(str(n + 1))
        rate *= 1.05 if n >= int(env.get("ENVRATE_DRIFT_AT", "2")) else 1.0
    return rate


def _count(path: str) -> int:
    """This launch's number (0, 1, ...), kept in the file ``path``."""
    n = 0
    if os.path.exists(path):
        with open(path) as f:
            n = int(f.read() or 0)
    with open(path, "w") as f:
        f.write(str(n + 1))
    return n


def _nccl_log(env) -> None:
    """NCCL's init lines for each of ENVRATE_NRANKS ranks (each its own "process", as TP
    workers are): echoes, the communicator line, Init COMPLETE (src/init.cc)."""
    hidden = set(filter(None, env.get("ENVRATE_NO_ECHO", "").split(",")))
    nranks = int(env.get("ENVRATE_NRANKS", "2"))
    for rank in range(nranks):
        pid = os.getpid() * 10 + rank
        prefix = f"envrate:{pid}:{pid} [{rank}] NCCL INFO"
        if rank == 0:
            print(f"{prefix} NCCL version {env.get('ENVRATE_NCCL_VERSION', '2.21.5')}+cuda12.4", flush=True)
        for name in sorted(env):
            if name.startswith("NCCL_") and name not in hidden and not name.startswith("NCCL_DEBUG"):
                end = "." if env[name].lstrip("-").isdigit() else ""  # NCCL: "%lld." for integers, "%s" for text
                print(f"{prefix} {name} set by environment to {env[name]}{end}", flush=True)
        print(f"{prefix} comm 0x5555deadbee{rank} rank {rank} nRanks {nranks} nNodes 1 localRanks {nranks} "
              f"localRank {rank} MNNVL 0", flush=True)
        print(f"{prefix} ncclCommInitRank comm 0x5555deadbee{rank} rank {rank} nranks {nranks} cudaDev {rank} "
              f"nvmlDev {rank} busId {rank + 1}8000 commId 0x6b1c - Init COMPLETE", flush=True)


def _diag_report(env) -> None:
    """NCCL's init-diagnostics report of rank 0 (src/diagnostics.cc, src/diagnostics/p2p.cc)."""
    head = f"envrate:{os.getpid() * 10} NCCL DIAG"
    print(f"{head} === NCCL Diagnostics ===", flush=True)
    if env["ENVRATE_DIAG"] == "ok":
        print(f"{head} [OK]   p2p: verified P2P access in both directions between every GPU pair (2 peer accesses)",
              flush=True)
    else:
        print(f"{head} [INFO] p2p: write mismatch srcRank=0 srcCudaDev=0 srcNvmlDev=0 dstRank=1 dstCudaDev=1 "
              "dstNvmlDev=1 path=PHB handle=CUMEM_POSIX_FD expected=0x00d1a60000000001 got=0x0000000000000000 "
              "verify=0x0000000000000000; check the affected pair with 'nvidia-smi topo -p2p p', then check Linux "
              "bare-metal IOMMU mode and PCIe ACS settings", flush=True)
        print(f"{head} [INFO] p2p: only 1/2 GPU-to-GPU peer accesses passed verification", flush=True)
    print(f"{head} NCCL diagnostics completed in 12.5 ms across 2 ranks", flush=True)


def _worker_argv(fault: str) -> list[str]:
    if fault == "orphans":
        code = ("import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "time.sleep(3600)")
    else:
        code = "import time; time.sleep(3600)"
    return [sys.executable, "-c", code]


def _hang_under_load(server, after: int) -> None:
    """From the ``after``-th completion request on, new streams hang before their first token."""
    while server.completions < after:
        time.sleep(0.01)
    server.opts["stall_after"] = 0
    print(WATCHDOG_LINE, flush=True)


def main() -> int:
    env = os.environ
    seen = {k: v for k, v in env.items() if k.startswith("NCCL_") or k == "CUDA_DEVICE_MAX_CONNECTIONS"}
    print("SAW_ENV " + json.dumps(seen, sort_keys=True), flush=True)
    if env.get("NCCL_DEBUG", "").upper() in ("INFO", "TRACE"):
        _nccl_log(env)
    if env.get("NCCL_RUN_DIAGNOSTICS") == "1" and env.get("ENVRATE_DIAG"):
        _diag_report(env)
    fault = env.get("ENVRATE_FAULT") or FAULTS.get(env.get("NCCL_NTHREADS", ""), "")
    if landscape.active(env) and landscape.holds(env, "ENVRATE_AR_WRONG"):
        fault = "wrong-answer"  # a set whose allreduce corrupts data answers wrongly too
    hang_set = env.get("ENVRATE_HANG_SET", "")
    if hang_set and env.get(hang_set.partition("=")[0]) == hang_set.partition("=")[2]:
        fault = "hang-load"
    port = int(sys.argv[sys.argv.index("--port") + 1])
    hold = env.get("ENVRATE_HOLD_FILE")
    while hold and os.path.exists(hold):  # a test holds this launch in its load until it removes the file
        time.sleep(0.05)
    time.sleep(float(env.get("ENVRATE_LOAD_S", "0.3")))
    if fault == "crash-start" or env.get("NCCL_PROTO") == "LL128":
        print("host:1:1 [0] NCCL WARN Cuda failure 'out of memory' while forcing protocol", flush=True)
        return 1
    workers = [subprocess.Popen(_worker_argv(fault)) for _ in range(2)]
    print("WORKERS " + " ".join(str(w.pid) for w in workers), flush=True)
    if fault == "hang-start":
        time.sleep(3600)
        return 0
    opts = {"rate": rate_for(env)}
    if fault == "hang-mid":
        opts["stall_after"] = 20
    if fault == "http-500":
        opts["fail_status"] = 500
    server = refserver.make_server("127.0.0.1", port, **opts)
    if fault == "wrong-answer":
        refserver._canned_answer = lambda prompt: "The capital is Lyon."
    done = threading.Event()
    if fault == "hang-load":
        threading.Thread(target=_hang_under_load, args=(server, int(env.get("ENVRATE_HANG_AFTER", "10"))),
                         daemon=True).start()

    def on_term(_sig, _frame):
        if fault == "slow-exit":
            time.sleep(2.0)
        if fault != "orphans":
            for w in workers:
                w.terminate()
        done.set()

    signal.signal(signal.SIGTERM, on_term)
    if fault == "crash-mid":
        threading.Timer(float(env.get("ENVRATE_CRASH_AFTER_S", "1.5")),
                        lambda: (print("RuntimeError: worker died mid-stream", flush=True), os._exit(1))).start()
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    print(f"serving on {port} at {opts['rate']:.1f} tok/s", flush=True)
    done.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
