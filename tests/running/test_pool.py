"""bayesbench.running.pool and bayesbench.running.interrupt with toy jobs (no torch in the workers, so each
test takes about a second): results in order, a failing job, a dying worker, and a stop
request that reaches every worker, which finishes its step and reports where it stopped."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from bayesbench.running import interrupt
from bayesbench.running.pool import WorkerDied, report, run_parallel

# ---------------------------------------------------------------- toy jobs (module level: spawn pickles them)


def _square(item: int, slot: int) -> int:
    return item * item


def _fail_on_three(item: int, slot: int) -> int:
    if item == 3:
        raise ValueError("job three is bad")
    time.sleep(0.2)
    return item


def _die_on_two(item: int, slot: int) -> int:
    if item == 2:
        os._exit(3)
    return item


def _chatty(item: int, slot: int) -> int:
    """Reports its item twice while it runs, then fails on 3."""
    report(("begin", item))
    report(("half", item))
    if item == 3:
        raise ValueError("job three is bad")
    return item * 10


def _die_first_time(item: tuple[str, int], slot: int) -> int:
    """Dies (exit 5) the first time it runs item 2, and always on item 4; it marks its attempts
    with files in `item[0]`."""
    folder, item = item
    mark = os.path.join(folder, f"{item}.tried")
    if item == 4 or (item == 2 and not os.path.exists(mark)):
        open(mark, "a").close()
        os._exit(5)
    return item


def _steps(item: tuple[str, int], slot: int) -> int:
    """A 'training loop' of 0.05 s steps that honours a stop request between steps; it creates
    the file `item[0]` + its number when it starts, once its stop requests are deferred (created
    before, a signal sent on a loaded machine could land between the two and stop the job before
    its loop, which the pool then reports by its item: a race of the test, seen once under load)."""
    folder, item = item
    step = 0
    with interrupt.deferred():
        open(os.path.join(folder, str(item)), "w").close()
        while step < 2000:
            time.sleep(0.05)
            step += 1
            if interrupt.requested():
                stop = interrupt.Interrupted(interrupt.requested())
                stop.stopped.append({"run": f"toy {item}", "phase": "training", "step": step, "steps": 2000,
                                     "checkpoint": None})
                raise stop
    return step


def _deaf(item: tuple[str, int], slot: int) -> int:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a worker that will not stop by itself
    open(os.path.join(item[0], str(item[1])), "w").close()
    time.sleep(60)
    return item[1]


def _no_workers_left(timeout: float = 5.0) -> bool:
    """The pool's workers are gone (the resource tracker, a child too, is not a worker)."""
    import multiprocessing

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not multiprocessing.active_children():
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------- tests


def test_results_in_job_order_and_each_reported_once():
    seen = []
    out = run_parallel(_square, [1, 2, 3, 4, 5], workers=2, order=[4, 3, 2, 1, 0],
                       on_result=lambda i, v: seen.append((i, v)))
    assert out == [1, 4, 9, 16, 25]
    assert sorted(seen) == [(0, 1), (1, 4), (2, 9), (3, 16), (4, 25)]
    assert _no_workers_left()


def test_a_failing_job_raises_its_error_and_stops_the_others():
    with pytest.raises(ValueError, match="job three is bad"):
        run_parallel(_fail_on_three, [1, 2, 3, 4, 5, 6], workers=2, grace_s=2.0)
    assert _no_workers_left()


def test_a_dying_worker_is_named_with_its_job():
    with pytest.raises(WorkerDied, match=r"running job 2 ended without a result \(exit code 3\)"):
        run_parallel(_die_on_two, [1, 2, 3], workers=2, describe=lambda x: f"job {x}")
    assert _no_workers_left()


def test_events_arrive_while_jobs_run_and_with_on_error_a_failure_does_not_stop_the_others():
    events, errors, results = [], [], []
    out = run_parallel(_chatty, [1, 2, 3, 4, 5], workers=2, on_event=lambda i, e: events.append((i, e)),
                       on_error=lambda i, err: errors.append((i, str(err))),
                       on_result=lambda i, v: results.append((i, v)))
    assert out == [10, 20, None, 40, 50]
    assert errors == [(2, "job three is bad")] and sorted(results) == [(0, 10), (1, 20), (3, 40), (4, 50)]
    assert sorted(events) == sorted((i, (kind, i + 1)) for i in range(5) for kind in ("begin", "half"))
    for i in range(5):  # each job's events in the order it sent them, before its result
        assert [e for j, (e, _) in events if j == i] == ["begin", "half"]
    report("outside a worker: ignored")
    assert _no_workers_left()


def test_with_on_died_a_dead_worker_is_replaced_and_its_job_retried_when_asked(tmp_path):
    asked = []

    def died(i: int, why: str) -> bool:
        asked.append((i, why))
        return i == 1  # retry job 2 (index 1), give up on job 4

    out = run_parallel(_die_first_time, [(str(tmp_path), n) for n in (1, 2, 3, 4, 5)], workers=2, on_died=died)
    assert out == [1, 2, 3, None, 5]
    assert sorted(asked) == [(1, "exit code 5"), (3, "exit code 5")]
    assert _no_workers_left()


def _finish_anyway(item: tuple[str, int], slot: int) -> int:
    """A job whose last step (0.5 s, after it creates the file `item[0]` + its number) a stop
    request waits for; it then returns its item: it finished."""
    folder, item = item
    with interrupt.deferred():
        open(os.path.join(folder, str(item)), "w").close()
        time.sleep(0.5)
    return item


def _signal_when(paths: list[str], sig: int, sent: list[float]) -> None:
    """From a thread: once every path exists, send `sig` to this process (its main thread)."""
    while not all(os.path.exists(p) for p in paths):
        time.sleep(0.02)
    time.sleep(0.2)
    sent.append(time.monotonic())
    os.kill(os.getpid(), sig)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_request_stops_every_worker_at_a_step(sig, tmp_path):
    sent: list[float] = []
    timer = threading.Thread(target=_signal_when, args=([str(tmp_path / "10"), str(tmp_path / "20")], sig, sent))
    before = signal.getsignal(signal.SIGINT)  # Python's default, or SIG_IGN when pytest was started with it ignored
    with interrupt.handling(), pytest.raises(interrupt.Interrupted) as info:
        timer.start()
        run_parallel(_steps, [(str(tmp_path), 10), (str(tmp_path), 20), (str(tmp_path), 30)], workers=2,
                     grace_s=5.0)
    took = time.monotonic() - sent[0]
    stop = info.value
    assert stop.signame == sig.name and stop.exit_code == 128 + sig
    assert sorted(s["run"] for s in stop.stopped) == ["toy 10", "toy 20"]  # the two running jobs
    assert all(s["phase"] == "training" and 1 <= s["step"] < 2000 for s in stop.stopped)
    assert stop.finished == 0 and stop.not_started == 1
    assert took < 4.0, f"stopping took {took:.1f} s"
    assert _no_workers_left()
    assert signal.getsignal(signal.SIGINT) is before  # handlers restored


def test_a_job_that_finishes_while_the_pool_stops_is_handed_over_not_lost(tmp_path):
    """A job that ends within the grace period after a stop request is a result: `on_result`
    gets it (the sweep driver stores it) and it counts as finished, not as stopped."""
    sent: list[float] = []
    seen: list[tuple[int, int]] = []
    timer = threading.Thread(target=_signal_when, args=([str(tmp_path / "7")], signal.SIGINT, sent))
    with interrupt.handling(), pytest.raises(interrupt.Interrupted) as info:
        timer.start()
        run_parallel(_finish_anyway, [(str(tmp_path), 7), (str(tmp_path), 8)], workers=1, grace_s=5.0,
                     on_result=lambda i, v: seen.append((i, v)))
    assert seen == [(0, 7)] and info.value.stopped == []
    assert info.value.finished == 1 and info.value.not_started == 1
    assert _no_workers_left()


def test_a_worker_that_ignores_the_request_is_killed_after_the_grace_period(tmp_path):
    sent: list[float] = []
    timer = threading.Thread(target=_signal_when, args=([str(tmp_path / "1")], signal.SIGTERM, sent))
    with interrupt.handling(), pytest.raises(interrupt.Interrupted) as info:
        timer.start()
        run_parallel(_deaf, [(str(tmp_path), 1)], workers=1, grace_s=0.5, describe=lambda x: f"deaf {x[1]}")
    assert time.monotonic() - sent[0] < 3.0
    [entry] = info.value.stopped
    assert entry["run"] == "deaf 1" and entry["phase"] == "killed" and "killed" in entry["why"]
    assert _no_workers_left()


def test_deferred_requests_wait_for_the_safe_point_and_a_second_one_does_not():
    with interrupt.handling():
        with interrupt.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler has run: recorded, not raised
            assert interrupt.requested() == "SIGINT"
            with pytest.raises(interrupt.Interrupted):
                os.kill(os.getpid(), signal.SIGINT)  # asked twice: at once
                time.sleep(1.0)
        interrupt.reset()
        with pytest.raises(interrupt.Interrupted) as info:
            os.kill(os.getpid(), signal.SIGTERM)  # outside deferred work: at once
            time.sleep(1.0)
        assert info.value.signame == "SIGTERM"
