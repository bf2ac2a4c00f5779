# Modeled on DeepSpeed deepspeed/sequence/layer.py (DistributedAttention, _SeqAllToAll,
# single_all_to_all with sp_overlap_comm / sp_stream).
from .comm import _SeqAllToAll, single_all_to_all
from .layer import DistributedAttention
