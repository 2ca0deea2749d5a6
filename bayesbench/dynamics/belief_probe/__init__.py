"""The belief-geometry probe (`bayesbench belief-probe`, docs/belief_probe.md)."""
