"""Errors the CLI turns into a one-paragraph message and exit status 2 (no traceback)."""

from __future__ import annotations


class InputError(Exception):
    """A user-supplied file or flag holds a value nccl-tune will not accept.

    The message names the file, the key, the offending value and what is accepted, so a
    user can fix it without reading code. ``str(err)`` is that message.
    """

    def __init__(self, file: str, key: str, value: object, accepted: str, why: str = "") -> None:
        self.file, self.key, self.value, self.accepted, self.why = file, key, value, accepted, why
        reason = f" ({why})" if why else ""
        super().__init__(
            f"{file}: key '{key}' has value {value!r}{reason}; accepted: {accepted}."
        )


class SweepAborted(Exception):
    """The sweep cannot go on safely (machine not clean, port held by a stranger, ...).

    Raised before anything is measured on a poisoned machine; what was recorded stays.
    """
