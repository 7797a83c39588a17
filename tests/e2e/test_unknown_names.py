"""A variable NCCL would not read as written never reaches a launch: a name not in the record
(``NCCL_PROTOCOL``) is refused with "did you mean", a value NCCL would misread
(``NCCL_IB_DISABLE=yes``) with what NCCL would do, in the space file, ``server.env`` and
``--set``, exit 2 (BAD_INPUT); ``--allow-unknown`` lets a newer NCCL's name through with a note."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers import cli
from tuner.errors import ExitCode

GOOD_SPACE = '[variables.NCCL_PROTO]\nvalues = ["LL", "Simple"]\n'
TYPO_PRESET = GOOD_SPACE + '[[presets]]\nname = "ll"\nenv = { NCCL_PROTOCOL = "LL" }\n'


def _write(tmp_path: Path, space: str, env: str = "") -> tuple[Path, Path]:
    """A config whose server, if ever started, leaves a marker file; and that marker's path."""
    marker = tmp_path / "launched"
    (tmp_path / "space.toml").write_text(space)
    cfg = tmp_path / "exp.toml"
    program = f"open({str(marker)!r}, 'w').write('x')"
    cfg.write_text(f'[server]\ncommand = ["{sys.executable}", "-c", "{program}", "{{port}}"]\nport = 18561\n{env}\n'
                   f'[sweep]\nspace = "{tmp_path / "space.toml"}"\ntrials = 4\n')
    return cfg, marker


def test_a_typo_in_a_preset_is_refused_before_any_launch(tmp_path):
    cfg, marker = _write(tmp_path, TYPO_PRESET)
    for extra in (["--dry-run"], []):
        res = cli("sweep", str(cfg), "--results", str(tmp_path / "r"), *extra)
        assert res.returncode == ExitCode.BAD_INPUT, res.stdout + res.stderr
        err = res.stderr
        assert "space.toml" in err and "presets[0].env.NCCL_PROTOCOL" in err and '"LL"' in err
        assert "did you mean NCCL_PROTO?" in err and "--allow-unknown" in err
        assert "Traceback" not in err
    assert not marker.exists() and not (tmp_path / "r").exists()


def test_allow_unknown_lets_a_newer_name_through_with_a_note(tmp_path):
    space = GOOD_SPACE + '[[presets]]\nname = "future"\nenv = { NCCL_FUTURE_KNOB = "1" }\n'
    cfg, marker = _write(tmp_path, space)
    res = cli("sweep", str(cfg), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == ExitCode.BAD_INPUT and "NCCL_FUTURE_KNOB" in res.stderr
    res = cli("sweep", str(cfg), "--dry-run", "--allow-unknown", "--results", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    assert "NCCL_FUTURE_KNOB is not in nccl-tune's record" in res.stdout + res.stderr
    assert not marker.exists()


def test_a_misread_value_in_server_env_says_what_nccl_would_do(tmp_path):
    cfg, marker = _write(tmp_path, GOOD_SPACE, 'env = { NCCL_IB_DISABLE = "yes", NCCL_SOCKET_IFNAME = "^lo,docker" }')
    res = cli("sweep", str(cfg), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == ExitCode.BAD_INPUT, res.stdout + res.stderr
    err = res.stderr
    assert "server.env.NCCL_IB_DISABLE" in err and '"yes"' in err and "IB stays ENABLED" in err
    assert "NCCL_SOCKET_IFNAME" not in err  # a hardware selector: its name is all that is checked
    assert not marker.exists()


def test_a_typo_in_server_env_and_in_the_space_variables_is_refused(tmp_path):
    cfg, marker = _write(tmp_path, GOOD_SPACE, 'env = { NCCL_SOCKET_IFNAM = "eth0" }')
    res = cli("sweep", str(cfg), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == ExitCode.BAD_INPUT
    assert "server.env.NCCL_SOCKET_IFNAM" in res.stderr and "did you mean NCCL_SOCKET_IFNAME?" in res.stderr
    cfg, marker = _write(tmp_path, '[variables.NCCL_ALGORITHM]\nvalues = ["Ring", "Tree"]\n' + GOOD_SPACE)
    res = cli("sweep", str(cfg), "--dry-run", "--results", str(tmp_path / "r"))
    assert res.returncode == ExitCode.BAD_INPUT
    assert "variables.NCCL_ALGORITHM" in res.stderr and "did you mean NCCL_ALGO?" in res.stderr
    assert not marker.exists()


def test_set_on_the_command_line_is_refused_the_same_way(tmp_path):
    cfg, marker = _write(tmp_path, GOOD_SPACE)
    res = cli("check", str(cfg), "--set", "NCCL_PROTOCOL=LL", "--results", str(tmp_path / "r"))
    assert res.returncode == ExitCode.BAD_INPUT, res.stdout + res.stderr
    assert "--set NCCL_PROTOCOL" in res.stderr and "did you mean NCCL_PROTO?" in res.stderr
    res = cli("check", str(cfg), "--set", "NCCL_P2P_DISABLE=true", "--results", str(tmp_path / "r"))
    assert res.returncode == ExitCode.BAD_INPUT and "P2P stays ENABLED" in res.stderr
    assert not marker.exists()
