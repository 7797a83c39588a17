"""One inference-server launch: process, ports, readiness, teardown, log tail, GPUs, signals, pre-launch checks."""
