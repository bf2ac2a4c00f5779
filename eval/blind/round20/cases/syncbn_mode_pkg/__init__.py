# adapted from pytorch/pytorch torch/nn/modules/batchnorm.py
from .sync_batchnorm import SyncBatchNorm

__all__ = ["SyncBatchNorm"]
