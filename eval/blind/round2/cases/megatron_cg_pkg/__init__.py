# Modelled on Megatron-LM megatron/core/transformer/cuda_graphs.py and megatron/core/distributed/distributed_data_parallel.py
from .cuda_graphs import CudaGraphManager

__all__ = ["CudaGraphManager"]
