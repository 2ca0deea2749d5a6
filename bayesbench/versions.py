"""The code behind a number: versions of the built-in parts and contents of outside files.

A stored result is keyed by everything that produced it (docs/results.md, "What a key
covers"). Its configuration is one half; the other half is the code, described by a `code`
dict with one entry per part that decides the numbers:

- "task": the tunnel: a built-in one's `Task.version`, an outside one's file contents
  (`outside_code.contents`: a hash of the file and of the modules it imports from its own folder);
- "model": the architecture: a built-in one's registered version, an outside one's contents
  (for `hf:` models, the `transformers` version);
- "training": the trainer's version (its loop, optimiser and data streams);
- "metrics": each metric's version (`metric_table.metric_versions`).

A built-in part's version starts at `FIRST` and is raised whenever a change to its code
changes what a seed yields (a sampler or posterior, a forward pass, a metric's definition).

`keyed(code)` is what keys (job keys, checkpoint identities) hash: the entries that are not a
built-in part at its first version. A job made only of first-version built-in parts hashes
no code entry, which is why the keys of results stored before versions existed remain theirs.
`changed(old, new)` names what differs between two code dicts, for messages.
"""

from __future__ import annotations

FIRST = 1
UNKNOWN = "unknown"  # contents of an outside file stored before contents were recorded


def builtin(version: int) -> dict:
    """The code entry of a built-in part at `version`."""
    return {"version": int(version)}


def is_first(entry) -> bool:
    """Whether a code entry is a built-in part at its first version (nothing a key needs to name)."""
    if isinstance(entry, dict) and set(entry) == {"version"}:
        return entry["version"] == FIRST
    if isinstance(entry, dict) and entry and all(isinstance(v, int) and not isinstance(v, bool)
                                                 for v in entry.values()):
        return all(v == FIRST for v in entry.values())  # a table of versions (the metrics')
    return isinstance(entry, int) and not isinstance(entry, bool) and entry == FIRST


def keyed(code: dict | None) -> dict:
    """The part of `code` that keys hash: every entry but first-version built-in parts."""
    return {part: entry for part, entry in sorted((code or {}).items()) if not is_first(entry)}


WHAT = {"task": "tunnel", "model": "model", "training": "trainer", "metrics": "metric definitions"}


def describe(entry) -> str:
    """One code entry in words: 'contents 1a2b3c4d5e6f7a8b', 'version 2', 'contents unknown (keyed by path)'."""
    if isinstance(entry, dict):
        if "contents" in entry:
            if entry["contents"] == UNKNOWN:
                return "contents unknown (stored before file contents were recorded: keyed by path)"
            extra = "".join(f", {k} {entry[k]}" for k in sorted(entry) if k not in ("contents", "files", "path"))
            return f"contents {entry['contents']}{extra}"
        if set(entry) == {"version"}:
            return f"version {entry['version']}"
        return ", ".join(f"{k} {describe(v)}" for k, v in sorted(entry.items()))
    return f"version {entry}"


def short(entry) -> str:
    """A code entry in a table cell: 'contents 1a2b3c4d5e6f7a8b', 'v2' (a version),
    'contents unknown (keyed by path)'."""
    if isinstance(entry, dict):
        if entry.get("contents") == UNKNOWN:
            return "contents unknown (keyed by path)"
        if "contents" in entry:
            return f"contents {entry['contents']}" + (f" v{entry['version']}" if "version" in entry else "")
        if set(entry) == {"version"}:
            return f"v{entry['version']}"
        return " ".join(f"{k}=v{v}" if isinstance(v, int) else f"{k}={v}" for k, v in sorted(entry.items()))
    return f"v{entry}"


def changed(old: dict | None, new: dict | None) -> list[str]:
    """What differs between two code dicts, one phrase per part: 'the model file changed
    (contents a then, b now)'; of a part whose contents were never recorded (a checkpoint or row
    older than content keys), that it may have changed."""
    old, new = keyed(old), keyed(new)
    out = []
    for part in sorted(set(old) | set(new)):
        a, b = old.get(part, builtin(FIRST)), new.get(part, builtin(FIRST))
        if a != b:
            kind = "file" if isinstance(b, dict) and "contents" in b or isinstance(a, dict) and "contents" in a \
                else "code"
            if isinstance(a, dict) and a.get("contents") == UNKNOWN:  # not known to differ: not known at all
                out.append(f"the {WHAT.get(part, part)} {kind} may have changed (its contents were not recorded then, "
                           f"before bayesbench recorded file contents; {describe(b)} now)")
            else:
                out.append(f"the {WHAT.get(part, part)} {kind} changed ({describe(a)} then, {describe(b)} now)")
    return out


def legacy(task_config: dict | None, arch_spec: str | None) -> dict:
    """The code of a result stored before code was recorded: built-in parts at their first
    version (the code of this release made them, as far as a store can tell); an outside tunnel
    or model with unknown contents (it was keyed by its path only)."""
    outside_task = (task_config or {}).get("task") == "outside"
    outside_model = isinstance(arch_spec, str) and ":" in arch_spec
    unknown = {"contents": UNKNOWN}
    return {"task": dict(unknown) if outside_task else builtin(FIRST),
            "model": dict(unknown) if outside_model else builtin(FIRST),
            "training": builtin(FIRST)}
