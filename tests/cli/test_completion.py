"""`bayesbench completion SHELL` (shtab, from the parser), `bayesbench --version` and `python -m bayesbench`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bayesbench
from bayesbench.cli import COMMANDS, build_parser, main
from bayesbench.cli.completion import SHELLS, completion_script
from bayesbench.running.provenance import describe

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("shtab")


def _command_names() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return list(sub.choices)


def test_every_command_is_registered_once():
    names = _command_names()
    assert len(names) == len(COMMANDS) == len(set(names)) and "completion" in names


@pytest.mark.parametrize("shell", SHELLS)
def test_script_names_every_command_and_option(shell, capsys):
    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert script == completion_script(shell) + "\n"
    for name in _command_names():
        assert name in script, name
    for word in ("--preset", "--version", "--train-args", "quick", "paper"):  # options and a flag's choices
        assert (word if shell != "tcsh" else word.lstrip("-")) in script, word  # tcsh lists options without "--"


BASH_COMPLETE = """
source "$1"
complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
  _shtab_bayesbench bayesbench "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"; echo "${COMPREPLY[*]}"; }
complete_words bayesbench tr
complete_words bayesbench run --pre
complete_words bayesbench run --preset ""
complete_words bayesbench --ver
complete_words bayesbench completion ""
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
def test_bash_completes_commands_options_and_choices(tmp_path):
    """The script, sourced in bash, completes a command, an option and an option's choices."""
    script = tmp_path / "bayesbench.bash"
    script.write_text(completion_script("bash"))
    out = subprocess.run(["bash", "-c", BASH_COMPLETE, "bash", str(script)], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["train", "--preset --precision", "paper quick", "--version", "bash zsh tcsh"], out


FILE_COMPLETE = """
source "$1"
cd "$2"
complete_words() { COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
  _shtab_bayesbench bayesbench "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"; echo "${COMPREPLY[*]}"; }
complete_words bayesbench leaderboard --db res
complete_words bayesbench score --predictions pre
complete_words bayesbench score --predictions preds_a.parquet pre
complete_words bayesbench run --config sw
complete_words bayesbench export --format csv --out res
complete_words bayesbench train --runs-dir ru
complete_words bayesbench run --preset q
complete -p bayesbench
"""


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
def test_bash_completes_file_names_for_file_arguments(tmp_path):
    """The script completed no file names: `--db res<TAB>` offered nothing (its fallback was `-o
    bashdefault`, which never lists files, and no argument said it takes a file)."""
    script = tmp_path / "bayesbench.bash"
    script.write_text(completion_script("bash"))
    work = tmp_path / "work"
    work.mkdir()
    for name in ("results.sqlite", "preds_a.parquet", "preds_b.parquet", "sweep.toml"):
        (work / name).write_text("")
    (work / "runs").mkdir()
    out = subprocess.run(["bash", "-c", FILE_COMPLETE, "bash", str(script), str(work)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert [sorted(line.split()) for line in out[:7]] == [
        ["results.sqlite"], ["preds_a.parquet", "preds_b.parquet"], ["preds_a.parquet", "preds_b.parquet"],
        ["sweep.toml"], ["results.sqlite"], ["runs"], ["quick"]], out
    # any other argument falls back to file names too (readline's default), not to nothing
    assert "-o default" in out[7] and "-o bashdefault" in out[7], out[7]


def test_without_shtab_the_command_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "shtab", None)  # import shtab -> ImportError
    assert main(["completion", "bash"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install shtab" in err[0], err


def test_version_prints_version_commit_and_extension(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == describe() and lines[0].startswith("bayesbench ")
    assert lines[1].startswith("compiled extension bayesbench._C: ")


def test_python_dash_m_bayesbench_is_the_command(tmp_path):
    """`python -m bayesbench` (bayesbench/__main__.py) runs the CLI, from any folder."""
    out = subprocess.run([sys.executable, "-m", "bayesbench", "--version"], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    version = bayesbench.__version__
    assert out.splitlines()[0].startswith(f"bayesbench {version} (commit "), out  # read by that process
    bad = subprocess.run([sys.executable, "-m", "bayesbench", "completion", "fish"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice: 'fish'" in bad.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
def test_the_install_docs_lines_write_the_scripts_into_a_fresh_home(tmp_path):
    """docs/install.md's bash line wrote into ~/.local/share/bash-completion/completions without
    making it: in a home where that folder is not yet there, 'No such file or directory'."""
    import os
    import re

    block = re.search(r"## Shell completion\n.*?```bash\n(.*?)```", (ROOT / "docs" / "install.md").read_text(),
                      re.S).group(1)
    lines = [line.split("#")[0].strip() for line in block.splitlines() if "completion bash >" in line
             or "completion zsh >" in line]
    assert len(lines) == 2, block
    command = Path(sys.executable).parent / "bayesbench"  # the console script of this environment
    if not command.exists():
        pytest.skip(f"no bayesbench console script beside {sys.executable}")
    env = dict(os.environ, HOME=str(tmp_path), PATH=f"{command.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for line in lines:
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert proc.returncode == 0, (line, proc.stderr)
    assert (tmp_path / ".local/share/bash-completion/completions/bayesbench").read_text() == completion_script("bash") \
        + "\n"
    assert (tmp_path / ".zfunc/_bayesbench").read_text().startswith("#compdef bayesbench")
