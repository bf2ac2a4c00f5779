# adapted from NVIDIA/apex apex/parallel/optimized_sync_batchnorm.py
from .plan import NormPlan, make_norm_plan
from .kernel import SyncBatchnormFunction
from .module import SyncBatchNorm
