"""Every dynamics number the docs quote from a measured study equals the number its study's summary
keeps in the repository (docs/data/*.json), as tests/test_docs_numbers.py does for the leaderboard.

Issue 44: the dynamics pages quoted numbers from summaries kept only in /tmp stores, so a re-run
could change a page's number with nothing to notice. Each entry of QUOTED is (doc, template,
summary file, key path, format): the doc must contain `template` with "{}" replaced by the value at
`key path` of the summary (keys separated by "/", list indices as integers) formatted by `format`.
The list is generic: a page, a summary or a number is one more entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data"

Entry = tuple[str, str, str, str, str]  # (doc, template with "{}", summary under docs/data, key path, format)

_CONF = "emsgd_grid_seeds11-18.json"
_REPRO = "emsgd_reproduction.json"
QUOTED: list[Entry] = [
]


def value_at(summary: dict, path: str):
    """The value at a "/"-separated key path (an all-digit key indexes a list)."""
    node = summary
    for key in path.split("/"):
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node


def render(entry: Entry) -> str:
    """The text the doc must hold for `entry`."""
    _, template, summary, path, fmt = entry
    value = value_at(json.loads((DATA / summary).read_text()), path)
    text = fmt.format(*value) if isinstance(value, list) and fmt.count("{") > 1 else fmt.format(value)
    return template.replace("{}", text)


def check(entries: list[Entry], docs: dict[str, str] | None = None) -> list[str]:
    """The entries whose rendered text is not in their doc (docs: path -> text, read when absent)."""
    bad = []
    for entry in entries:
        text = (docs or {}).get(entry[0]) or (ROOT / entry[0]).read_text()
        want = render(entry)
        if want not in text:
            bad.append(f"{entry[0]}: {want!r} not found ({entry[2]}: {entry[3]})")
    return bad


@pytest.mark.parametrize("entry", QUOTED, ids=lambda e: f"{Path(e[0]).stem}:{e[3]}")
def test_every_quoted_dynamics_number_is_its_summarys(entry):
    bad = check([entry])
    assert not bad, "a dynamics page quotes a number its summary (docs/data/) does not hold:\n" + "\n".join(bad)


def test_a_changed_number_is_caught():
    """Not vacuous: a quoted number moved by one digit in the page fails its entry."""
    assert QUOTED
    doc, template, *_ = QUOTED[0]
    text = (ROOT / doc).read_text()
    want = render(QUOTED[0])
    digits = [i for i, c in enumerate(want) if c.isdigit()]
    i = digits[-1]
    changed = want[:i] + str((int(want[i]) + 1) % 10) + want[i + 1:]
    assert check([QUOTED[0]], {doc: text.replace(want, changed)})


def test_the_summaries_are_small():
    for path in DATA.glob("*.json"):
        assert path.stat().st_size < 200_000, f"{path.name}: keep the quoted summary small"
