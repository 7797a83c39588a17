"""One golden store per format version the reader accepts (as pyperf keeps one file per old
version): each a small study that nccl-tune at that format wrote (tests/fixtures/stores/, its
README says how each was made), read typed by today's reader and judged.

Every later format bump adds its own store here: a store written by the code of the new version
(its folder named after the commit, a line in the stores' README, an entry in :data:`GOLDEN`);
:func:`test_every_version_the_reader_accepts_has_its_store` fails until it does.
"""

from __future__ import annotations

import pytest

from tests.helpers import STORES, old_store
from tuner.judging import judge
from tuner.record import FORMAT_VERSION, UNVERSIONED, Kind, Metric, Status, TrialRecord
from tuner.study import StudyStore, check_format, default_storage, open_study

#: format version -> (the commit whose nccl-tune wrote the store, the study).
GOLDEN = {
    1: ("f0e244d", "output"),
    2: ("bedc419", "output"),
    3: ("a4f7337", "output"),
    4: ("fd91213", "output"),
    5: ("3b2c5f6", "output"),
    6: ("2d99379", "output"),
    7: ("c355452", "output"),
    8: ("4e7ab52", "output"),
    9: ("5022a40", "output"),
    10: ("8f4159a", "output"),
    11: ("bcab1d6", "output"),
}


#: The study attributes each version added (tuner/record/format.py's list).
ADDED = {2: {"format_version", "metric"}, 3: {"triage"}, 4: {"judge_concurrency"},
         5: {"confirm_skipped", "next_run"}, 6: {"allreduce_server", "trials"}, 7: {"server_kind", "launcher"},
         9: {"config_path"}}
#: The first version whose stores write a trial's fields only when they differ from their defaults
#: (tuner.study.write_changed_attrs).
WRITES_CHANGED_ONLY = 7
#: The trial attributes each version added.
TRIAL_ADDED = {6: {"backend_choice", "backend_applied", "backend_reason"}}


def _open(tmp_path, version: int) -> tuple[StudyStore, str]:
    commit, study = GOLDEN[version]
    url = default_storage(old_store(study, tmp_path, commit=commit))
    return StudyStore(open_study(study, url, create=False), {}), url


def test_every_version_the_reader_accepts_has_its_store():
    assert set(GOLDEN) == set(range(UNVERSIONED, FORMAT_VERSION + 1))
    for commit, study in GOLDEN.values():
        assert (STORES / commit / study / "study.db.gz").is_file()
        assert f"`{commit}/`" in (STORES / "README.md").read_text()


@pytest.mark.parametrize("version", sorted(GOLDEN))
def test_a_golden_store_reads_typed_and_is_judged(tmp_path, version):
    store, url = _open(tmp_path, version)
    check_format(store, url, GOLDEN[version][1])
    info = store.info()
    assert info.format_version == version and info.metric is Metric.OUTPUT
    assert info.topology is not None and info.topology.nranks == (2 if version >= 11 else 8) and info.nccl_version
    records = store.records()
    assert all(isinstance(r, TrialRecord) for r in records)
    ok = [r for r in records if r.status is Status.OK]
    assert sum(r.kind is Kind.BASELINE for r in ok) >= 1 and len(ok) >= 3
    assert all(r.output_tok_s and r.output_tok_s > 0 for r in ok)
    assert all([lv.concurrency for lv in r.concurrency] == [1, 2] for r in ok)
    judgement = judge(records, metric=info.metric)
    assert judgement.sets  # every tuned set judged against the baseline


@pytest.mark.parametrize("version", sorted(GOLDEN))
def test_each_version_reads_what_it_stored_and_defaults_the_rest(tmp_path, version):
    """The fields each version added (tuner/record/format.py) are read from the store from that
    version on, and read as "written before" below it."""
    info = _open(tmp_path, version)[0].info()
    topology = info.topology
    assert topology is not None
    # 3: the topology's CPU vendor and the triage
    assert (topology.cpu_vendor is not None) == (version >= 3)
    assert (info.triage != {}) == (version >= 3)
    # 4: the judged concurrency level (the single stream, as version 3 was judged)
    assert info.judge_concurrency == 1
    # 6: the server named by the first baseline, and the night's relaunch budget
    assert (info.allreduce_server != "") == (version >= 6)
    assert (info.trials is not None) == (version >= 6)
    # 7: the server kind and launcher of the first baseline; each trial's launches (1: one launch)
    assert (info.server_kind, info.launcher) == (("vllm", "a plain process") if version >= 7 else ("", ""))
    records = _open(tmp_path / "again", version)[0].records()
    assert all(r.backend_choice == "" and r.backend_applied is None for r in records)
    assert all(r.launches == 1 for r in records)
    # 8: the NCCL each launch loaded (the simulator maps a stand-in libnccl), none set behind the tool's back
    ok = [r for r in records if r.status is Status.OK]
    assert all((r.nccl_loaded is True) == (version >= 8) for r in ok)
    assert all(bool(r.nccl_build_id and r.nccl_library_version) == (version >= 8) for r in ok)
    assert all(r.nccl_unlaunched_from == {} for r in records)
    # 9: the experiment file the sweep was given
    assert (info.config_path != "") == (version >= 9)
    # 10: the host's P2P health, and the correctness gate's check of each tuned launch (no soak: no confirmation)
    assert (info.p2p_health != {}) == (version >= 10)
    tuned = [r for r in ok if r.kind is not Kind.BASELINE]
    assert tuned and all(r.answers_checked == (version >= 10) and r.answers_diverge == "" for r in tuned)
    assert all(r.soak_s is None and r.soak_failure == "" for r in records)
    # 11: the ranks of each node (written from the two-node example; one host before)
    assert all((r.node_ranks == {"spark-a": 1, "spark-b": 1}) == (version >= 11) for r in ok)


@pytest.mark.parametrize("version", sorted(GOLDEN))
def test_each_store_holds_the_attributes_of_its_version_and_no_later_one(tmp_path, version):
    """The stores are what their format says: a version's store holds every attribute its
    version and the earlier ones added, and none a later one added."""
    study = _open(tmp_path, version)[0].study
    for added, keys in ADDED.items():
        assert (keys <= set(study.user_attrs)) == (added <= version)
        assert (keys & set(study.user_attrs) == set()) == (added > version)
    for trial in study.get_trials(deepcopy=False):
        for added, keys in TRIAL_ADDED.items():
            if added > version:
                assert not keys & set(trial.user_attrs), trial.number
            elif version < WRITES_CHANGED_ONLY:
                assert keys <= set(trial.user_attrs), trial.number
            # from WRITES_CHANGED_ONLY a field at its default is not written: the reader defaults it
