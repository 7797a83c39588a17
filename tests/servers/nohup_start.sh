#!/bin/sh
# A start script that backgrounds the server with `nohup ... &` and returns 0 at once (the other
# spelling of tests/cases/23-command-daemonizes: no double fork, no new session).
# Usage: sh nohup_start.sh PYTHON PORT
nohup "$1" -m http.server "$2" --bind 127.0.0.1 >/dev/null 2>&1 &
echo "server started in the background on port $2"
exit 0
