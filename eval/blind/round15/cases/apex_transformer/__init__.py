# adapted from NVIDIA/apex apex/transformer/testing/standalone_transformer_lm.py
from . import random
from .standalone_transformer_lm import ParallelTransformer, ParallelTransformerLayer
