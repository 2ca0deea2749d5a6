"""Wind tunnels from outside the package (tasks/outside.py) and the checks every one gets before
training (tasks/check.py), on a tunnel written as a user would (tests/outside_tunnel.py) and on
broken variants of it, each caught with a line naming the rule."""

from __future__ import annotations

import dataclasses
import os
import pickle

import pytest
import torch
from outside_tunnel import CoinTask
from rundirs import run_dirs

from bayesbench.cli import main
from bayesbench.tasks import Batch, get_task, outside_task, task_from_config
from bayesbench.tasks.check import check_task

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILE = os.path.join(HERE, "outside_tunnel.py") + ":build"


def test_an_outside_tunnel_by_file_or_module_is_checked_and_round_trips():
    by_file, by_module = outside_task(FILE, {"L": 6}), outside_task("outside_tunnel:build", {"L": 6})
    for task in (by_file, by_module):
        assert (task.name, task.vocab_size, task.num_classes, task.seq_len) == ("coin", 2, 2, 6)
        assert task.describe() == "coin(L=6, wrong=False)" and task.L == 6
        lines = check_task(task)
        assert any("brute-force enumeration" in line for line in lines)
        assert task_from_config(task.config()) == task  # how a worker process or `eval` rebuilds it
        assert pickle.loads(pickle.dumps(task)) == task
    assert by_file.config() == {"task": "outside", "spec": FILE, "options": {"L": 6}}
    b = by_file.sample(4, torch.Generator().manual_seed(3))
    torch.testing.assert_close(b.posterior.double(), by_file.inner.brute_force_posterior(b), atol=1e-4, rtol=0)


def test_a_wrong_posterior_is_caught_by_the_sampler_checks():
    with pytest.raises(ValueError, match="the posterior disagrees with the sampler"):
        check_task(outside_task(FILE, {"L": 8, "wrong": True}))


@dataclasses.dataclass(frozen=True)
class Vague(CoinTask):
    """Calibrated but vaguer than Bayes: the uniform predictive. Only the enumeration catches it."""

    name = "vague-coin"

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        b = super().sample(batch_size, generator, device=device, dtype=dtype)
        return dataclasses.replace(b, posterior=torch.full_like(b.posterior, 0.5))


def test_a_calibrated_but_vague_posterior_is_caught_only_by_brute_force():
    with pytest.raises(ValueError, match="disagrees with brute_force_posterior"):
        check_task(Vague(L=6))
    plain = type("NoEnumeration", (Vague,), {"brute_force_posterior": None, "name": "plain-coin"})
    assert check_task(dataclasses.replace(plain(L=6)))  # passes: the sampler checks cannot tell (documented)


@dataclasses.dataclass(frozen=True)
class Broken(CoinTask):
    fault: str = "global-rng"
    name = "broken-coin"

    def sample(self, batch_size, generator=None, *, device=None, dtype=torch.float32) -> Batch:
        if self.fault == "global-rng":
            generator = None  # draws from torch's global RNG: not reproducible under a seed
        if self.fault == "same-every-time":
            generator = torch.Generator().manual_seed(0)
        b = super().sample(batch_size, generator, device=device, dtype=dtype)
        if self.fault == "unnormalised":
            b = dataclasses.replace(b, posterior=b.posterior * 1.5)
        if self.fault == "tokens-out-of-range":
            b = dataclasses.replace(b, tokens=b.tokens + 5)
        if self.fault == "short":
            b = dataclasses.replace(b, tokens=b.tokens[:, :-1])
        if self.fault == "one-sequence":
            b = b.map(lambda x: x[:1].expand(batch_size, *x.shape[1:]).contiguous())
        return b


@pytest.mark.parametrize("fault,rule", [
    ("global-rng", "not deterministic: the same generator seed gave different batches"),
    ("same-every-time", "ignores the generator: two seeds gave the same tokens"),
    ("unnormalised", "posterior must be a distribution over the 2 classes"),
    ("tokens-out-of-range", "tokens must lie in [0, vocab_size=2)"),
    ("short", "tokens must be long [B=512, L=6]"),
    ("one-sequence", "every sequence of a batch of 512 is the same"),
])
def test_each_broken_sampler_is_named_by_its_rule(fault, rule):
    with pytest.raises(ValueError, match=rule.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        check_task(Broken(L=6, fault=fault))


def test_bad_factories_are_one_clear_error(tmp_path):
    (tmp_path / "bad.py").write_text(
        "from outside_tunnel import CoinTask\n"
        "NOT_CALLABLE = 3\n"
        "def not_a_task(**o):\n    return 'coin'\n"
        "def raises(**o):\n    raise RuntimeError('no coins today')\n"
        "def clash(**o):\n    t = CoinTask()\n    object.__setattr__(t, 'name', 'hmm')\n    return t\n")
    base = str(tmp_path / "bad.py")
    for attr, rule in (("NOT_CALLABLE", "is a int, not a callable factory"),
                       ("not_a_task", "must return a bayesbench.tasks.Task"),
                       ("raises", "the factory raised RuntimeError: no coins today"),
                       ("clash", "its name 'hmm' is a built-in tunnel's"),
                       ("missing", "has no attribute 'missing'")):
        with pytest.raises(ValueError, match=rule):
            outside_task(f"{base}:{attr}")
    with pytest.raises(ValueError, match="must be 'package.module:factory' or './file.py:factory'"):
        outside_task("no-colon-here")
    with pytest.raises(ValueError, match="task option f=.*must be JSON values"):
        outside_task(FILE, {"f": object()})


FLAKY = """
import dataclasses
from outside_tunnel import CoinTask
from rundirs import run_dirs

@dataclasses.dataclass(frozen=True)
class Flaky(CoinTask):
    name = "flaky"

    def sample(self, batch_size, generator=None, **kw):
        if batch_size == 8 * 16:  # training's draws at batch 8 (16 batches a call); the checks draw 512
            raise RuntimeError("ran out of coins")
        return super().sample(batch_size, generator, **kw)

def build(**o):
    return Flaky(**o)
"""


def test_a_sampler_that_raises_mid_training_is_the_tunnels_error(tmp_path, capsys):
    """Probe case 75: past the checks, a tunnel whose sample() raised was an 'internal error' (exit
    1, the file not named); it is the user's code: one line naming the tunnel, exit 2."""
    (tmp_path / "flaky.py").write_text(FLAKY)
    spec = f"{tmp_path / 'flaky.py'}:build"
    task = outside_task(spec)
    check_task(task)
    with pytest.raises(ValueError, match=r"flaky.py:build': sample\(128\) raised RuntimeError: ran out of coins "
                                         r"\(an error in the tunnel's own code\)"):
        task.sample(128, torch.Generator().manual_seed(0))
    argv = ["train", "--task", spec, "--arch", "mlp", "--seeds", "0", "--steps", "4", "--eval-sequences", "16",
            "--train-args", "batch_size=8", "--no-curves", "--db", str(tmp_path / "r.sqlite"),
            "--runs-dir", str(tmp_path / "runs"), "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "flaky.py:build': sample(128) raised RuntimeError" in err[0], err
    assert "internal error" not in err[0]
    # issue 29, section 4: the run directory the failed job made, with nothing in it, was left behind
    (run_dir,) = run_dirs(argv)
    assert (tmp_path / "runs").exists() and not os.path.exists(run_dir)  # past the checks, training had begun
    # a run directory that was there before the job (someone else's files in it) is left as it was
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "notes.txt"), "w") as f:
        f.write("mine")
    assert main(argv) == 2
    assert os.listdir(run_dir) == ["notes.txt"]


LATER = """
import dataclasses
from outside_tunnel import CoinTask
from rundirs import run_dirs

CALLS = []

@dataclasses.dataclass(frozen=True)
class Later(CoinTask):
    name = "later"

    def sample(self, batch_size, generator=None, **kw):
        if batch_size == 8:  # training's draws (prefetch 1): the third one fails
            CALLS.append(batch_size)
            if len(CALLS) == 3:
                raise RuntimeError("ran out of coins")
        return super().sample(batch_size, generator, **kw)

def build(**o):
    return Later(**o)
"""


def test_a_run_that_failed_after_its_first_checkpoint_keeps_its_run_directory(tmp_path, capsys):
    """Only a run directory left without a checkpoint is removed: a later failure keeps what it saved."""
    (tmp_path / "later.py").write_text(LATER)
    argv = ["train", "--task", f"{tmp_path / 'later.py'}:build", "--arch", "mlp", "--seeds", "0", "--steps", "4",
            "--eval-sequences", "16", "--checkpoint-every", "1", "--train-args", "batch_size=8", "prefetch=1",
            "--no-curves", "--db", str(tmp_path / "r.sqlite"), "--runs-dir", str(tmp_path / "runs"), "--no-progress"]
    assert main(argv) == 2
    assert "ran out of coins" in capsys.readouterr().err
    (run_dir,) = run_dirs(argv)
    assert os.path.exists(os.path.join(run_dir, "checkpoint.pt"))


def test_the_built_in_tunnels_pass_the_same_checks():
    for name, config in (("bijection", {}), ("bijection", {"keys": "replacement", "query": True}), ("hmm", {}),
                         ("sticky", {}), ("markov", {})):
        assert len(check_task(get_task(name, **config), sequences=256)) >= 5


def test_the_tasks_command_lists_floors_and_checks_a_tunnel(capsys):
    assert main(["tasks", "--preset", "quick", "--sequences", "128"]) == 0
    out = capsys.readouterr().out
    assert "bijection V=8 L=7 repl" in out and "values: uniform floor" in out and "K=50: uniform floor" in out
    assert main(["tasks", "--check", FILE, "--task-args", "L=5", "--sequences", "128"]) == 0
    out = capsys.readouterr().out
    assert "coin(L=5, wrong=False)" in out and "ok: posterior = brute-force enumeration" in out
    assert main(["tasks", "--check", FILE, "--task-args", "L=5", "wrong=true"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bayesbench tasks: task coin(L=5, wrong=True): the posterior disagrees") and \
        len(err.strip().splitlines()) == 1


def test_the_train_command_tasks_check_prints_runs_as_printed(tmp_path, capsys):
    """Probe case 68: for a file whose name holds spaces the printed command was not quoted, and it
    left out the --task-args the tunnel was checked with."""
    import shlex
    import shutil

    from bayesbench.store.database import read_records

    path = tmp_path / "my tunnel (v2).py"
    shutil.copy(os.path.join(HERE, "outside_tunnel.py"), path)
    assert main(["tasks", "--check", f"{path}:build", "--task-args", "L=5", "--sequences", "64"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    argv = shlex.split(line.removeprefix("Train it: ").removesuffix(" (docs/tasks.md)"))
    assert argv[:6] == ["bayesbench", "train", "--task", f"{path}:build", "--task-args", "L=5"], line
    db = str(tmp_path / "r.sqlite")
    assert main([*argv[1:], "--arch", "mlp", "--seeds", "0", "--steps", "2", "--eval-sequences", "16", "--no-curves",
                 "--db", db, "--runs-dir", str(tmp_path / "runs"), "--no-progress"]) == 0
    (record,) = read_records(db)
    assert record.task_label == "coin(L=5, wrong=False)"
