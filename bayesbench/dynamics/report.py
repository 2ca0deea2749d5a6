"""One-page Markdown reports for dynamics studies, written beside the results store."""

from __future__ import annotations

import os
from collections.abc import Sequence


def report_dir(db: str | None) -> str:
    """Reports and figures live in `<store folder>/reports/` (None: the default store's folder)."""
    from ..store.database import db_path

    return os.path.join(os.path.dirname(os.path.abspath(db_path(db))), "reports")


def write_report(path: str, title: str, sections: list[tuple[str, str]], figures: Sequence[str] = ()) -> str:
    """Write `# title`, then each (heading, Markdown body) section, then the figures as links.

    Figure paths are written relative to the report so the folder can be moved as a whole.
    Returns the report's path.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    lines = [f"# {title}", ""]
    for heading, body in sections:
        lines += [f"## {heading}", "", body.rstrip(), ""]
    if figures:
        lines += ["## Figures", ""]
        base = os.path.dirname(os.path.abspath(path))
        for fig in figures:
            rel = os.path.relpath(os.path.abspath(fig), base)
            lines += [f"![{os.path.basename(fig)}]({rel})", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def print_summary(summary: dict, as_json: bool) -> None:
    """A study's command-line output: its numbers as JSON, or its headline lines and the report's path."""
    import json

    if as_json:
        print(json.dumps(summary, indent=2))
        return
    for line in summary["headline"]:
        print(line)
    print(f"report: {summary['report']}")
