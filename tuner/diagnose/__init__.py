"""`nccl-tune diagnose`: one instrumented launch, what NCCL chose at each size."""
