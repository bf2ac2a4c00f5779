# adapted from huggingface/pytorch-image-models timm/layers/drop.py
from .decorators import infer_training
from .layers import DropPath, drop_path
from .blocks import Block
