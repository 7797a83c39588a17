"""The simulator's server under another name: ``python unnamed_server.py SERVE-ARGS`` runs
``python -m tuner.sim serve SERVE-ARGS`` and passes its output on with every mark that names
vLLM (``vLLM``, ``vllm``, ``VllmWorker``, ``EngineCore``, ``Worker_TP``) renamed, as a vLLM fork
or a wrapper that renames its lines would log. Its engine config line still says
``disable_custom_all_reduce=False``. Stdlib only; a signal it gets is passed to the server."""

import re
import signal
import subprocess
import sys

MARKS = re.compile(r"vLLM|vllm|VllmWorker|EngineCore|Worker_TP")


def main() -> int:
    proc = subprocess.Popen([sys.executable, "-m", "tuner.sim", "serve", *sys.argv[1:]], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: proc.send_signal(number))
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(MARKS.sub("Engine", line))
        sys.stdout.flush()
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
