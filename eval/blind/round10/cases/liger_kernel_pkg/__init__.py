# Package adapted from linkedin/Liger-Kernel src/liger_kernel/{ops,transformers}/fused_linear_cross_entropy.py
from .ops import LigerFusedLinearCrossEntropyFunction
from .module import LigerFusedLinearCrossEntropyLoss
