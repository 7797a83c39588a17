"""What NCCL does: its variables, their grammar and values by version, the choice model, the decode size, its log lines."""
