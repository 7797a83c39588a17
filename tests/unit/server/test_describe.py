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


def test_a_machine_without_nvml_says_so(nvml):
    nvml(None)
    assert gpu.describe("0") == {"gpu": gpu.NO_GPU, "gpu_count": 0, "driver": ""}
    assert gpu.used_bytes() is None and gpu.count() is None and gpu.wait_released(None) is None


def test_the_gpus_a_server_gets_as_nvml_names_them(nvml):
    nvml(["NVIDIA H100 80GB HBM3"] * 6 + ["NVIDIA A100-SXM4-80GB"] * 2, driver="550.54.15")
    assert gpu.describe(None) == {"gpu": "NVIDIA H100 80GB HBM3 + NVIDIA A100-SXM4-80GB", "gpu_count": 8,
                                  "driver": "550.54.15"}
    assert gpu.describe("6,7") == {"gpu": "NVIDIA A100-SXM4-80GB", "gpu_count": 2, "driver": "550.54.15"}
    assert gpu.describe("GPU-0aaaaaaa") == {"gpu": "NVIDIA H100 80GB HBM3", "gpu_count": 1, "driver": "550.54.15"}
    assert gpu.count() == 8
