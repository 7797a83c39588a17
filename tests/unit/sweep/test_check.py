"""``nccl-tune check``'s design and its ``--set`` items (tuner.sweep.check), without launches."""

from __future__ import annotations

import pytest

from tests.helpers import ROOT
from tuner.cli import main
from tuner.errors import InputError
from tuner.inputs.config import load_config
from tuner.sweep.check import CHECK_TRIALS, check_space, design, resolve_set


def test_design_brackets_the_set_with_baselines_and_counts_every_relaunch():
    assert design(CHECK_TRIALS) == [True, False, False, True]
    assert design(7) == [True, False, False, True, False, False, True]
    assert design(6)[-1] is True and len(design(6)) == 6
    with pytest.raises(ValueError):
        design(3)


def _cfg():
    return load_config(ROOT / "examples" / "sim.toml", resolve_space=False, check_program=False)


def test_items_and_flags_make_one_set_and_its_space():
    checked = resolve_set(["NCCL_PROTO=LL"], ["--disable-custom-all-reduce"], cfg=_cfg(), space=lambda: None,
                          against=None)
    assert checked.env == {"NCCL_PROTO": "LL"} and checked.flags == ["--disable-custom-all-reduce"]
    assert checked.words() == "NCCL_PROTO=LL --disable-custom-all-reduce"
    assert check_space(checked, ROOT).choices() == {"NCCL_PROTO": ("unset", "LL"),
                                                    "--disable-custom-all-reduce": ("unset", "on")}


def test_a_value_nccl_would_misread_is_refused_with_what_it_accepts():
    with pytest.raises(InputError) as err:
        resolve_set(["NCCL_PROTO=LLL"], [], cfg=_cfg(), space=lambda: None, against=None)
    assert "key '--set NCCL_PROTO' has value 'LLL'" in str(err.value)


def test_flags_after_a_double_dash_are_parsed_as_the_sets(tmp_path, capsys):
    # --trials 3 is refused after the items are parsed: nothing is launched
    code = main(["check", str(ROOT / "examples" / "sim.toml"), "--set", "NCCL_PROTO=LL", "--trials", "3",
                 "--results", str(tmp_path), "--", "--disable-custom-all-reduce"])
    assert code == 2 and "an integer >= 4" in capsys.readouterr().err
