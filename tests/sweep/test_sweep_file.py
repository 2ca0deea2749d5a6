"""Sweep files: parsing, expansion into jobs with stable keys, and the errors a bad file gives
(before anything runs). No training here; see test_sweep_local.py and test_sweep_ray.py."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from bayesbench.cli import main
from bayesbench.sweep import expand, load_sweep

GRID = """
name = "grid"
preset = "quick"
tasks = ["bijection", "sticky"]
archs = ["transformer", "mlp"]
lrs = [1e-3, 3e-4]
seeds = [0, 1, 2, 3]
ensemble = 2
steps = 30
eval_sequences = 64

[sizes.small]
transformer = {n_layer = 1, n_head = 2, d_model = 32, d_ffn = 64}

[sizes.quick]
"""


def _utf16(path, text: str) -> str:
    path.write_text(text, encoding="utf-16")
    return str(path)


def _write(tmp_path, text: str, name: str = "s.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_grid_expands_every_axis_with_stable_distinct_keys(tmp_path):
    spec = load_sweep(_write(tmp_path, GRID))
    jobs = expand(spec)
    # tasks x sizes x archs x lrs x seed groups
    assert len(jobs) == 2 * 2 * 2 * 2 * 2
    assert len({sj.key for sj in jobs}) == len(jobs)
    assert {sj.job.seeds for sj in jobs} == {(0, 1), (2, 3)}
    assert {sj.job.train.lr for sj in jobs} == {1e-3, 3e-4}
    small = [sj for sj in jobs if sj.size == "small" and sj.job.task_key == "bijection"]
    quick = [sj for sj in jobs if sj.size == "quick" and sj.job.task_key == "bijection"]
    t_small = next(sj for sj in small if sj.job.arch == "transformer")
    t_quick = next(sj for sj in quick if sj.job.arch == "transformer")
    assert t_small.job.model["d_model"] == 32 and t_quick.job.model["d_model"] == 64
    # the MLP is capacity-matched to the transformer of its own size
    m_small = next(sj for sj in small if sj.job.arch == "mlp")
    assert abs(m_small.job.params - t_small.job.params) / t_small.job.params < 0.01
    assert m_small.job.params < t_quick.job.params / 2
    # same file, same keys; a different setting, a different key
    assert [sj.key for sj in expand(load_sweep(_write(tmp_path, GRID, "again.toml")))] == [sj.key for sj in jobs]
    other = expand(load_sweep(_write(tmp_path, GRID.replace("steps = 30", "steps = 31"), "o.toml")))
    assert not {sj.key for sj in other} & {sj.key for sj in jobs}
    # checkpoint spacing changes no number: same keys
    ck = expand(load_sweep(_write(tmp_path, GRID.replace("steps = 30", "steps = 30\ncheckpoint_every = 7"), "c.toml")))
    assert [sj.key for sj in ck] == [sj.key for sj in jobs] and ck[0].checkpoint_every == 7
    # steps override keeps the warm-up a small fraction, as `bayesbench run --steps` does
    sticky = next(sj for sj in jobs if sj.job.task_key == "sticky")
    assert sticky.job.train.steps == 30 and sticky.job.train.warmup_steps == 0
    assert jobs[0].group_id == "sweep-grid" and jobs[0].flops > 0


def test_defaults_follow_the_preset(tmp_path):
    jobs = expand(load_sweep(_write(tmp_path, 'preset = "quick"\n', "quick.toml")))
    from bayesbench.sweep.jobs import make_jobs

    ref = make_jobs("quick")
    assert len(jobs) == len(ref)
    for sj, job in zip(jobs, ref):
        assert (sj.job.task_key, sj.job.arch, sj.job.seeds, sj.job.model) == \
            (job.task_key, job.arch, job.seeds, job.model)
        assert sj.job.train.steps == job.train.steps and sj.job.train.lr == job.train.lr
    assert jobs[0].checkpoint_every == jobs[0].job.train.steps // 10


def test_shipped_quick_sweep_is_the_quick_leaderboard():
    """sweeps/quick.toml and `bayesbench run --preset quick` expand into the same jobs: the same
    keys (so the same stored rows: either finds the other's results stored), run directories,
    checkpoint intervals and configurations, run by the same driver and worker."""
    from bayesbench.cli import build_parser
    from bayesbench.cli.run import jobs_of

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    jobs = expand(load_sweep(os.path.join(root, "sweeps", "quick.toml")))
    ref = jobs_of(build_parser().parse_args(["run", "--preset", "quick"]))
    assert len(jobs) == 13 and [sj.key for sj in jobs] == [sj.key for sj in ref]
    assert [(sj.run_dir("runs"), sj.checkpoint_every, sj.job) for sj in jobs] == \
           [(sj.run_dir("runs"), sj.checkpoint_every, sj.job) for sj in ref]
    assert {sj.group_id for sj in ref} == {"run-quick"} and {sj.group_id for sj in jobs} == {"sweep-quick"}


def test_python_files_match_the_toml_grid(tmp_path):
    toml_jobs = expand(load_sweep(_write(tmp_path, GRID)))
    grid_py = _write(tmp_path, 'import tomllib\nSWEEP = tomllib.loads(' + repr(GRID) + ')\n', "grid.py")
    assert [sj.key for sj in expand(load_sweep(grid_py))] == [sj.key for sj in toml_jobs]
    jobs_py = _write(tmp_path, """
JOBS = [dict(task="bijection", arch=arch, seeds=[0, 1], lr=lr, steps=30, eval_sequences=64)
        for arch in ("transformer", "mlp") for lr in (1e-3, 3e-4)]
NAME = "listed"
""", "jobs.py")
    spec = load_sweep(jobs_py)
    listed = expand(spec)
    assert spec.name == "listed" and len(listed) == 4
    quick = {(sj.job.arch, sj.job.train.lr, sj.job.seeds): sj.key for sj in toml_jobs
             if sj.size == "quick" and sj.job.task_key == "bijection"}
    assert {sj.key for sj in listed} == {quick[(sj.job.arch, sj.job.train.lr, (0, 1))] for sj in listed}


def test_task_options_change_the_task_and_its_label(tmp_path):
    text = """
tasks = ["bijection"]
archs = ["transformer"]
seeds = [0]
steps = 30
task_options = {supervise = "authors"}
[sizes.authors]
transformer = {pointer = "replace"}
"""
    jobs = expand(load_sweep(_write(tmp_path, text)))
    plain = expand(load_sweep(_write(tmp_path, text.replace('task_options = {supervise = "authors"}', ""), "p.toml")))
    (job,), (ref,) = jobs, plain
    assert job.job.task.supervise == "authors" and ref.job.task.supervise == "both"
    assert job.job.model["pointer"] == "replace"
    assert job.job.setup.label == ref.job.setup.label + " [supervise=authors]"  # never ranked with the preset's rows
    assert job.key != ref.key


BAD = [
    ('seeds = [0]\ntask_options = {supervise = "all"}', "bad task settings: supervise must be one of"),
    ('seeds = [0]\ntask_options = {task = "hmm"}', "cannot change which task it is"),
    ('tasks = ["bijection", "parity"]\nseeds = [0]', "unknown task 'parity'"),
    ('archs = ["transformer", "transfomer"]\nseeds = [0]',
     "unknown arch 'transfomer' in archs (did you mean 'transformer'?)"),
    ('arch = ["transformer"]\nseeds = [0]', "unknown key 'arch' in the sweep (did you mean 'archs'?)"),
    ('archs = []\nseeds = [0]', "archs is empty"),
    ('seeds = []', "seeds is empty"),
    ('seeds = [0, 1, 1]', "seeds has duplicates [1]"),
    ('seeds = [0]\nlrs = [0.001, -1]', "lrs must be a positive finite number, got -1"),
    # issue 29, section 2: a value out of its range is refused by TrainConfig's rule, naming the file and key
    ('seeds = [0]\nlrs = [nan]', "lrs must be a positive finite number, got nan"),
    ('seeds = [0]\ntrain = {beta1 = 1.5}', "train.beta1 must be a number in [0, 1), got 1.5"),
    ('seeds = [0]\ntrain = {weight_decay = -1}', "train.weight_decay must be a finite number >= 0"),
    ('seeds = [0]\ntrain = {curves = false, until = 0.5}', "train.until needs the learning curves"),
    ('seeds = [0]\nsteps = 0', "steps must be an integer >= 1"),
    ('seeds = [0]\ntrain = {batchsize = 8}', "unknown key 'batchsize' in train (did you mean 'batch_size'?)"),
    # probe case 51: 'unknown key' for lr, which has a key of its own that the message did not name
    ('seeds = [0]\ntrain = {lr = 0.001}', "train: lr is not set under train: a grid's learning rates are its "
                                          "top-level `lrs = [...]`"),
    ('seeds = [0]\ntrain = {steps = 5}', "train: steps is not set under train: it is a key of its own, `steps = N`"),
    ('seeds = [0]\n[sizes.x]\ntransformer = {d_modle = 8}', "bad model settings"),
    ('seeds = [0]\nlrs = [0.001, 0.001]', "lists a learning rate twice"),
    ('seeds = [0]\ndevice = "tpu"', "device must be cpu, cuda, cuda:N or auto"),
    ('seeds = [0\n', "not valid TOML"),
]


@pytest.mark.parametrize("text,message", BAD, ids=[m.split(" ")[0] + str(i) for i, (_, m) in enumerate(BAD)])
def test_bad_sweep_files_fail_before_anything_runs(tmp_path, capsys, text, message):
    path = _write(tmp_path, 'tasks = ["bijection"]\narchs = ["transformer", "mlp"]\n' + text
                  if not text.startswith(("tasks", "archs")) else text)
    db, runs = tmp_path / "r.sqlite", tmp_path / "runs"
    assert main(["sweep", path, "--db", str(db), "--runs-dir", str(runs), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.startswith(f"bayesbench sweep: sweep file {path}") and "\n" not in err
    assert not db.exists() and not runs.exists()
    with pytest.raises(ValueError, match="sweep file"):
        expand(load_sweep(path))


def test_other_bad_files(tmp_path, capsys):
    cases = [
        (_write(tmp_path, "seeds = [0]", "s.yaml"), "must end in .toml or .py"),
        (str(tmp_path / "missing.toml"), "no such file"),
        (_write(tmp_path, "X = 1\n", "none.py"), "must set exactly one of SWEEP"),
        (_write(tmp_path, "raise RuntimeError('boom')\n", "boom.py"), "RuntimeError: boom"),
        (_write(tmp_path, "JOBS = [dict(task='bijection', arch='mlp')]\n", "noseed.py"), "job 1 has no 'seeds'"),
        (_write(tmp_path, "JOBS = []\n", "empty.py"), "the grid is empty"),
        (_write(tmp_path, "JOBS = [dict(task='bijection', arch='mlp', seeds=[0])] * 2\n", "dup.py"),
         "the same job as job 1"),
        # issue 39: a sweep file calling sys.exit() ended the command with its code and no word; a UTF-16 file's
        # decode error named no file
        (_write(tmp_path, "import sys\nsys.exit(3)\n", "exits.py"), "exits.py: running it exited with 3 (sys.exit)"),
        (_utf16(tmp_path / "u16.toml", "seeds = [0]\n"), "u16.toml is not UTF-8 text (byte 0: invalid start byte) "
                                                         "(it is UTF-16: save it as UTF-8)"),
    ]
    for path, message in cases:
        assert main(["sweep", path, "--dry-run", "--db", str(tmp_path / "r.sqlite")]) == 2, path
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (path, err)


def test_ray_requested_but_missing_is_one_clear_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    path = _write(tmp_path, 'tasks = ["bijection"]\narchs = ["mlp"]\nseeds = [0]\nsteps = 5\n')
    assert main(["sweep", path, "--ray", "auto", "--db", str(tmp_path / "r.sqlite"),
                 "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'bayesbench[ray]'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


def test_dry_run_lists_jobs_with_cost_and_runs_nothing(tmp_path, capsys):
    path = _write(tmp_path, GRID)
    db = tmp_path / "r.sqlite"
    assert main(["sweep", path, "--dry-run", "--db", str(db), "--runs-dir", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    jobs = expand(load_sweep(path))
    assert "32 jobs, 64 ensemble members" in out and "estimated compute = 6 x parameters" in out
    for sj in jobs:
        assert sj.key in out
    assert out.count(" new\n") == 32 and "GFLOP" in out
    assert not db.exists()


def test_task_options_without_a_query_drop_the_query_set_as_task_args_do(tmp_path, capsys):
    """task_options = {variant = "paper"} (no final query): the job is scored on its values only, as
    `--task-args variant=paper` is (before: "supervise='both' needs query=True"); the dry run
    prints each job's whole label (it cut them at 58 characters: "lr 0.0005" read "lr 0.000")."""
    path = _write(tmp_path, 'name = "p"\npreset = "quick"\ntasks = ["bijection"]\narchs = ["mlp"]\nsteps = 5\n'
                            'task_options = {variant = "paper", L = 8}\n')
    (sj,) = expand(load_sweep(path))
    assert sj.job.setup.eval_scored == ("values",) and sj.job.setup.label.startswith("bijection V=8 L=8 [")
    assert main(["sweep", path, "--dry-run", "--db", str(tmp_path / "r.sqlite")]) == 0
    assert f"{sj.label} " in capsys.readouterr().out and sj.label.endswith("lr 0.0005 seeds [0, 1, 2]")


# ---------------------------------------------------------------- outside models

OUTSIDE = """
name = "outside"
tasks = ["bijection"]
archs = ["mlp", "./models/mine.py:build", "outside_net:build"]
seeds = [0]
steps = 20
eval_sequences = 64

[sizes.quick]

[sizes.wide]
"./models/mine.py:build" = {width = 16}
"outside_net:build" = {width = 4}
mlp = {depth = 2}
"""
NET = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "outside_net.py")


def _outside_folder(tmp_path, text: str = OUTSIDE) -> str:
    """tmp_path/sweeps/s.toml beside sweeps/models/mine.py (a copy of tests/outside_net.py)."""
    (tmp_path / "sweeps" / "models").mkdir(parents=True, exist_ok=True)
    shutil.copy(NET, tmp_path / "sweeps" / "models" / "mine.py")
    return _write(tmp_path / "sweeps", text)


def test_outside_models_by_file_and_module_path_have_keys_independent_of_the_working_directory(tmp_path,
                                                                                              monkeypatch):
    import outside_net

    path = _outside_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    jobs = expand(load_sweep("sweeps/s.toml"))
    mine = str(tmp_path / "sweeps" / "models" / "mine.py") + ":build"
    assert [(sj.size, sj.job.arch, sj.arch) for sj in jobs] == [
        (size, arch, name) for size in ("quick", "wide")
        for arch, name in (("mlp", "mlp"), (mine, "mine"), ("outside_net:build", "outside_net"))]
    # parameters (the cost estimate's) as counted by hand; factory options from the size's table
    task = jobs[0].job.task
    for sj, width in zip(jobs[1:3] + jobs[4:6], (8, 8, 16, 4)):
        assert sj.job.params == outside_net.params(width, task.vocab_size, sj.job.max_len, task.num_classes)
        assert sj.job.model == ({} if width == 8 else {"width": width}) and sj.flops == 6 * sj.job.params * sj.tokens
    assert jobs[1].run_dir("runs").startswith(os.path.join("runs", "quick", "bijection-mine-quick-lr0.0005-s0-"))
    assert jobs[1].run_dir("runs").endswith(jobs[1].key)
    # the same keys from the sweep file's folder, through an absolute path, and from a Python file
    monkeypatch.chdir(tmp_path / "sweeps" / "models")
    assert [sj.key for sj in expand(load_sweep("../s.toml"))] == [sj.key for sj in jobs]
    assert [sj.key for sj in expand(load_sweep(path))] == [sj.key for sj in jobs]
    py = _write(tmp_path / "sweeps", "import tomllib\nSWEEP = tomllib.loads(" + repr(OUTSIDE) + ")\n", "s.py")
    assert [sj.key for sj in expand(load_sweep(py))] == [sj.key for sj in jobs]
    jobs_py = _write(tmp_path / "sweeps", "JOBS = [dict(task='bijection', arch='./models/mine.py:build', seeds=[0], "
                     "steps=20, eval_sequences=64, size='quick')]\n", "jobs.py")
    assert [sj.key for sj in expand(load_sweep(jobs_py))] == [jobs[1].key]
    # another option, another key
    wider = expand(load_sweep(_outside_folder(tmp_path, OUTSIDE.replace("width = 16", "width = 12"))))
    assert wider[4].key != jobs[4].key and wider[1].key == jobs[1].key


def test_dry_run_lists_outside_models_with_their_cost(tmp_path, capsys):
    path = _outside_folder(tmp_path)
    assert main(["sweep", path, "--dry-run", "--trust-code", "--db", str(tmp_path / "r.sqlite")]) == 0
    out = capsys.readouterr().out
    jobs = expand(load_sweep(path))
    assert "6 jobs, 6 ensemble members" in out and out.count(" new\n") == 6
    for sj in jobs:
        line = next(line for line in out.splitlines() if sj.key in line)
        assert f"/ {sj.arch} [{sj.size}]" in line and f"{sj.job.params:,}" in line and "FLOP" in line
    assert main(["sweep", path, "--dry-run", "--json", "--trust-code", "--db", str(tmp_path / "r.sqlite")]) == 0
    listed = json.loads(capsys.readouterr().out)["jobs"]
    assert [(j["arch"], j["model"], j["params"]) for j in listed] == \
           [(sj.arch, sj.job.arch if sj.arch != "mlp" else None, sj.job.params) for sj in jobs]
    assert not (tmp_path / "r.sqlite").exists()


BAD_OUTSIDE = [
    ('"./models/missing.py:build"', "archs entry './models/missing.py:build': model '{dir}/models/missing.py:build': "
                                    "no such file {dir}/models/missing.py"),
    ('"./models/mine.py:nothing"', "archs entry './models/mine.py:nothing': model '{dir}/models/mine.py:nothing': "
                                   "{dir}/models/mine.py has no attribute 'nothing'"),
    ('"outside_nope:build"', "archs entry 'outside_nope:build': model 'outside_nope:build': cannot import module "
                             "'outside_nope'"),
    ('"./models/mine.py:"', "archs entry './models/mine.py:': model './models/mine.py:' must be "
                            "'package.module:factory'"),
    ('"./models/mine.py"', "unknown arch './models/mine.py' in archs; available:"),
    ('"./models/mine.py:broken"', "bad model settings: {dir}/models/mine.py:broken: the factory raised RuntimeError: "
                                  "this factory always fails"),
    ('"./models/mine.py:build", "models/mine.py:build"', "names one model twice"),
    ('"./models/mine.py:build", "outside_net:params"', "would both be stored as 'mine'"),
    ('"./models/mlp.py:build"', "name 'mlp' is a built-in architecture"),
]


@pytest.mark.parametrize("archs,message", BAD_OUTSIDE, ids=[str(i) for i in range(len(BAD_OUTSIDE))])
def test_bad_outside_models_fail_before_anything_runs(tmp_path, capsys, archs, message):
    path = _outside_folder(tmp_path, f'tasks = ["bijection"]\narchs = ["mlp", {archs}]\nseeds = [0]\nsteps = 5\n')
    shutil.copy(NET, tmp_path / "sweeps" / "models" / "mlp.py")
    message = message.format(dir=tmp_path / "sweeps")
    if "outside_net:params" in archs:  # a second model stored as 'mine': a module named mine
        (tmp_path / "sweeps" / "models" / "__init__.py").write_text("")
        path = _outside_folder(tmp_path, 'tasks = ["bijection"]\narchs = ["./models/mine.py:build", '
                                         '"models.mine:build"]\nseeds = [0]\nsteps = 5\n')
        sys.path.insert(0, str(tmp_path / "sweeps"))
    try:
        db, runs = tmp_path / "r.sqlite", tmp_path / "runs"
        assert main(["sweep", path, "--db", str(db), "--runs-dir", str(runs), "--no-progress", "--trust-code"]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and err.startswith(f"bayesbench sweep: sweep file {path}") and "\n" not in err, err
        assert not db.exists() and not runs.exists()
    finally:
        if str(tmp_path / "sweeps") in sys.path:
            sys.path.remove(str(tmp_path / "sweeps"))


def test_a_ray_cluster_that_wants_a_token_is_named_not_twenty_lines_of_retries(monkeypatch, capfd):
    """Ray's core prints a retry line a second to fd 2 and then fails to connect; the executor
    says what is missing (a fake `ray` here: a real token-auth cluster takes ~20 s to refuse)."""
    import os
    import types

    from bayesbench.sweep import ray_executor
    from bayesbench.sweep.sweep_file import Resources

    def refuse(**kwargs):
        for _ in range(20):
            os.write(2, b"[W gcs_client.cc:210] Failed to get cluster ID from GCS server: Unauthenticated: "
                        b"RPC error: InvalidAuthToken: Authentication token is missing or incorrect\n")
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")

    fake = types.SimpleNamespace(is_initialized=lambda: False, init=refuse)
    monkeypatch.setattr(ray_executor, "import_ray", lambda: fake)
    with pytest.raises(ValueError, match=r"^ray auto: the Ray cluster at auto uses token authentication"):
        ray_executor.RayExecutor("auto", Resources())
    assert "InvalidAuthToken" not in capfd.readouterr().err


def test_dry_run_refuses_a_model_the_run_would_refuse(tmp_path, capsys):
    """A model whose logits have C + 1 classes: the dry run runs the same trial forward (before: 'new')."""
    (tmp_path / "wide.py").write_text(
        "from torch import nn\n\n"
        "class Wide(nn.Module):\n"
        "    def __init__(self, spec):\n"
        "        super().__init__()\n"
        "        self.embed = nn.Embedding(spec.vocab_size, 8)\n"
        "        self.head = nn.Linear(8, spec.num_classes + 1)\n"
        "    def forward(self, tokens):\n"
        "        return self.head(self.embed(tokens))\n\n"
        "def build(spec):\n"
        "    return Wide(spec)\n")
    sweep = tmp_path / "s.toml"
    sweep.write_text('name = "w"\ntasks = ["bijection"]\narchs = ["./wide.py:build"]\nseeds = [0]\nsteps = 2\n')
    assert main(["sweep", str(sweep), "--dry-run", "--trust-code", "--db", str(tmp_path / "r.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "expected [B=2, L=" in err and "C=8]" in err and len(err.strip().splitlines()) == 1
