"""`bayesbench geometry`: a trained transformer's geometry, its report and figures."""


def __getattr__(name: str):
    """The names of the module this package replaced (bayesbench/dynamics/geometry.py), for one
    release (`bayesbench._moved`)."""
    from ..._moved import moved_name

    return moved_name(__name__, name)
