# adapted from linkedin/Liger-Kernel src/liger_kernel/ops/rms_norm.py
from .rms_norm import LigerRMSNorm
from .ops import LigerRMSNormFunction
