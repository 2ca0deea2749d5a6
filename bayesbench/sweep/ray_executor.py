"""The Ray executor: one Ray task per job, with the job's CPUs and (fractional) GPUs.

Ray is an optional extra (`pip install 'bayesbench[ray]'`); asking for it without it installed
is a clear error. Ray retries a task whose worker process or node died (`max_retries`, system
failures only; a job that raises is not retried: the same config would raise again), and the
retried task resumes from the job's last checkpoint in the shared runs directory. Progress
comes back through a Ray queue; results come back as the tasks' return values, and the driver
alone writes them to the store.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from collections.abc import Callable

from .events import Failed, Finished, JobEvent, Retried, Started
from .expand import SweepJob, gpu_share
from .one_job import train_and_score
from .request import FieldError
from .sweep_file import Resources

MISSING = ("{ray} needs Ray, which is not installed: pip install 'bayesbench[ray]' (or pip install ray) "
           "on the driver and on every node of the cluster")
NO_TOKEN = ("the Ray cluster at {address} uses token authentication and this process has no valid token: copy "
            "the head node's ~/.ray/auth_token to this machine (or set RAY_AUTH_TOKEN, with RAY_AUTH_MODE=token) "
            "and run the same command again (docs/sweeps.md)")


@contextlib.contextmanager
def _stderr_captured():
    """Ray's C++ core writes its connection retries to file descriptor 2 directly (one line a
    second, about twenty before it gives up): keep them in a temporary file for the block, and
    yield a function that reads what was written there."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield lambda: (log.seek(0), log.read().decode(errors="replace"))[1]
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def import_ray():
    """The `ray` module, or a FieldError (about the `ray` setting) saying how to install it."""
    try:
        import ray
    except ImportError:
        raise FieldError("ray", MISSING) from None
    return ray


def _ray_job(sweep_job: SweepJob, runs_dir: str, threads: int, events) -> Finished:
    def send(event: JobEvent) -> None:
        events.put(event)

    return train_and_score(sweep_job, runs_dir, threads, send)


class RayExecutor:
    """Submit jobs to a Ray cluster: `address` is "auto" (the running cluster this machine
    belongs to), "local" (start a private one-machine Ray) or a cluster address (host:port,
    ray://host:10001)."""

    name = "Ray"

    def __init__(self, address: str, resources: Resources, max_retries: int = 2) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        ray = import_ray()
        self.ray, self.resources, self.max_retries = ray, resources, max_retries
        self.started = False
        if not ray.is_initialized():
            with _stderr_captured() as said:
                try:
                    if address == "local":
                        ray.init(include_dashboard=False, logging_level=logging.WARNING)
                    else:
                        ray.init(address=address, logging_level=logging.WARNING)
                    error = None
                except (ConnectionError, RuntimeError, ValueError) as err:
                    error = err
                log = said()
            if error is not None:
                if "InvalidAuthToken" in log or "InvalidAuthToken" in str(error):
                    raise FieldError("ray", f"{{ray}} {address}: " + NO_TOKEN.format(address=address)) from None
                raise FieldError("ray", f"{{ray}} {address}: cannot connect to a Ray cluster ({error}); start one with "
                                 "`ray start --head` (docs/sweeps.md) or use {ray} local") from None
            sys.stderr.write(log)  # a connection that worked: Ray's own notes, as it printed them
            self.started = True

    def gpus(self) -> float:
        """GPUs in the cluster (for device "auto")."""
        return float(self.ray.cluster_resources().get("GPU", 0))

    def describe(self) -> str:
        res = self.ray.cluster_resources()
        return (f"Ray cluster: {len(self.ray.nodes())} node(s), {res.get('CPU', 0):g} CPUs, {res.get('GPU', 0):g} "
                f"GPUs; {self.resources.cpus} CPU(s) per job, up to {self.max_retries} retries")

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()

    def run(self, jobs: list[SweepJob], runs_dir: str, on_event: Callable[[JobEvent], None],
            cache_dir: str | None = None) -> None:
        """Run every job as a Ray task; events as LocalExecutor.run (a second `Started` of a job
        means Ray retried it: reported as `Retried`). Evaluation sets are cached under the shared
        `runs_dir` (`cache_dir`, beside the driver's store, may not exist on other nodes)."""
        ray = self.ray
        from ray.util.queue import Empty, Queue

        events = Queue(actor_options={"num_cpus": 0})
        task = ray.remote(_ray_job)
        refs = {}
        for sweep_job in sorted(jobs, key=lambda sweep_job: -sweep_job.flops):
            options = task.options(num_cpus=self.resources.cpus, num_gpus=gpu_share(sweep_job, self.resources),
                                   max_retries=self.max_retries, retry_exceptions=False,
                                   name=f"bayesbench:{sweep_job.key}")
            ref = options.remote(sweep_job, runs_dir, self.resources.cpus, events)
            refs[ref] = sweep_job
        starts: dict[str, int] = {}

        def drain() -> None:
            while True:
                try:
                    event = events.get_nowait()
                except Empty:
                    return
                if isinstance(event, Started):
                    starts[event.key] = starts.get(event.key, 0) + 1
                    if starts[event.key] > 1:
                        on_event(Retried(event.key, starts[event.key], "Ray restarted it after its worker died"))
                on_event(event)

        try:
            while refs:
                ready, _ = ray.wait(list(refs), num_returns=1, timeout=0.2)
                drain()
                for ref in ready:
                    sweep_job = refs.pop(ref)
                    try:
                        out = ray.get(ref)
                    except ray.exceptions.RayTaskError as err:  # the job raised
                        cause = err.cause if getattr(err, "cause", None) is not None else err
                        on_event(Failed(sweep_job.key, f"{type(cause).__name__}: {cause}",
                                        cause if isinstance(cause, Exception) else None))
                    except ray.exceptions.RayError as err:  # worker or node lost, retries spent
                        on_event(Failed(sweep_job.key, f"{type(err).__name__} after {self.max_retries} retries: {err}"))
                    else:
                        on_event(out)
            drain()
        finally:
            for ref in refs:
                ray.cancel(ref, force=True)
            ray.kill(events.actor)


def connect(address: str, resources: Resources, max_retries: int) -> tuple[RayExecutor, Callable[[str], str]]:
    """(executor, place): a Ray executor on the cluster at `address`, and where a job's device goes
    there: 'auto' to the cluster's GPUs when it has any, else the CPU."""
    executor = RayExecutor(address, resources, max_retries)
    gpus = executor.gpus()
    return executor, lambda d: ("cuda" if gpus > 0 else "cpu") if d == "auto" else d


def on_ray(address: str, resources: Resources, max_retries: int,
           select: Callable[[Callable[[str], str]], list]) -> tuple[RayExecutor, list]:
    """(executor, jobs): a Ray executor on the cluster at `address`, and the jobs `select(place)`
    makes, where `place` sends device 'auto' to the cluster's GPUs when it has any (the executor
    is closed again if selecting fails)."""
    executor, place = connect(address, resources, max_retries)
    try:
        return executor, select(place)
    except BaseException:
        executor.close()
        raise
