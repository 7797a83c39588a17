"""Secrets in environments, commands and text: which are secret, and their values hidden.

A variable is secret when its name holds TOKEN, KEY, SECRET or PASSWORD (any case): its value
is passed on to the server but never written to a log, a record or the screen. A command
(``server.command``) may carry secrets too, as written by the user: :func:`redact_argv` hides
them in what is written, while the launched process still gets the command as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["REDACTED", "SECRET_MARKERS", "argv_secrets", "is_secret", "is_secret_option", "redact", "redact_argv",
           "scrub", "secret_values"]

#: Names that mark a variable as secret: its value is passed on, never written.
SECRET_MARKERS = ("TOKEN", "KEY", "SECRET", "PASSWORD")
REDACTED = "***"

#: Words of an option's name that make its value secret (``--api-key``, ``--hf-token``,
#: ``--password``): whole words only, so ``--max-num-batched-tokens 8192`` (vLLM) or
#: ``--tokenizer`` keep their values.
_SECRET_WORDS = frozenset({"token", "key", "secret", "password", "passwd", "apikey", "credential", "credentials"})
#: Last words of an option whose value is where a secret lies, not the secret
#: (``--ssl-keyfile``, ``--token-file``, ``--hf-token-path``): the path is kept.
_PATH_WORDS = frozenset({"file", "path", "dir", "filename", "keyfile", "certfile"})
#: ``NAME=`` at the start of a word or after a comma (srun ``--export=A=B,HF_TOKEN=x``).
_ASSIGN = re.compile(r"(?:^|(?<=,))([A-Za-z_][A-Za-z0-9_]*)=((?:(?!,[A-Za-z_][A-Za-z0-9_]*=).)*)", re.S)
#: A value that is a reference, not a secret: ``${NAME}``, ``$NAME``, a ``{port}`` placeholder.
_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\{[a-z_]+\}")
#: A short option glued to a variable: docker's ``-eHF_TOKEN=x`` (the name starts upper case,
#: so ``-max_tokens=5`` is not read as ``-m ax_tokens=5``).
_GLUED = re.compile(r"(-[A-Za-z])([A-Z_][A-Za-z0-9_]*=.*)", re.S)
#: A URL's password: ``scheme://user:PASSWORD@host``.
_URL_PASSWORD = re.compile(r"(//[^:/@\s]+:)[^@/\s]+@")


def is_secret(name: str) -> bool:
    """True when ``name`` contains TOKEN, KEY, SECRET or PASSWORD (case-insensitive)."""
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def is_secret_option(option: str) -> bool:
    """True when the value of command-line option ``option`` (``--api-key``, ``-api_key``) is a
    secret: a word of its name (split at ``-`` and ``_``) is token, key, secret, password,
    passwd, apikey or credential(s), unless its last word says the value is a path (file, path,
    dir: ``--ssl-keyfile``, ``--token-file``). Whole words, so ``--max-num-batched-tokens``
    (vLLM ``vllm/engine/arg_utils.py``) and ``--tokenizer`` are not secret."""
    words = [w for w in re.split(r"[-_]+", option.lstrip("-").lower()) if w]
    if not words or words[-1] in _PATH_WORDS:
        return False
    return any(w in _SECRET_WORDS for w in words) or "apikey" in "".join(words)


def _hidden(value: str) -> bool:
    """Whether ``value`` (an option's or a variable's) is hidden: all but a bare reference."""
    return bool(value) and not _REFERENCE.fullmatch(value)


def _assignments(text: str, found: list[str]) -> str:
    """``text`` with the value of each secret ``NAME=value`` (at its start or after a comma) as
    ``***``; each value hidden is appended to ``found``."""
    def one(m: re.Match[str]) -> str:
        name, value = m.group(1), m.group(2)
        if not is_secret(name) or not _hidden(value):
            return m.group(0)
        found.append(value)
        return f"{name}={REDACTED}"
    return _ASSIGN.sub(one, text)


def _url(word: str, found: list[str]) -> str:
    """``word`` with a URL's password as ``***`` (``postgresql://u:PASS@host/db``)."""
    for m in _URL_PASSWORD.finditer(word):
        found.append(m.group(0)[len(m.group(1)):-1])
    return _URL_PASSWORD.sub(rf"\1{REDACTED}@", word)


def _redact(argv: Iterable[str]) -> tuple[list[str], list[str]]:
    """``(argv redacted, the values hidden)``: see :func:`redact_argv`."""
    out: list[str] = []
    found: list[str] = []
    after_secret = False
    for word in argv:
        word = str(word)
        if after_secret and not word.startswith("-") and _hidden(word):
            found.append(word)
            out.append(REDACTED)
            after_secret = False
            continue
        after_secret = False
        if glued := _GLUED.fullmatch(word):  # -eHF_TOKEN=x
            out.append(glued.group(1) + _assignments(glued.group(2), found))
            continue
        if word.startswith("-") and len(word) > 1:
            option, eq, value = word.partition("=")
            if eq and is_secret_option(option) and _hidden(value):  # --api-key=X, -api_key=X
                found.append(value)
                out.append(f"{option}={REDACTED}")
                continue
            if eq:  # --env=HF_TOKEN=x, --build-arg=..., --export=ALL,HF_TOKEN=x
                out.append(_url(f"{option}={_assignments(value, found)}", found))
                continue
            after_secret = is_secret_option(option)  # --api-key X: the next word
            out.append(word)
            continue
        out.append(_url(_assignments(word, found), found))  # env HF_TOKEN=x, -e HF_TOKEN=x
    return out, found


def redact_argv(argv: Iterable[str]) -> list[str]:
    """``argv`` as it may be written (a log's argv line, a record, the host type, a report's
    command line): each secret value as ``***``, every other word exactly as given.

    Hidden: the value of a ``NAME=value`` word whose NAME is secret (:func:`is_secret`), also
    after an option's ``=`` or a comma (``env HF_TOKEN=x``, ``-e HF_TOKEN=x``, ``-eHF_TOKEN=x``,
    ``--env=HF_TOKEN=x``, ``--build-arg HF_TOKEN=x``, srun's ``--export=ALL,HF_TOKEN=x``); the
    value of an option whose name is secret (:func:`is_secret_option`: ``--api-key X``,
    ``--api-key=X``, ``--hf-token X``, ``--token X``, ``--password X``), the next word only when
    it is not itself an option; a URL's password (``//user:PASS@host``). Kept: a value that is
    a reference (``${HF_TOKEN}``, ``$HF_TOKEN``, ``{port}``): it names a secret, it holds none;
    an option naming a path (``--ssl-keyfile``, ``--token-file``): the path is not the secret.
    Erring towards hiding: a secret value runs to the next ``,NAME=`` or the word's end."""
    return _redact(argv)[0]


def argv_secrets(argv: Iterable[str]) -> list[str]:
    """The values :func:`redact_argv` hides in ``argv`` worth scrubbing from other text (4+
    chars: what the server prints of its own command or environment), longest first."""
    return sorted({v for v in _redact(argv)[1] if len(v) >= 4}, key=len, reverse=True)


def redact(env: Mapping[str, str]) -> dict[str, str]:
    """Copy of ``env`` with every secret variable's value replaced by ``***``."""
    return {k: (REDACTED if is_secret(k) else v) for k, v in env.items()}


def secret_values(env: Mapping[str, str]) -> list[str]:
    """Values of the secret variables in ``env`` worth scrubbing from text (4+ chars)."""
    return sorted({v for k, v in env.items() if is_secret(k) and len(v) >= 4}, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with every occurrence of each secret value replaced by ``***``."""
    for value in sorted(secrets, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text
