"""Helpers for the tests and benchmarks: counting kernel ops and host reads of a step."""
