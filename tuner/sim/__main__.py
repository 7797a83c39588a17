"""``python -m tuner.sim ...``: see tuner.sim.cli."""

import sys

from .cli import main

sys.exit(main(sys.argv[1:], prog="python -m tuner.sim"))
