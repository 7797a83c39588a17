"""Where the paths of an experiment file are found (tuner/inputs/locate.py): next to the file
first, then in the working directory, then (a space) the bundled one; each lookup of a
relative path said as a notice; the bundled spaces are package data."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tuner.errors import InputError
from tuner.inputs import load_config, load_space
from tuner.inputs.locate import bundled_space_names, spaces_folder

SERVER = f'[server]\ncommand = ["{sys.executable}", "serve", "--port", "{{port}}"]\n'
SPACE = '[variables.NCCL_PROTO]\nvalues = ["{value}"]\n'


def _night(folder: Path, sweep: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "night.toml"
    path.write_text(SERVER + f"[sweep]\n{sweep}\n")
    return path


def test_the_bundled_spaces_are_package_data_and_the_repository_folder_is_that_folder():
    assert spaces_folder() == ROOT / "tuner" / "inputs" / "spaces"
    assert (ROOT / "search_spaces").resolve() == spaces_folder().resolve()  # one copy: a link
    assert {"default", "safe", "exhaustive", "vllm-backends", "sglang-backends"} <= set(bundled_space_names())
    for name in bundled_space_names():  # every one loads, its include_presets found beside it
        load_space(spaces_folder() / f"{name}.toml", allow_unsafe=True)


def test_a_relative_space_is_found_next_to_the_file_first_then_in_the_working_directory(tmp_path, monkeypatch):
    night = _night(tmp_path / "nights", 'space = "mine.toml"')
    (tmp_path / "nights" / "mine.toml").write_text(SPACE.format(value="LL"))
    (tmp_path / "mine.toml").write_text(SPACE.format(value="Simple"))
    monkeypatch.chdir(tmp_path)
    cfg = load_config(night)
    assert cfg.sweep.space == tmp_path / "nights" / "mine.toml"
    assert f'sweep.space = "mine.toml": {tmp_path / "nights" / "mine.toml"} (next to {night})' in cfg.notices
    (tmp_path / "nights" / "mine.toml").unlink()
    cfg = load_config(night)
    assert cfg.sweep.space == Path("mine.toml")
    assert f'sweep.space = "mine.toml": mine.toml (in the working directory {tmp_path})' in cfg.notices
    (tmp_path / "mine.toml").unlink()
    with pytest.raises(InputError) as err:
        load_config(night)
    assert (err.value.key, err.value.value, err.value.why) == ("sweep.space", '"mine.toml"', "file not found")
    assert "a bundled space's name (cpu-smoke, default, exhaustive, network, safe, " in err.value.accepted


@pytest.mark.parametrize("written", ["safe", "safe.toml", "search_spaces/safe.toml", "~/../../search_spaces/safe.toml"])
def test_a_bundled_space_by_its_name_or_repository_path_from_any_directory(tmp_path, monkeypatch, written):
    monkeypatch.chdir(tmp_path)  # no search_spaces/ here
    night = _night(tmp_path / "elsewhere", f'space = "{written}"')
    if written.startswith("~"):  # a path outside both places is not taken for a bundled space
        with pytest.raises(InputError):
            load_config(night)
        return
    cfg = load_config(night)
    assert cfg.sweep.space == spaces_folder() / "safe.toml"
    assert f'sweep.space = "{written}": {spaces_folder() / "safe.toml"} (bundled with nccl-tune)' in cfg.notices


def test_a_file_of_that_name_on_disk_wins_over_the_bundled_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    night = _night(tmp_path, 'space = "search_spaces/safe.toml"')
    (tmp_path / "search_spaces").mkdir()
    (tmp_path / "search_spaces" / "safe.toml").write_text(SPACE.format(value="LL"))
    assert load_config(night).sweep.space == tmp_path / "search_spaces" / "safe.toml"


def test_a_file_that_names_no_space_gets_the_bundled_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(_night(tmp_path, "trials = 12"))
    assert cfg.sweep.space == spaces_folder() / "default.toml"


def test_the_model_config_is_found_next_to_the_file_first(tmp_path, monkeypatch):
    shape = '{"hidden_size": 4096, "num_hidden_layers": 32, "torch_dtype": "bfloat16"}'
    night = _night(tmp_path / "nights", 'space = "safe"\n[model]\nconfig = "model"')
    for where in (tmp_path / "nights" / "model", tmp_path / "model"):
        where.mkdir()
        (where / "config.json").write_text(shape)
    monkeypatch.chdir(tmp_path)
    cfg = load_config(night)
    assert cfg.model is not None and cfg.model.config == tmp_path / "nights" / "model"
    assert f'model.config = "model": {tmp_path / "nights" / "model"} (next to {night})' in cfg.notices
