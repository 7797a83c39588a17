"""Measuring a running server: the single-stream probe and the concurrency table."""
