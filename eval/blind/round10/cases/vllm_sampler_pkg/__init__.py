# Package adapted from vllm-project/vllm vllm/v1/sample/{sampler.py,ops/topk_topp_sampler.py}
from .flags import runtime_flags
from .sampler import Sampler
