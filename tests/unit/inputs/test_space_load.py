"""load_space on real files: candidates and presets as NCCL reads them, unsafe values skipped
with a notice, every problem of a file (and of the file it includes) in one InputError."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.errors import ExitCode, InputError
from tuner.inputs.space import UNSET, Preset, load_space

GOOD = '[variables.NCCL_PROTO]\nvalues = ["LL", "Simple"]\n'


def _write(tmp_path: Path, text: str, name: str = "space.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _refused(tmp_path: Path, text: str, **kwargs) -> InputError:
    with pytest.raises(InputError) as info:
        load_space(_write(tmp_path, text), **kwargs)
    assert info.value.exit_code == ExitCode.BAD_INPUT
    return info.value


def _one(tmp_path: Path, text: str, **kwargs) -> InputError:
    err = _refused(tmp_path, text, **kwargs)
    assert len(err.problems) == 1, str(err)
    assert err.file == str(tmp_path / "space.toml") and str(err).startswith(f"{err.file}: key '{err.key}'")
    return err


def test_candidates_as_nccl_reads_them(tmp_path):
    space = load_space(_write(tmp_path, """
description = "x"
[variables.NCCL_BUFFSIZE]
values = [4194304, "16777216", 4194304, "unset"]
note = "bytes"
[variables.NCCL_ALGO]
values = ["Ring", "Tree"]
"""))
    assert space.path == tmp_path / "space.toml" and space.presets == [] and space.notices == []
    assert space.variables == {"NCCL_BUFFSIZE": ("4194304", "16777216"), "NCCL_ALGO": ("Ring", "Tree")}
    assert space.choices() == {"NCCL_BUFFSIZE": (UNSET, "4194304", "16777216"), "NCCL_ALGO": (UNSET, "Ring", "Tree")}
    assert space.size() == 9


def test_unsafe_candidates_skipped_with_a_notice_unless_allowed(tmp_path):
    path = _write(tmp_path, """
[variables.NCCL_PROTO]
values = ["LL", "LL128", "Simple"]
unsafe = ["Simple"]
[variables.NCCL_ALGO]
values = ["NVLS"]
""")
    space = load_space(path)
    # NVLS is judged once the baseline's log shows the topology (infeasible on PCIe), not here
    assert space.variables == {"NCCL_PROTO": ("LL",), "NCCL_ALGO": ("NVLS",)}
    assert len(space.notices) == 2 and all("--allow-unsafe" in n and str(path) in n for n in space.notices)
    assert "NCCL_PROTO=LL128" in space.notices[0] and "marked unsafe in the space file" in space.notices[1]
    allowed = load_space(path, allow_unsafe=True)
    assert allowed.variables == {"NCCL_PROTO": ("LL", "LL128", "Simple"), "NCCL_ALGO": ("NVLS",)}
    assert allowed.notices == []


def test_presets_named_deduplicated_and_in_choices(tmp_path):
    space = load_space(_write(tmp_path, GOOD + """
[[presets]]
name = "ring-ll"
env = { NCCL_ALGO = "Ring", NCCL_PROTO = "LL" }
[[presets]]
env = { NCCL_MAX_NCHANNELS = 8 }
note = "unnamed"
[[presets]]
name = "same again"
env = { NCCL_PROTO = "LL", NCCL_ALGO = "Ring" }
"""))
    assert space.presets == [Preset("ring-ll", {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}),
                             Preset("preset-1", {"NCCL_MAX_NCHANNELS": "8"}),
                             Preset("same again", {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"})]
    assert space.choices()["NCCL_ALGO"] == (UNSET, "Ring")
    assert space.choices()["NCCL_MAX_NCHANNELS"] == (UNSET, "8")
    # the repeat is kept, never dropped: the planner records it as a duplicate of ring-ll (a skipped
    # row of trials.csv, tests/e2e/test_night_budget.py), so no notice at load stands in for that row
    assert not any("same again" in n for n in space.notices), space.notices


def test_two_presets_of_one_name_are_refused(tmp_path):
    err = _one(tmp_path, GOOD + '[[presets]]\nname = "ll"\nenv = { NCCL_PROTO = "LL" }\n'
                                '[[presets]]\nname = "ll"\nenv = { NCCL_PROTO = "Simple" }\n')
    assert err.key == "presets[1].name" and 'value "ll"' in str(err) and "a name no other preset" in str(err)


def test_presets_only_is_enough(tmp_path):
    space = load_space(_write(tmp_path, '[[presets]]\nenv = { NCCL_PROTO = "LL" }\n'))
    assert space.variables == {} and len(space.presets) == 1


def test_included_presets_come_first_with_their_notices(tmp_path):
    _write(tmp_path, '[variables.NCCL_PROTO]\nvalues = ["LL128", "LL"]\n'
                     '[[presets]]\nname = "ll"\nenv = { NCCL_PROTO = "LL" }\n', "base.toml")
    sub = tmp_path / "sub"
    sub.mkdir()
    space = load_space(_write(sub, 'include_presets = "../base.toml"\n' + GOOD +
                              '[[presets]]\nname = "dup"\nenv = { NCCL_PROTO = "LL" }\n'
                              '[[presets]]\nname = "simple"\nenv = { NCCL_PROTO = "Simple" }\n'))
    assert [p.name for p in space.presets] == ["ll", "dup", "simple"]  # the repeat is the planner's to record
    assert len(space.notices) == 1 and "base.toml" in space.notices[0]


def test_an_included_file_is_named_as_relative_as_the_including_one(tmp_path, monkeypatch):
    _write(tmp_path, '[variables.NCCL_PROTO]\nvalues = ["LL128", "LL"]\n', "base.toml")
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub", 'include_presets = "../base.toml"\n' + GOOD)
    monkeypatch.chdir(tmp_path)
    (notice,) = load_space(Path("sub/space.toml")).notices  # what the sweep prints: the path as typed here
    assert notice.startswith("base.toml: skipping NCCL_PROTO=LL128 (")


@pytest.mark.parametrize("text,key,value,accepted", [
    ('colour = "x"\n' + GOOD, "colour", '"x"', "the keys description, include_presets, presets, server, server_version, variables"),
    ('variables = ["NCCL_PROTO"]\n', "variables", '["NCCL_PROTO"]', "[variables.NAME] tables"),
    ('[variables]\nNCCL_PROTO = "LL"\n', "variables.NCCL_PROTO", '"LL"', "[variables.NAME] tables"),
    ('[variables.NCCL_PROTO]\nchoices = ["LL"]\nvalues = ["LL"]\n', "variables.NCCL_PROTO.choices", '["LL"]',
     "the keys note, unsafe, values"),
    ('[variables.NCCL_PROTO]\nunsafe = ["LL"]\n', "variables.NCCL_PROTO.values", "(missing)", "a non-empty list"),
    ("[variables.NCCL_PROTO]\nvalues = []\n", "variables.NCCL_PROTO.values", "[]", "a non-empty list"),
    ('[variables.NCCL_BUFFSIZE]\nvalues = "16M"\n', "variables.NCCL_BUFFSIZE.values", '"16M"', "a non-empty list"),
    ('[variables.NCCL_BUFFSIZE]\nvalues = ["16M"]\n', "variables.NCCL_BUFFSIZE.values[0]", '"16M"', "a plain integer"),
    ('[variables.NCCL_ALGO]\nvalues = ["Ring", "Star"]\n', "variables.NCCL_ALGO.values[1]", '"Star"', "a comma list"),
    ("[variables.NCCL_NTHREADS]\nvalues = [64, 100]\n", "variables.NCCL_NTHREADS.values[1]", "100", "multiple of 32"),
    ("[variables.NCCL_PROTO]\nvalues = [true]\n", "variables.NCCL_PROTO.values[0]", "true", "a string or an integer"),
    ('[variables.NCCL_PROTO]\nvalues = ["LL"]\nunsafe = "LL"\n', "variables.NCCL_PROTO.unsafe", '"LL"',
     "a list of values from values"),
    ('[variables.NCCL_PROTO]\nvalues = ["LL"]\nnote = 3\n', "variables.NCCL_PROTO.note", "3", "a string"),
    ("description = 3\n" + GOOD, "description", "3", "a string"),
    ('[variables.HF_TOKEN]\nvalues = ["hf_abc"]\n', "variables.HF_TOKEN", "***", "NCCL/CUDA tuning variables only"),
    ("include_presets = 3\n" + GOOD, "include_presets", "3", "a path to another space file"),
    ('include_presets = "nope.toml"\n' + GOOD, "include_presets", '"nope.toml"', "relative to this one"),
    ('include_presets = "space.toml"\n' + GOOD, "include_presets", '"space.toml"', "does not include this one"),
    ("presets = 3\n" + GOOD, "presets", "3", "[[presets]] entries"),
    (GOOD + '[[presets]]\nname = "x"\n', "presets[0].env", "(missing)", "a table such as"),
    (GOOD + '[[presets]]\nname = "x"\nenv = "NCCL_PROTO=LL"\n', "presets[0].env", '"NCCL_PROTO=LL"', "a table such as"),
    (GOOD + "[[presets]]\nname = 3\nenv = { NCCL_PROTO = \"LL\" }\n", "presets[0].name", "3", "a string"),
    (GOOD + "[[presets]]\nenv = {}\n", "presets[0].env", "{}", "at least one variable"),
    (GOOD + '[[presets]]\nenv = { NCCL_PROTO = "LL" }\ncolour = 1\n', "presets[0].colour", "1", "the keys env, name, note"),
    (GOOD + '[[presets]]\nenv = { NCCL_PROTO = "Fast" }\n', "presets[0].env.NCCL_PROTO", '"Fast"', "a comma list"),
    (GOOD + '[[presets]]\nenv = { NCCL_PROTO = "LL128" }\n', "presets[0].env.NCCL_PROTO", '"LL128"', "--allow-unsafe"),
    (GOOD + "[[presets]]\nenv = { NCCL_BUFFSIZE = 1.5 }\n", "presets[0].env.NCCL_BUFFSIZE", "1.5", "a string or an integer"),
    (GOOD + '[[presets]]\nenv = { API_KEY = "sk-verysecret" }\n', "presets[0].env.API_KEY", "***", "tuning variables only"),
    ('[variables.NCCL_PROTO]\nvalues = ["LL128", "unset"]\n', "variables", '{ NCCL_PROTO = { values = ["LL128", "unset"] } }',
     "at least one [variables.NAME] with a safe value, or one [[presets]] entry"),
    ("", "variables", "{}", "at least one [variables.NAME] with a safe value"),
])
def test_space_problems(tmp_path, text, key, value, accepted):
    err = _one(tmp_path, text)
    assert (err.key, err.value) == (key, value), str(err)
    assert accepted in err.accepted, str(err)
    assert "verysecret" not in str(err) and "hf_abc" not in str(err)


def test_unsafe_preset_allowed_with_allow_unsafe(tmp_path):
    space = load_space(_write(tmp_path, '[[presets]]\nenv = { NCCL_PROTO = "LL128" }\n'), allow_unsafe=True)
    assert space.presets == [Preset("preset-0", {"NCCL_PROTO": "LL128"})]


def test_unreadable_files(tmp_path):
    err = _one(tmp_path, "[variables.NCCL_PROTO\n")
    assert (err.key, err.accepted) == ("(file)", "valid TOML")
    with pytest.raises(InputError, match="file not found"):
        load_space(tmp_path / "missing.toml")


def test_every_problem_of_a_file_and_its_include_in_one_error(tmp_path):
    _write(tmp_path, 'colour = 1\n[[presets]]\nenv = { NCCL_BUFFSIZE = "4M" }\n', "base.toml")
    err = _refused(tmp_path, """
include_presets = "base.toml"
shade = "x"
[variables.NCCL_ALGO]
values = ["Ring", "Star", 1.5]
[variables.HF_TOKEN]
values = ["abc"]
[[presets]]
env = { NCCL_PROTO = "Fast", NCCL_PRTO = "LL" }
""")
    got = {(Path(p.file).name, p.key) for p in err.problems}
    assert got == {("space.toml", "shade"), ("space.toml", "variables.NCCL_ALGO.values[1]"),
                   ("space.toml", "variables.NCCL_ALGO.values[2]"), ("space.toml", "variables.HF_TOKEN"),
                   ("space.toml", "presets[0].env.NCCL_PROTO"), ("space.toml", "presets[0].env.NCCL_PRTO"),
                   ("base.toml", "colour"), ("base.toml", "presets[0].env.NCCL_BUFFSIZE")}
    lines = str(err).splitlines()
    assert lines[0] == "8 problems:" and len(lines) == 9
    assert all(line.startswith("- ") and "; accepted: " in line for line in lines[1:])
