"""``nccl-tune diagnose``: one launch with NCCL's TUNING log, and what NCCL chose per allreduce size.

One extra launch of the server under the sweep's untuned baseline environment (inherited
``NCCL_*``/CUDA_DEVICE_MAX_CONNECTIONS removed, ``server.env`` applied: :func:`tuner.server.build_env`)
plus ``NCCL_DEBUG=INFO`` and ``NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,TUNING``; a short probe (a few
streamed completions of the configured prompt); teardown. From the server log
(:func:`tuner.nccl.log.parse_log`):

* the NCCL version, ranks, topology, channels, the variables NCCL echoed, its WARNs;
* the backend carrying the decode allreduce (:func:`tuner.servers.backend.allreduce_backend`);
* NCCL's TUNING table for AllReduce (latency in us, bandwidth in GB/s per algorithm x protocol,
  src/graph/tuning.cc ncclTopoTuneModel);
* per collective size, the algorithm, protocol and channels NCCL logged (per-operation lines of
  src/enqueue.cc, deduplicated by size, with the count of calls), decode and prefill sizes marked.

The decode size comes from the model's config.json, else from the log (the rules:
:mod:`tuner.diagnose.analysis`). Results go to ``results/<study>/diagnose.md`` and
``diagnose.json`` (:meth:`Diagnosis.to_json`), the server log to ``results/<study>/logs/diagnose.log``.
A later sweep of the same study reads them with :func:`load_diagnosis` and :func:`decode_pick`.

Leaves: ``model`` (the dataclasses, ``diagnose.json``), ``analysis`` (a log -> a Diagnosis),
``render`` (console tables, markdown), ``store`` (the files), ``launch`` (the launch: :func:`run`), ``debug``
(what a launch asks NCCL to log, for the sweep's launches too).
"""

from tuner.diagnose.debug import DEBUG_ENV, LOGGING_ENV
from tuner.diagnose.launch import check_inputs, model_decode_size, run
from tuner.diagnose.model import DecodeInfo, Diagnosis, SizeRow, TuningRow, decode_pick
from tuner.diagnose.render import print_diagnosis
from tuner.diagnose.store import JSON_NAME, load_diagnosis, write_diagnosis

__all__ = [
    "DEBUG_ENV",
    "JSON_NAME",
    "LOGGING_ENV",
    "DecodeInfo",
    "Diagnosis",
    "SizeRow",
    "TuningRow",
    "check_inputs",
    "decode_pick",
    "load_diagnosis",
    "model_decode_size",
    "print_diagnosis",
    "run",
    "write_diagnosis",
]
