"""bayesbench/versions.py: what a message says differs between the code that made a result and the code now."""

from __future__ import annotations

from bayesbench import versions


def test_a_file_whose_contents_were_never_recorded_may_have_changed_not_changed():
    """A checkpoint written before contents were recorded, of an unchanged file, was refused with
    'the tunnel file changed (contents unknown ... then, contents e30b now)': a change nobody can know."""
    legacy = versions.legacy({"task": "outside", "spec": "/abs/coin.py:build"}, "mlp")
    now = {"task": {"contents": "e30bf21d318c164f", "files": ["coin.py"]}, "model": versions.builtin(1),
           "training": versions.builtin(1)}
    (said,) = versions.changed(legacy, now)
    assert said == ("the tunnel file may have changed (its contents were not recorded then, before bayesbench "
                    "recorded file contents; contents e30bf21d318c164f now)")
    edited = {**now, "task": {"contents": "661c3fdebd08297b", "files": ["coin.py"]}}
    assert versions.changed(now, edited) == ["the tunnel file changed (contents e30bf21d318c164f then, contents "
                                             "661c3fdebd08297b now)"]
    assert versions.changed(now, dict(now)) == []
