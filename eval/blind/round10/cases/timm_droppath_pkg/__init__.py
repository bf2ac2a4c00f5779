# Package adapted from huggingface/pytorch-image-models timm/layers/{drop.py,mlp.py} and models/vision_transformer.py
from .policy import grad_mode, make_drop
from .ops import drop_path
from .blocks import Block, VisionTransformer
