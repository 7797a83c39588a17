"""Statistics and verdicts: trial records to judgements against the baseline."""
