"""Modelled on DeepSpeed deepspeed/model_implementations/transformers/ds_transformer.py
(DeepSpeedTransformerInference), deepspeed/ops/transformer/inference/config.py
(DeepSpeedInferenceConfig) and ds_attention.py / op_binding (DeepSpeedSelfAttention, softmax_context)."""
from .module import DeepSpeedTransformerInference

__all__ = ["DeepSpeedTransformerInference"]
