"""An independent test server whose decode rate depends on the NCCL variables it started with.

Not the project's simulator: a stdlib wrapper around tests/refserver.py. At start it prints
``SAW_ENV {json}`` (every NCCL_* and CUDA_DEVICE_MAX_CONNECTIONS it was given) and the pids
of two worker children it spawns (so teardown is real), then serves at a rate that is a fixed
function of the environment: base 400 tok/s, NCCL_PROTO=LL x1.05, NCCL_PROTO=Simple x0.85,
NCCL_ALGO=Tree x0.9, NCCL_MAX_NCHANNELS=1 x0.95. ``ENVRATE_FAULT=crash`` exits at start.
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import refserver  # noqa: E402


def rate_for(env) -> float:
    rate = float(env.get("ENVRATE_BASE", "400"))
    proto, algo = env.get("NCCL_PROTO"), env.get("NCCL_ALGO")
    rate *= {"LL": 1.05, "Simple": 0.85}.get(proto, 1.0)
    rate *= 0.9 if algo == "Tree" else 1.0
    rate *= 0.95 if env.get("NCCL_MAX_NCHANNELS") == "1" else 1.0
    return rate


def main() -> int:
    seen = {k: v for k, v in os.environ.items() if k.startswith("NCCL_") or k == "CUDA_DEVICE_MAX_CONNECTIONS"}
    print("SAW_ENV " + json.dumps(seen, sort_keys=True), flush=True)
    if os.environ.get("ENVRATE_FAULT") == "crash" or os.environ.get("NCCL_PROTO") == "LL128":
        print("NCCL WARN forced LL128 is not supported on this topology", flush=True)
        return 1
    workers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"]) for _ in range(2)]
    print("WORKERS " + " ".join(str(w.pid) for w in workers), flush=True)
    time.sleep(float(os.environ.get("ENVRATE_LOAD_S", "0.3")))
    port = sys.argv[sys.argv.index("--port") + 1]
    return refserver.main(["--port", port, "--rate", str(rate_for(os.environ))])


if __name__ == "__main__":
    sys.exit(main())
