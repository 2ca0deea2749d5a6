"""Scoring against the exact posterior: metrics, evaluation sets, floors, scored rows."""


def __getattr__(name: str):
    """The names of the module this package replaced (bayesbench/scoring.py), for one
    release (`bayesbench._moved`)."""
    from .._moved import moved_name

    return moved_name(__name__, name)
