"""The simulator says a replaced thread count at NCCL's level for its version (src/graph/tuning.cc, getNthreads)."""

from tuner.sim.costmodel import tune_model
from tuner.sim.ncclenv import settings_from
from tuner.sim.profiles import BUILTIN

PCIE = BUILTIN["pcie-8x-mla"]


def test_invalid_nthreads_is_warn_up_to_226_and_info_from_227():
    old = [m for m in tune_model(PCIE, settings_from({"NCCL_NTHREADS": "1024"}, "2.26.6")).messages
           if "Invalid NCCL_NTHREADS" in m.text]
    new = [m for m in tune_model(PCIE, settings_from({"NCCL_NTHREADS": "1024"}, "2.27.3")).messages
           if "Invalid NCCL_NTHREADS" in m.text]
    assert old and all(m.level == "WARN" and m.src == "graph/tuning.cc:22" for m in old)  # v2.26.6-1
    assert new and all(m.level == "INFO" and m.subsys == ("GRAPH", "ENV") for m in new)  # v2.27.3-1
    assert old[0].text == new[0].text == "Invalid NCCL_NTHREADS 1024 (maximum 512)."
