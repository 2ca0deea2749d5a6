"""Fixtures shared by the benchmarks of this folder."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def one_thread():
    """One torch thread for the test (the machine's two cores oversubscribe with more: BENCHMARKS.md),
    the previous count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
