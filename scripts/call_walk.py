"""Walk the calls a bayesbench command makes inside the package and count how often it goes back.

    python scripts/call_walk.py [--worker] -- run --tasks bijection --archs transformer --jobs 1 ...

Traces every call and return between functions of `bayesbench/` while the command runs in this
process (give `--jobs 1`, so the job trains here). Without --worker the walk is the front end and
engine side: from the command's handler (`cli/run.py:cmd_run`, or `--start FILE:FUNCTION`; the
parsing of the command line before it is not walked) until the first call of the worker's entry
(`sweep/one_job.py:train_and_score`, or `--entry FILE:FUNCTION`). With --worker it is that call
alone, until it returns. What the walk does not follow:

- module bodies, and every call made while a module is being imported;
- inside a call from the shell into the core or the leaves (layers below): that call is one stop,
  so the walk counts how control moves through the shell, not through a model's forward pass;
- a function called again: it is followed the first time only, as a reader follows it once.

It prints its counts over the walk's sequence of files (consecutive events in one file are one
stop; `--stops` prints the sequence, `--climbs` the climbs, `--files` the files):

- files: distinct package files the walk stops in;
- climbs: distinct call edges from a function of a lower layer into one of a higher layer
  (layers, top down: front ends `cli/`, `api.py`; the engine `sweep/`; the shell `store/`,
  `report/`, `running/`, `presets.py`, `data/`; the core `training/`, `scoring/`; the leaves
  `models/`, `tasks/`, `oracle/`, `kernels/` and the top-level helpers), e.g. the engine calling
  back into `cli/`;
- returns: stops in a file the walk had already stopped in and left;
- returns to the front end: stops in `cli/` or `api.py` right after a stop below them, once the
  walk has first gone below (a callback, or control handed back and forth).

Used for issue 40's before/after numbers; the counts depend on the command, so compare two
checkouts with the same command.
"""

from __future__ import annotations

import os
import sys

LAYERS = (("cli/", 0), ("api.py", 0), ("sweep/", 1), ("store/", 2), ("report/", 2), ("running/", 2),
          ("presets.py", 2), ("data/", 2), ("training/", 3), ("scoring/", 3))


def layer(rel: str) -> int:
    for prefix, rank in LAYERS:
        if rel.startswith(prefix):
            return rank
    return 4


def main(argv: list[str]) -> int:
    own = argv[: argv.index("--")] if "--" in argv else []
    command = argv[argv.index("--") + 1:] if "--" in argv else argv
    worker = "--worker" in own
    entry = own[own.index("--entry") + 1] if "--entry" in own else "sweep/one_job.py:train_and_score"
    entry_file, entry_function = entry.split(":")
    start = own[own.index("--start") + 1] if "--start" in own else "cli/run.py:cmd_run"
    start_file, start_function = start.split(":")
    import bayesbench
    from bayesbench.cli import main as cli_main

    root = os.path.dirname(os.path.abspath(bayesbench.__file__)) + os.sep
    stops: list[str] = []
    climbs = 0
    state: dict = {"on": False, "done": False, "entry": None, "sunk": None, "modules": 0}
    followed: set = set()
    up: set = set()
    edges: list[str] = []

    def rel(frame) -> str | None:
        path = frame.f_code.co_filename
        if not path.startswith(root) or frame.f_code.co_name == "<module>":
            return None
        return path[len(root):]

    def caller_of(frame):
        frame = frame.f_back
        while frame is not None and rel(frame) is None:
            frame = frame.f_back
        return frame

    def modules_below(frame) -> int:
        count = 0
        while frame is not None:
            count += frame.f_code.co_name == "<module>"
            frame = frame.f_back
        return count

    def importing(frame) -> bool:
        return modules_below(frame) > state["modules"]

    def stop(name: str) -> None:
        if not stops or stops[-1] != name:
            stops.append(name)

    def tracer(frame, event, arg):
        nonlocal climbs
        if state["done"] or event not in ("call", "return"):
            return tracer
        if state["sunk"] is not None:  # inside a call into the core: only its return matters
            if event == "return" and frame is state["sunk"]:
                state["sunk"] = None
                caller = caller_of(frame)
                if caller is not None:
                    stop(rel(caller))
            return tracer
        here = rel(frame)
        if here is None:
            return tracer
        if state["on"] and importing(frame):  # module bodies run by an import: not the command's walk
            return tracer
        if event == "call" and here == entry_file and frame.f_code.co_name == entry_function \
                and state["entry"] is None:
            if not worker:
                state["done"] = True
                return None
            state["on"], state["entry"] = True, frame
            state["modules"] = modules_below(frame)
            stop(here)
            return tracer
        if not state["on"] and not worker and event == "call" and here == start_file \
                and frame.f_code.co_name == start_function:
            state["on"] = True  # the command's handler: the command line is parsed
            state["modules"] = modules_below(frame)
        if not state["on"]:
            return tracer
        caller = caller_of(frame)
        if event == "call":
            if caller is not None and layer(here) < layer(rel(caller)) and (caller.f_code, frame.f_code) not in up:
                up.add((caller.f_code, frame.f_code))  # a callback into a higher layer, counted once per edge
                edges.append(f"{rel(caller)}:{caller.f_code.co_name} -> {here}:{frame.f_code.co_name}")
                climbs += 1
            if frame.f_code in followed:  # read once already
                state["sunk"] = frame
                return tracer
            followed.add(frame.f_code)
            stop(here)
            if layer(here) >= 3 and (caller is None or layer(rel(caller)) <= 2):
                state["sunk"] = frame
        else:
            if worker and frame is state["entry"]:
                state["done"] = True
                return tracer
            if caller is not None:
                stop(rel(caller))
        return tracer

    sys.settrace(tracer)
    try:
        cli_main(command)
    except SystemExit:
        pass
    finally:
        sys.settrace(None)
    seen: set[str] = set()
    returns = 0
    for name in stops:
        if name in seen:
            returns += 1
        seen.add(name)
    side = "worker (sweep/one_job.py)" if worker else "front end and engine (until sweep/one_job.py)"
    shell = sorted(name for name in seen if layer(name) <= 2)
    # back in the front end: a stop in cli/ or api.py after the walk had gone below it
    below = [i for i, name in enumerate(stops) if layer(name) > 0]
    back = sum(1 for i in range(below[0] + 1, len(stops)) if layer(stops[i]) == 0 and layer(stops[i - 1]) > 0) \
        if below else 0
    print(f"walk of `bayesbench {' '.join(command)}`, {side}: {len(seen)} files ({len(shell)} of them front end, "
          f"engine and shell), {climbs} climbs, {returns} returns to a file it had left, {back} returns to the front "
          f"end, {len(stops)} stops",
          file=sys.stderr)
    if "--stops" in own:
        print("  " + " > ".join(stops), file=sys.stderr)
    if "--climbs" in own:
        for edge in edges:
            print(f"  climb {edge}", file=sys.stderr)
    if "--files" in own:
        for name in sorted(seen, key=lambda n: (layer(n), n)):
            print(f"  {layer(name)} {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
