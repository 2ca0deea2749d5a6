"""Bayesian wind tunnels: tasks whose exact posterior is known in closed form."""

from .base import IGNORE_INDEX, Batch, Task
from .bijection import BijectionTask
from .hmm import HMMTask
from .markov import MarkovTask
from .outside import OutsideTask, is_outside_task, outside_task
from .registry import get_task, list_tasks, register_task, task_from_config
from .sticky import StickyTask

__all__ = [
    "IGNORE_INDEX",
    "Batch",
    "BijectionTask",
    "HMMTask",
    "MarkovTask",
    "OutsideTask",
    "StickyTask",
    "Task",
    "get_task",
    "is_outside_task",
    "list_tasks",
    "outside_task",
    "register_task",
    "task_from_config",
]
