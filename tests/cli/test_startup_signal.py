"""A signal while the `bayesbench` program is still starting (issue 29, section 5): SIGINT about
0.35 s into `export --format csv` printed a raw KeyboardInterrupt traceback from the imports of
bayesbench/cli/__init__.py. At every moment of start-up the answer is the one clean line and exit
130 (143 for SIGTERM), by the console script and by `python -m bayesbench.cli`.

No timing guesses: a `sitecustomize` on PYTHONPATH (imported by Python before the program) holds
the program inside the import of a chosen module, says so on stderr, and the test sends the
signal only then; the program is certainly at that point of its start-up when the signal lands.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

HOLD = textwrap.dedent('''
    import os, sys, time

    class _Hold:  # pauses the import of $BAYESBENCH_TEST_HOLD_AT (a test hook of this file only)
        def find_spec(self, name, path=None, target=None):
            if name == os.environ.get("BAYESBENCH_TEST_HOLD_AT"):
                sys.stderr.write("HOLDING " + name + "\\n")
                sys.stderr.flush()
                time.sleep(60)
            return None

    sys.meta_path.insert(0, _Hold())
''')

SCRIPT = os.path.join(os.path.dirname(sys.executable), "bayesbench")
# where the program is when the signal lands, in the order it gets there: importing the command
# modules (the first and the last), then building the parser (the presets; the store's modules, which
# import csv), before the command's own handling of a stop begins
POINTS = ["bayesbench.cli.cases", "bayesbench.cli.tunnels", "bayesbench.presets", "csv"]


def _sigint_default() -> None:
    """In the child before it starts: SIGINT as a terminal would deliver it. A process started in
    the background by a non-interactive shell (`pytest ... &`, nohup) inherits SIGINT ignored, and
    the program rightly keeps an inherited SIG_IGN (the last test), so the child starts from the
    default whatever started pytest."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run_held(tmp_path, entry: str, module: str, sig: int) -> tuple[int, str]:
    (tmp_path / "sitecustomize.py").write_text(HOLD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
           "BAYESBENCH_TEST_HOLD_AT": module, "PYTHONUNBUFFERED": "1"}
    env.pop("BAYESBENCH_DEBUG", None)
    head = [SCRIPT] if entry == "script" else [sys.executable, "-m", "bayesbench.cli"]
    proc = subprocess.Popen([*head, "export", "--format", "csv", "--db", str(tmp_path / "r.sqlite")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=str(tmp_path), preexec_fn=_sigint_default)
    try:
        first = proc.stderr.readline()
        assert first == f"HOLDING {module}\n", first + proc.stderr.read()
        proc.send_signal(sig)
        err = proc.stderr.read()
        return proc.wait(timeout=60), err
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("entry", ["script", "module"])
@pytest.mark.parametrize("module", POINTS)
def test_sigint_at_any_moment_of_start_up_is_one_clean_line(tmp_path, entry, module):
    if entry == "script" and not os.path.exists(SCRIPT):
        pytest.skip("no console script beside this Python (not installed with pip)")
    code, err = _run_held(tmp_path, entry, module, signal.SIGINT)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 130, (code, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert len(lines) == 1 and lines[0].startswith("bayesbench export: interrupted by SIGINT"), err


def test_sigterm_while_starting_is_one_clean_line_too(tmp_path):
    code, err = _run_held(tmp_path, "module", "bayesbench.cli.cases", signal.SIGTERM)
    assert code == 143 and err.strip().startswith("bayesbench export: interrupted by SIGTERM") and \
        len(err.strip().splitlines()) == 1, (code, err)


def test_the_guard_is_the_programs_alone_and_keeps_an_ignored_signal_ignored():
    """Importing the CLI in Python (a test, a notebook) leaves Python's SIGINT handling as it is; in the
    program a signal it was started with ignored (a worker's SIGINT) stays ignored; a command hands the
    signals back when it starts."""
    untouched = ("import signal; before = signal.getsignal(signal.SIGINT); import bayesbench.cli; "
                 "from bayesbench.running import interrupt; "
                 "now = signal.getsignal(signal.SIGINT); "
                 "print(interrupt.is_program(), now is before is signal.default_int_handler)")
    done = subprocess.run([sys.executable, "-c", untouched], capture_output=True, text=True, timeout=60,
                          preexec_fn=_sigint_default)
    assert done.stdout.strip() == "False True", (done.stdout, done.stderr)
    probe = ("import signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN if sys.argv[1] == 'ign' else "
             "signal.default_int_handler); sys.argv[0] = '-m'; "
             "now = lambda: getattr(signal.getsignal(signal.SIGINT), '__name__', 'ignored'); "
             "import bayesbench.cli; from bayesbench.running import interrupt; before = now(); "
             "interrupt.startup_done(); print(before, now())")
    for how, want in (("ign", "ignored ignored"), ("default", "_startup_handler default_int_handler")):
        done = subprocess.run([sys.executable, "-c", probe, how], capture_output=True, text=True, timeout=60)
        assert done.stdout.strip() == want, (how, done.stdout, done.stderr)
