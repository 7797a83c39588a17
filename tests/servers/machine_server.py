"""A stdlib OpenAI-compatible server whose start-up fails the machine's way, for the machine-fault tests.

``machine_server.py PORT STATE_DIR``. Each launch counts itself in ``STATE_DIR/launches``. While
``STATE_DIR/healed`` is absent, launch number ``STATE_DIR/fail_from`` and later fail as vLLM 0.10's
start-up memory guard does (vllm/v1/worker/gpu_worker.py, init_device), before NCCL loads, whatever
the set. With ``STATE_DIR/lag_s`` present, a launch made within that many seconds of the last
served launch's exit (``STATE_DIR/last_exit``, written at its SIGTERM) fails so too: the driver
frees a server's memory late (vllm PR #57362). With ``STATE_DIR/set_crashes`` present, a launch whose environment sets NCCL_PROTO exits 1
with a plain error before any NCCL line (a set that really fails: the baseline still runs).
"""

import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PORT, STATE = int(sys.argv[1]), Path(sys.argv[2])


def out(s: str) -> None:
    print(s, flush=True)


count_file = STATE / "launches"
n = int(count_file.read_text()) + 1 if count_file.exists() else 1
count_file.write_text(str(n))
out(f"INFO:     starting (launch {n})")
fail_from = int((STATE / "fail_from").read_text()) if (STATE / "fail_from").exists() else 0
if fail_from and n >= fail_from and not (STATE / "healed").exists():
    out("(VllmWorker rank=0 pid=2411) ERROR 06-01 12:00:05 [multiproc_executor.py:546] ValueError: Free memory on "
        "device (10.79/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, 71.27 GiB). Decrease "
        "GPU memory utilization or reduce GPU memory used by other processes.")
    out("(APIServer pid=2201) RuntimeError: Engine core initialization failed. See root cause above.")
    sys.exit(1)
lag = float((STATE / "lag_s").read_text()) if (STATE / "lag_s").exists() else 0.0
last_exit = float((STATE / "last_exit").read_text()) if (STATE / "last_exit").exists() else 0.0
if lag and time.time() - last_exit < lag:
    out(f"(VllmWorker rank=0 pid=2411) ERROR 06-01 12:00:05 [multiproc_executor.py:546] ValueError: Free memory on "
        f"device (10.79/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, 71.27 GiB) "
        f"[{time.time() - last_exit:.1f} s after the last exit]")
    sys.exit(1)
if (STATE / "set_crashes").exists() and "NCCL_PROTO" in os.environ:
    out("(APIServer pid=2201) RuntimeError: the model's weights could not be read under this set")
    sys.exit(1)
out("node1:2411:2411 [0] NCCL INFO NCCL version 2.21.5+cuda12.4")


def chunk(d: dict, fr: str | None = None) -> bytes:
    body = {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d, "finish_reason": fr}]}
    return f"data: {json.dumps(body)}\n\n".encode()


class H(BaseHTTPRequestHandler):
    def log_message(self, fmt: str, *a: object) -> None:
        pass

    def do_GET(self) -> None:
        b = json.dumps({"object": "list", "data": [{"id": "m"}]} if self.path == "/v1/models" else {}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_POST(self) -> None:
        k = json.loads(self.rfile.read(int(self.headers["Content-Length"]))).get("max_tokens", 16)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(chunk({"role": "assistant", "content": ""}))
        for i in range(k):
            time.sleep(0.005)
            self.wfile.write(chunk({"content": f"{i + 1}, "}))
            self.wfile.flush()
        self.wfile.write(chunk({}, "length"))
        usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": k, "total_tokens": k + 5}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())




def _exit(*_: object) -> None:
    (STATE / "last_exit").write_text(str(time.time()))  # its memory is charged from now for lag_s
    os._exit(0)


signal.signal(signal.SIGTERM, _exit)
out(f"INFO:     Uvicorn running on http://127.0.0.1:{PORT} (Press CTRL+C to quit)")
ThreadingHTTPServer(("127.0.0.1", PORT), H).serve_forever()
