"""The README's "Score your own model" example, run as written (with tiny step counts and a
private store), so that it cannot rot."""

from __future__ import annotations

import os
import re
import shlex

import torch

import bayesbench
from bayesbench.cli import main
from bayesbench.store.database import read_rows

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def _section() -> str:
    text = open(README, encoding="utf-8").read()
    start = text.index("## Score your own model")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def test_readme_score_your_own_model(tmp_path, monkeypatch, capsys):
    section = _section()
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in re.search(r"```bash\n(.*?)```", section, re.S).group(1)
                .splitlines() if line.startswith("bayesbench ")]
    assert len([x for x in code.splitlines() if x.strip() and not x.startswith("#")]) <= 12  # "about 10 lines"
    assert [c.split()[1] for c in commands] == ["run", "score"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text(code)
    db = str(tmp_path / "r.sqlite")
    small = ["--eval-sequences", "64", "--db", db]
    run = shlex.split(commands[0])[1:]
    assert main([*run, *small, "--steps", "3", "--runs-dir", str(tmp_path / "runs"), "--no-progress",
                 "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "capacity: mine on bijection V=8" in out and "| mine " in out
    rows = read_rows(db)
    assert {(r["task"], r["arch"]) for r in rows} == {("bijection", "mine"), ("sticky", "mine")}
    assert sorted(r["seed"] for r in rows if r["task"] == "bijection") == [0, 1, 2]
    # "weights you trained yourself": a state dict of the module built for the spec the scorer uses
    ns: dict = {}
    exec(compile(code, str(tmp_path / "mine.py"), "exec"), ns)
    torch.save(ns["build"](bayesbench.model_spec("bijection")).state_dict(), tmp_path / "mine.pt")
    assert main([*shlex.split(commands[1])[1:], *small]) == 0
    assert "| mine " in capsys.readouterr().out
    assert len(read_rows(db, where="steps = 0")) == 1
