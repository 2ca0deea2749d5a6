"""Ensemble-native sequence models and a registry by name.

Every parameter has a leading member dimension E: tokens [E, B, L] -> logits [E, B, L, C],
one forward/backward trains E independent models. `get_model(name, task, seeds=[...])` builds
and initialises one; `list_models()` names them.
"""

from .base import EnsembleModel, TaskShape
from .layers import EnsembleEmbedding, EnsembleLayerNorm, EnsembleLinear
from .mlp import MLP, MLPConfig, match_mlp, mlp_param_count
from .registry import build_model, count_params, get_model, list_models, register_model
from .transformer import SIZES as TRANSFORMER_SIZES
from .transformer import Transformer, TransformerConfig

__all__ = [
    "MLP",
    "TRANSFORMER_SIZES",
    "EnsembleEmbedding",
    "EnsembleLayerNorm",
    "EnsembleLinear",
    "EnsembleModel",
    "MLPConfig",
    "TaskShape",
    "Transformer",
    "TransformerConfig",
    "build_model",
    "count_params",
    "get_model",
    "list_models",
    "match_mlp",
    "mlp_param_count",
    "register_model",
]
