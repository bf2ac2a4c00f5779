# adapted from linkedin/Liger-Kernel src/liger_kernel/transformers/fused_linear_cross_entropy.py
from .loss import LigerFusedLinearCrossEntropyLoss
