"""`bayesbench completion bash|zsh|tcsh`: print a shell completion script, generated from the
command's own parser by shtab, so it completes every command and option of this version.

    bayesbench completion bash > ~/.local/share/bash-completion/completions/bayesbench
    bayesbench completion zsh > ~/.zfunc/_bayesbench        # a folder on $fpath
    eval "$(bayesbench completion bash)"                     # this shell only

(docs/install.md#shell-completion). Needs shtab (`pip install shtab`, the [completion] extra).
"""

from __future__ import annotations

SHELLS = ("bash", "zsh", "tcsh")


def add_parser(sub) -> None:
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh, tcsh) for bayesbench",
                       description="Print a completion script for SHELL, generated from this bayesbench's parser. "
                                   "Install it with e.g. `bayesbench completion bash > "
                                   "~/.local/share/bash-completion/completions/bayesbench` (docs/install.md).")
    p.add_argument("shell", choices=SHELLS, metavar="SHELL", help="bash, zsh or tcsh")
    p.set_defaults(handler=cmd_completion)


def completion_script(shell: str) -> str:
    """The completion script of the `bayesbench` command for `shell`."""
    if shell not in SHELLS:
        raise ValueError(f"shell must be one of {', '.join(SHELLS)}, got {shell!r}")
    try:
        import shtab
    except ImportError:
        raise ValueError("bayesbench completion needs shtab: pip install shtab (or the [completion] extra)") from None
    from . import build_parser

    parser = build_parser()
    _mark_paths(parser, shtab)
    script = shtab.complete(parser, shell=shell)
    if shell == "bash":  # an argument it completes nothing for: readline's file names, not bash's commands
        script = script.replace("complete -o bashdefault -F", "complete -o bashdefault -o default -F")
    return script


# the arguments whose value is a path, by their dest: a file (or a folder) or a folder only
FILE_ARGS = ("db", "checkpoint", "config", "file", "plot", "predictions", "model", "out")
DIR_ARGS = ("run_dir", "runs_dir")


def _mark_paths(parser, shtab) -> None:
    """Mark every path argument of `parser` and its subcommands for shtab, which then completes it
    with file names (FILE: files and folders) or folder names (DIRECTORY)."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _mark_paths(sub, shtab)
        elif action.nargs != 0 and not action.choices and action.dest in FILE_ARGS + DIR_ARGS:
            action.complete = shtab.DIRECTORY if action.dest in DIR_ARGS else shtab.FILE


def cmd_completion(args) -> int:
    print(completion_script(args.shell))
    return 0
