"""Every malformed config or search space is refused before any launch: exit 2, one paragraph
naming the file, the key and the value, no traceback, no result touched."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT, cli
from tuner.cli import main
from tuner.nccl import strtoll, unsafe_reason

GOOD_SERVER = f'command = ["{sys.executable}", "-c", "pass", "--port", "{{port}}"]\nport = 18555\n'
GOOD_SPACE = '[variables.NCCL_PROTO]\nvalues = ["LL", "Simple"]\n'


def _config(server: str = GOOD_SERVER, probe: str = "", sweep: str = 'space = "SPACE"\ntrials = 3\n',
            top: str = "") -> str:
    return f"{top}\n[server]\n{server}\n[probe]\n{probe}\n[sweep]\n{sweep}"


BAD_CONFIGS = [
    ("unknown top-level key", _config(top='colour = "blue"'), "colour"),
    ("unknown server key", _config(server=GOOD_SERVER + "portt = 1\n"), "server.portt"),
    ("command missing", _config(server="port = 8000\n"), "server.command"),
    ("command not a list", _config(server="command = 5\n"), "server.command"),
    ("program missing", _config(server='command = ["/nonexistent/vllm", "serve"]\n'), "server.command[0]"),
    ("program not on PATH", _config(server='command = ["no-such-program-xyz"]\n'), "server.command[0]"),
    ("port too high", _config(server=GOOD_SERVER.replace("18555", "70000")), "server.port"),
    ("port not integer", _config(server=GOOD_SERVER.replace("18555", '"8000"')), "server.port"),
    ("negative ready timeout", _config(server=GOOD_SERVER + "ready_timeout_s = -5\n"), "server.ready_timeout_s"),
    ("BUFFSIZE with unit", _config(server=GOOD_SERVER + 'env = { NCCL_BUFFSIZE = "4M" }\n'), "server.env.NCCL_BUFFSIZE"),
    ("PROTO unknown", _config(server=GOOD_SERVER + 'env = { NCCL_PROTO = "FOO" }\n'), "server.env.NCCL_PROTO"),
    ("ALGO unknown token", _config(server=GOOD_SERVER + 'env = { NCCL_ALGO = "Ring,Hypercube" }\n'), "server.env.NCCL_ALGO"),
    ("LL128 forced", _config(server=GOOD_SERVER + 'env = { NCCL_PROTO = "LL128" }\n'), "--allow-unsafe"),
    ("NTHREADS not multiple of 32", _config(server=GOOD_SERVER + 'env = { NCCL_NTHREADS = "100" }\n'), "NCCL_NTHREADS"),
    ("env value float", _config(server=GOOD_SERVER + "env = { NCCL_BUFFSIZE = 1.5 }\n"), "server.env.NCCL_BUFFSIZE"),
    ("max connections out of range", _config(server=GOOD_SERVER + 'env = { CUDA_DEVICE_MAX_CONNECTIONS = "64" }\n'), "CUDA_DEVICE_MAX_CONNECTIONS"),
    ("repeats zero", _config(probe="repeats = 0\n"), "probe.repeats"),
    ("repeats word", _config(probe='repeats = "many"\n'), "probe.repeats"),
    ("max_tokens one", _config(probe="max_tokens = 1\n"), "probe.max_tokens"),
    ("bad check", _config(probe='check = "Paris"\n'), "probe.check"),
    ("bad concurrency", _config(probe="concurrency = [1, 0]\n"), "probe.concurrency"),
    ("unknown mode", _config(sweep='space = "SPACE"\nmode = "grid"\n'), "sweep.mode"),
    ("missing space file", _config(sweep='space = "nope.toml"\n'), "sweep.space"),
    ("trials zero", _config(sweep='space = "SPACE"\ntrials = 0\n'), "sweep.trials"),
    ("not TOML", "[server\ncommand = ", "valid TOML"),
]

BAD_SPACES = [
    ("unknown key", GOOD_SPACE + 'colour = "x"\n', "colour"),
    ("values missing", "[variables.NCCL_PROTO]\nchoices = [\"LL\"]\n", "variables.NCCL_PROTO"),
    ("BUFFSIZE suffix", '[variables.NCCL_BUFFSIZE]\nvalues = ["16M"]\n', "variables.NCCL_BUFFSIZE.values"),
    ("ALGO unknown", '[variables.NCCL_ALGO]\nvalues = ["Ring", "Star"]\n', "variables.NCCL_ALGO.values"),
    ("preset bad value", GOOD_SPACE + '[[presets]]\nname = "x"\nenv = { NCCL_PROTO = "Fast" }\n', "presets[0].env.NCCL_PROTO"),
    ("preset forcing LL128", GOOD_SPACE + '[[presets]]\nname = "x"\nenv = { NCCL_PROTO = "LL128" }\n', "presets[0].env.NCCL_PROTO"),
    ("nothing safe to try", '[variables.NCCL_PROTO]\nvalues = ["LL128"]\n', "nothing to try"),
    ("secret in space", '[variables.HF_TOKEN]\nvalues = ["abc"]\n', "HF_TOKEN"),
]


def _write(tmp_path: Path, config_text: str, space_text: str = GOOD_SPACE) -> Path:
    space = tmp_path / "space.toml"
    space.write_text(space_text)
    cfg = tmp_path / "exp.toml"
    cfg.write_text(config_text.replace("SPACE", str(space)))
    return cfg


@pytest.mark.parametrize("label,text,needle", BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_config_exit_2(tmp_path, capsys, label, text, needle):
    cfg = _write(tmp_path, text)
    marker = tmp_path / "results" / "keep.txt"
    marker.parent.mkdir()
    marker.write_text("earlier result")
    code = main(["sweep", str(cfg), "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2
    assert str(cfg) in err and needle in err, err
    assert "Traceback" not in err and "accepted" in err
    assert marker.read_text() == "earlier result" and sorted(p.name for p in marker.parent.iterdir()) == ["keep.txt"]


@pytest.mark.parametrize("label,text,needle", BAD_SPACES, ids=[c[0] for c in BAD_SPACES])
def test_bad_space_exit_2(tmp_path, capsys, label, text, needle):
    cfg = _write(tmp_path, _config(), text)
    code = main(["sweep", str(cfg), "--results", str(tmp_path / "results")])
    err = capsys.readouterr().err
    assert code == 2
    assert "space.toml" in err and needle in err, err
    assert not (tmp_path / "results").exists()


def test_ll128_in_space_skipped_with_notice_unless_allowed(tmp_path):
    from tuner.inputs.space import load_space

    p = tmp_path / "s.toml"
    p.write_text('[variables.NCCL_PROTO]\nvalues = ["LL", "LL128"]\n')
    space = load_space(p)
    assert space.variables["NCCL_PROTO"] == ("LL",)
    assert "LL128" in space.notices[0] and "--allow-unsafe" in space.notices[0]
    assert load_space(p, allow_unsafe=True).variables["NCCL_PROTO"] == ("LL", "LL128")


def test_bad_flags_exit_2_without_traceback(tmp_path):
    res = cli("sweep", "examples/sim.toml", "--timeout", "soon")
    assert res.returncode == 2 and "--timeout" in res.stderr and "Traceback" not in res.stderr
    res = cli("sweep", str(tmp_path / "missing.toml"))
    assert res.returncode == 2 and "missing.toml" in res.stderr and "file not found" in res.stderr
    assert "Traceback" not in res.stderr
    res = cli("sweep", "examples/sim.toml", "--trials", "2.5", "--dry-run")
    assert res.returncode == 2 and "'2.5': accepted is a whole number above 0" in res.stderr
    res = cli("probe", "--url", "127.0.0.1:8600")  # bad input, not a server failure
    assert res.returncode == 2 and "such as http://127.0.0.1:8600" in res.stderr


@pytest.mark.parametrize("text,value,rest", [("4M", 4, "M"), ("abc", 0, "abc"), ("0x10", 16, ""),
                                             ("010", 8, ""), ("  -3", -3, ""), ("16777216", 16777216, "")])
def test_strtoll_matches_c(text, value, rest):
    assert strtoll(text) == (value, rest)


def test_shipped_examples_and_spaces_are_valid():
    from tuner.inputs.config import load_config
    from tuner.inputs.space import load_space

    for cfg in sorted((ROOT / "examples").glob("*.toml")):
        loaded = load_config(cfg, check_program=False)
        load_space(loaded.sweep.space)
    safe = load_space(ROOT / "search_spaces" / "safe.toml")
    assert all(unsafe_reason(k, v) is None for p in safe.presets for k, v in p.env.items())
    tuned = {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_MAX_NCHANNELS": "16", "NCCL_BUFFSIZE": "16777216",
             "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert any(p.env == tuned for p in safe.presets)
