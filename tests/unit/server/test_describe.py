"""tuner.server.gpu.describe: the GPUs a server gets, as the trial records name them."""

from __future__ import annotations

from tuner.server import gpu

UUIDS = [f"GPU-{i}aaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee" for i in range(8)]


def test_cuda_visible_devices_narrows_the_gpus_by_index_or_uuid():
    assert gpu._selected(8, UUIDS, None) == list(range(8))
    assert gpu._selected(8, UUIDS, "4,5,6,7") == [4, 5, 6, 7]
    assert gpu._selected(8, UUIDS, "GPU-2aaaaaaa,3aaaaaaa") == [2, 3]
    assert gpu._selected(8, UUIDS, "") == []
    # a value naming a GPU that is not there: the machine's count rather than a guess
    assert gpu._selected(8, UUIDS, "9") == list(range(8))


def test_a_machine_without_nvml_says_so():
    found = gpu.describe("0")
    if found["gpu"] == gpu.NO_GPU:
        assert found == {"gpu": gpu.NO_GPU, "gpu_count": 0, "driver": ""}
    else:  # a machine with NVIDIA GPUs: what NVML names
        assert found["gpu_count"] == 1 and found["driver"]
