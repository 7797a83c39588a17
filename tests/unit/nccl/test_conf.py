"""NCCL's conf files and plugins as NCCL reads them (src/misc/param.cc, setEnvFile/initEnvFunc)."""

from __future__ import annotations

from pathlib import Path

from tuner.nccl import SettingsSource, conf_files, origin_of, plugin_sources, read_conf
from tuner.nccl.conf import parse_conf


def test_a_conf_file_is_read_as_set_env_file_reads_it():
    text = "# a comment\nNCCL_ALGO=Ring\n #indented is no comment=1\nno equals sign\nNCCL_PROTO= LL \n=x\nNCCL_ALGO=Tree\nA=b=c"
    assert parse_conf(text) == {"NCCL_ALGO": "Ring", " #indented is no comment": "1", "NCCL_PROTO": " LL ", "A": "b=c"}


def test_a_missing_file_is_skipped_and_an_unreadable_one_said(tmp_path):
    assert read_conf(tmp_path / "none.conf") == (None, "")
    (tmp_path / "dir.conf").mkdir()
    values, why = read_conf(tmp_path / "dir.conf")
    assert values is None and why.startswith("cannot be read here")


def test_nccl_conf_file_replaces_the_home_file_and_etc_comes_last(tmp_path):
    named = conf_files({"NCCL_CONF_FILE": "/x/my.conf"}, ["/home/u"])
    assert named == [("NCCL_CONF_FILE=/x/my.conf", Path("/x/my.conf")), ("/etc/nccl.conf", Path("/etc/nccl.conf"))]
    homes = conf_files({"NCCL_CONF_FILE": ""}, ["/home/u", "/tmp/h", "/home/u"])  # empty: not set (strlen > 0)
    assert [p for _, p in homes] == [Path("/home/u/.nccl.conf"), Path("/tmp/h/.nccl.conf"), Path("/etc/nccl.conf")]
    assert homes[0][0] == "~/.nccl.conf" and "password database" in homes[1][0] and homes[1][0].startswith("$HOME/.nccl.conf")


def test_plugins_and_a_default_env_plugin_on_the_library_path(tmp_path):
    (tmp_path / "libnccl-env.so").write_bytes(b"\x7fELF")
    found = plugin_sources({"NCCL_TUNER_PLUGIN": "libmy-tuner.so", "LD_LIBRARY_PATH": f"/nowhere:{tmp_path}"})
    assert [s.where for s in found] == ["NCCL_TUNER_PLUGIN=libmy-tuner.so", f"{tmp_path}/libnccl-env.so on LD_LIBRARY_PATH"]
    assert "2.28.7" in found[1].note
    # a named env plugin replaces the default one: the file on the path is not opened
    named = plugin_sources({"NCCL_ENV_PLUGIN": "libx.so", "LD_LIBRARY_PATH": str(tmp_path)})
    assert [s.where for s in named] == ["NCCL_ENV_PLUGIN=libx.so"]


def test_origin_is_the_first_source_that_sets_a_name_else_an_env_plugin():
    sources = [SettingsSource("/home/u/.nccl.conf", {"NCCL_ALGO": "Ring"}),
               SettingsSource("/etc/nccl.conf", {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"})]
    assert origin_of("NCCL_ALGO", sources) == "/home/u/.nccl.conf"
    assert origin_of("NCCL_PROTO", sources) == "/etc/nccl.conf"
    assert origin_of("NCCL_BUFFSIZE", sources) == ""
    plugin = SettingsSource("/lib/libnccl-env.so on LD_LIBRARY_PATH")
    assert origin_of("NCCL_BUFFSIZE", [*sources, plugin]) == "perhaps /lib/libnccl-env.so on LD_LIBRARY_PATH"
