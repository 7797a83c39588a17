"""The [screen] and [model] tables on real files: defaults, placeholders, sizes from the model,
and every refusal naming the file, the key, the value and what is accepted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tuner.errors import InputError
from tuner.inputs.config import load_config
from tuner.screen.sizes import screen_sizes

PY = sys.executable
MODELS = ROOT / "tests" / "fixtures" / "model_configs"


@pytest.fixture
def head(tmp_path: Path) -> str:
    (tmp_path / "space.toml").write_text('[variables.NCCL_PROTO]\nvalues = ["LL"]\n')
    return f'[server]\ncommand = ["{PY}", "serve", "--port", "{{port}}"]\n[sweep]\nspace = "{tmp_path / "space.toml"}"\n'


def _load(tmp_path: Path, text: str):
    path = tmp_path / "exp.toml"
    path.write_text(text)
    return load_config(path)


def _refused(tmp_path: Path, text: str) -> InputError:
    with pytest.raises(InputError) as info:
        _load(tmp_path, text)
    return info.value


def test_defaults_and_the_argv_for_several_sizes(tmp_path, head):
    cfg = _load(tmp_path, head + '[screen]\ncommand = "{python} ar -b {min_size} -e {max_size} -f 2"\n'
                                 "sizes = [14336, 29360128]\n")
    sc = cfg.screen
    assert (sc.trials, sc.top_k, sc.timeout_s, sc.json_output, sc.tie_pct) == (100, 4, 120.0, "auto", 1.0)
    assert sc.argv([14336, 29360128]) == [PY, "ar", "-b", "14336", "-e", "29360128", "-f", "2"]
    assert cfg.model is None
    sizes = screen_sizes(cfg)
    assert (sizes.decode, sizes.prefill, sizes.all, sizes.per_token) == (14336, 29360128, (14336, 29360128), None)


def test_sizes_and_the_allreduce_count_come_from_the_model(tmp_path, head):
    cfg = _load(tmp_path, head + '[screen]\ncommand = ["{python}", "ar", "-b", "{min_size}", "-e", "{max_size}"]\n'
                                 f'[model]\nconfig = "{MODELS / "deepseek-v3.config.json"}"\nprompt_tokens = 2048\n'
                                 "tokens_per_step = 2\n")
    sizes = screen_sizes(cfg)
    assert (sizes.decode, sizes.prefill) == (7168 * 2 * 2, 7168 * 2 * 2048)
    assert sizes.per_token == 2 * 61
    assert any("bfloat16" in r and "28672 bytes" in r for r in sizes.reasons)


def test_the_model_folder_is_found_relative_to_the_config_file(tmp_path, head):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text((MODELS / "llama-3.3-70b-instruct.config.json").read_text())
    cfg = _load(tmp_path, head + '[screen]\ncommand = ["{python}", "ar", "-b", "{size}"]\n[model]\nconfig = "m"\n'
                                 "allreduces_per_token = 7\n")
    sizes = screen_sizes(cfg)
    assert (sizes.decode, sizes.prefill, sizes.per_token) == (8192 * 2, None, 7)


def test_a_screen_without_sizes_or_model_is_refused(tmp_path, head):
    err = _refused(tmp_path, head + '[screen]\ncommand = ["{python}"]\n')
    assert err.key == "screen.sizes" and "the decode size" in err.why


def test_one_size_placeholder_with_several_sizes_is_refused(tmp_path, head):
    err = _refused(tmp_path, head + '[screen]\ncommand = ["{python}", "-b", "{size}", "-e", "{size}"]\nsizes = [1, 2]\n')
    assert err.key == "screen.command" and "{min_size}" in err.accepted


def test_bad_values_are_all_reported_at_once(tmp_path, head):
    err = _refused(tmp_path, head + '[screen]\ncommand = []\nsizes = [0]\ntrials = 2\ntimeout_s = -1\nfoo = 1\n'
                                    '[model]\nconfig = "nope.json"\ntokens_per_step = 0\n')
    keys = {p.key for p in err.problems}
    assert {"screen.command", "screen.sizes[0]", "screen.trials", "screen.timeout_s", "screen.foo", "model.config",
            "model.tokens_per_step"} <= keys, keys


def test_an_unreadable_model_config_names_the_key(tmp_path, head):
    (tmp_path / "bad.json").write_text('{"hidden_size": 0, "num_hidden_layers": 4}')
    err = _refused(tmp_path, head + '[screen]\ncommand = ["{python}"]\n[model]\nconfig = "bad.json"\n')
    assert err.key == "model" and "hidden_size" in err.why


def test_a_missing_screen_program_is_refused(tmp_path, head):
    err = _refused(tmp_path, head + '[screen]\ncommand = ["no-such-nccl-tests-xyz"]\nsizes = [8]\n')
    assert err.key == "screen.command[0]" and err.why == "not on PATH"
