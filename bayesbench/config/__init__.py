"""Experiment configuration: named presets (data) and the jobs they expand into."""

from .job import Job, job_cost, make_jobs, record, resolve_device, run_job, run_jobs
from .presets import PRESETS, Preset, TaskSetup, get_preset

__all__ = ["PRESETS", "Job", "Preset", "TaskSetup", "get_preset", "make_jobs", "record", "resolve_device", "run_job", "run_jobs", "job_cost"]
