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

    return shtab.complete(build_parser(), shell=shell)


def cmd_completion(args) -> int:
    print(completion_script(args.shell))
    return 0
