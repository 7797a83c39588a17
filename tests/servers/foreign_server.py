"""Someone else's server on the port: a colleague's, or a production vLLM that systemd restarts.

A stdlib OpenAI-compatible server (tests/refserver.py: /health 200, /v1/models, streamed
/v1/completions and /v1/chat/completions) that streams fast, ``--rate`` tok/s (default 5000),
and carries none of nccl-tune's marker: a sweep must never record its answers as a trial's.

    python tests/servers/foreign_server.py --port P [--rate TOK_S]

Prints ``READY http://127.0.0.1:P`` once it listens; stops on SIGTERM.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import refserver

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--rate" not in args:
        args += ["--rate", "5000"]
    sys.exit(refserver.main(args))
