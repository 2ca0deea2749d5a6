"""Scoring against the exact posterior: metrics, evaluation sets, floors, scored rows."""
