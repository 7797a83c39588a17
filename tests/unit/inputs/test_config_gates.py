"""The [gates] table on real files: its defaults, and every refusal naming the file, the key, the
value and what is accepted (exit status 2)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tuner.errors import ExitCode, InputError
from tuner.inputs.config import DEFAULT_GATE_PROMPTS, DEFAULT_GATE_TOKENS, load_config

PY = sys.executable


@pytest.fixture
def head(tmp_path: Path) -> str:
    (tmp_path / "space.toml").write_text('[variables.NCCL_PROTO]\nvalues = ["LL"]\n')
    return f'[server]\ncommand = ["{PY}", "serve", "--port", "{{port}}"]\n[sweep]\nspace = "{tmp_path / "space.toml"}"\n'


def _load(tmp_path: Path, text: str):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return load_config(path)


def test_defaults_without_the_table(tmp_path, head):
    gates = _load(tmp_path, head).gates
    assert (gates.answers, gates.reference) == (False, False)
    assert gates.prompts == DEFAULT_GATE_PROMPTS and len(gates.prompts) == 4
    assert gates.max_tokens == DEFAULT_GATE_TOKENS and gates.seed == 0


def test_the_table_turns_the_gate_on_with_own_prompts(tmp_path, head):
    gates = _load(tmp_path, head + '[gates]\nanswers = true\nreference = true\nprompts = ["a", "b"]\n'
                                   "max_tokens = 64\nseed = 7\n").gates
    assert gates.answers and gates.reference
    assert gates.prompts == ("a", "b") and gates.max_tokens == 64 and gates.seed == 7


@pytest.mark.parametrize(("line", "key", "accepted"), [
    ("prompts = []", "gates.prompts", "a list of 1 to 32 non-empty prompts"),
    ('prompts = ["ok", ""]', "gates.prompts[1]", "non-empty prompts"),
    ('prompts = "one prompt"', "gates.prompts", "prompts"),
    ("max_tokens = 4", "gates.max_tokens", "an integer in [8, 4096]"),
    ("max_tokens = 100000", "gates.max_tokens", "an integer in [8, 4096]"),
    ('answers = "maybe"', "gates.answers", "true or false"),
    ("reference = 2", "gates.reference", "true or false"),
    ("seed = -1", "gates.seed", "an integer in [0,"),
    ("prompt = \"typo\"", "gates.prompt", ""),
])
def test_a_bad_value_names_file_key_value_and_what_is_accepted(tmp_path, head, line, key, accepted):
    with pytest.raises(InputError) as info:
        _load(tmp_path, head + f"[gates]\n{line}\n")
    text = str(info.value)
    assert str(tmp_path / "exp.toml") in text
    assert key in text, text
    assert accepted in text, text
    assert info.value.exit_code is ExitCode.BAD_INPUT
