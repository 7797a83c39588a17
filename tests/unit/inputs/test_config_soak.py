"""sweep.soak_minutes: its default (10 min, or NCCL_TUNE_SOAK_MINUTES), fractions, 0 for none,
and every bad spelling refused in one paragraph naming where it came from."""

from __future__ import annotations

import pytest

from tuner.errors import ExitCode, InputError
from tuner.inputs.config import DEFAULT_SOAK_MINUTES, SOAK_ENV, load_config


def _load(tmp_path, sweep: str = ""):
    (tmp_path / "space.toml").write_text('[variables.NCCL_PROTO]\nvalues = ["LL"]\n')
    path = tmp_path / "exp.toml"
    path.write_text(f'[server]\ncommand = ["srv", "--port", "{{port}}"]\n'
                    f'[sweep]\nspace = "{tmp_path / "space.toml"}"\n{sweep}\n')
    return load_config(path, check_program=False)


def test_the_default_fits_a_night_and_the_environment_replaces_it(tmp_path, monkeypatch):
    monkeypatch.delenv(SOAK_ENV)
    cfg = _load(tmp_path)
    assert cfg.sweep.soak_minutes == DEFAULT_SOAK_MINUTES == 10.0 and cfg.sweep.soak_s == 600.0
    monkeypatch.setenv(SOAK_ENV, "2.5")
    assert _load(tmp_path).sweep.soak_minutes == 2.5
    assert _load(tmp_path, "soak_minutes = 30").sweep.soak_minutes == 30.0  # the file wins


@pytest.mark.parametrize("value, minutes", [("0", 0.0), ("0.05", 0.05), ("60", 60.0), ("1440", 1440.0)])
def test_fractions_and_zero_are_accepted(tmp_path, value, minutes):
    assert _load(tmp_path, f"soak_minutes = {value}").sweep.soak_minutes == minutes


@pytest.mark.parametrize("value", ["-1", "1441", '"ten"', '"10 min"', "nan", "inf", "true", "[10]"])
def test_bad_values_name_the_key_and_what_is_accepted(tmp_path, value):
    with pytest.raises(InputError) as err:
        _load(tmp_path, f"soak_minutes = {value}")
    text = str(err.value)
    assert "sweep.soak_minutes" in text and "[0, 1440]" in text and err.value.exit_code is ExitCode.BAD_INPUT
    assert "Traceback" not in text


@pytest.mark.parametrize("value", ["x", "-3", "1e9", ""])
def test_a_bad_environment_default_names_the_variable(tmp_path, monkeypatch, value):
    monkeypatch.setenv(SOAK_ENV, value)
    with pytest.raises(InputError) as err:
        _load(tmp_path)
    assert SOAK_ENV in str(err.value) and "the environment" in str(err.value) and "[0, 1440]" in str(err.value)
