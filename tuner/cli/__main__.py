"""``python -m tuner.cli``: the ``nccl-tune`` command (:func:`tuner.cli.main`)."""

import sys

from tuner.cli.dispatch import main

__all__: list[str] = []

if __name__ == "__main__":  # imported (the architecture tests read every module), it runs nothing
    sys.exit(main())
