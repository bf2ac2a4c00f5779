# adapted from huggingface/pytorch-image-models timm/layers/drop.py
from .drop import DropBlock2d, DropPath, drop_path
from ._grad import pass_grad_mode
