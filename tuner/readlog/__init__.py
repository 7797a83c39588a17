"""Logs nccl-tune did not launch, read: a colleague's box, a CI artifact, a pasted issue.

:mod:`~tuner.readlog.summary` reads the files (:func:`read_logs`) into one :class:`LogSummary`:
NCCL's version, ranks, logging threads, echoes, peers, nccl-tests rows, the server's allreduce
backend and the triage findings; :func:`render` prints it as a table or as one JSON object.
It launches nothing.
"""

from tuner.readlog.summary import LogSummary, read_logs, render

__all__ = ["LogSummary", "read_logs", "render"]
