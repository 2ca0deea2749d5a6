"""TrainConfig's module: no torch, so the command line reads the schedules, precisions and rules
without the training code; and the training part of a run's identity."""

from __future__ import annotations

import subprocess
import sys

from bayesbench.training.config import NOT_IN_IDENTITY, OPTIONAL, TrainConfig


def test_importing_the_config_imports_no_torch():
    code = ("import sys; from bayesbench.training.config import PRECISIONS, SCHEDULES, TrainConfig; "
            "TrainConfig.check_settings({'lr': 1e-3}); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_identity_names_what_changes_numbers():
    """Every field but checkpoint_every and sync_every (a resumed run is the uninterrupted one; a
    read-back changes nothing); an optional feature's fields only where a run sets them."""
    plain = TrainConfig(steps=10).identity()
    assert set(plain) == {f for f in TrainConfig.__dataclass_fields__} - set(NOT_IN_IDENTITY) - set(OPTIONAL)
    assert TrainConfig(steps=10, sync_every=3, checkpoint_every=2).identity() == plain
    assert TrainConfig(steps=10, compile=True).identity() == {**plain, "compile": True}
    assert TrainConfig(steps=10, curves=False).identity() == {**plain, "curves": False}
    assert TrainConfig(steps=10, lr=2e-3).identity() != plain and TrainConfig(steps=10, prefetch=4).identity() != plain
