# adapted from pytorch/torchrec torchrec/distributed/__init__.py
from .codecs import QuantizedCommCodec, QuantizationContext
from .comm_plan import CommPlan, make_comm_plan
from .dist_data import PooledEmbeddingsAllToAll

__all__ = ["QuantizedCommCodec", "QuantizationContext", "CommPlan", "make_comm_plan", "PooledEmbeddingsAllToAll"]
