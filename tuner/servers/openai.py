"""Any other OpenAI-compatible server: what the OpenAI API reference promises, nothing more
(``GET /v1/models`` lists ``data[].id``; ``POST /v1/chat/completions`` streams server-sent
events). The kind of a command no other kind names; ``server.kind = "openai"`` forces it.
"""

from __future__ import annotations

from tuner.servers.kind import ServerKind

__all__ = ["OPENAI"]

OPENAI = ServerKind(
    name="openai",
    title="an OpenAI-compatible server",
    command=(),
    honours_ignore_eos=False,
    launch_line="",
    sources="the OpenAI API reference: /v1/models, /v1/chat/completions (stream)",
)
