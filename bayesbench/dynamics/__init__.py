"""Gradient dynamics and geometry of attention: stored measurements, reports and figures.

Shared by `bayesbench profile` (routing law over training), `bayesbench geometry` (the trained
model's geometry) and `bayesbench emsgd` (EM-like vs SGD schedules). Every measurement is one
long-format row (study, seed, step, layer, head, name, value) of the `dynamics` table of the
results store (`Measurement`); see docs/dynamics.md.
"""

from .report import write_report
from .store import Measurement, delete_study, list_studies, read_dynamics, read_study, register_study, write_dynamics

__all__ = ["Measurement", "delete_study", "list_studies", "read_dynamics", "read_study",
           "register_study", "write_dynamics", "write_report"]
