# adapted from pytorch/FBGEMM fbgemm_gpu/fbgemm_gpu/split_table_batched_embeddings_ops_training.py
import logging
from typing import List, Optional, Tuple, Union

import torch
from torch import nn, Tensor

import fbgemm_gpu.split_embedding_codegen_lookup_invokers as invokers
from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
    CacheAlgorithm,
    DEFAULT_ASSOC,
    PoolingMode,
)

MAX_PREFETCH_DEPTH = 100


class SplitTableBatchedEmbeddingBagsCodegen(nn.Module):
    """
    Table Batched Embedding (TBE) operator with a UVM-backed on-device cache.
    """

    def __init__(
        self,
        embedding_specs: List[Tuple[int, int]],
        cache_algorithm: CacheAlgorithm = CacheAlgorithm.LRU,
        pooling_mode: PoolingMode = PoolingMode.SUM,
        prefetch_pipeline: bool = False,
        gather_uvm_cache_stats: bool = False,
        device: Optional[torch.device] = None,
    ) -> None:
        super().__init__()
        self.embedding_specs = embedding_specs
        self.pooling_mode = pooling_mode
        self.cache_algorithm = cache_algorithm
        self.prefetch_pipeline = prefetch_pipeline
        self.gather_uvm_cache_stats = gather_uvm_cache_stats
        self.current_device = device or torch.device(torch.cuda.current_device())
        self.timestep = 1
        self.timesteps_prefetched: List[int] = []
        self.max_prefetch_depth = MAX_PREFETCH_DEPTH
        self.lxu_cache_locations_list: List[Tensor] = []
        self.lxu_cache_locations_empty = torch.empty(0, device=self.current_device, dtype=torch.int32).fill_(-1)
        self.lxu_cache_locations = self.lxu_cache_locations_empty
        self._indices = self.lxu_cache_locations_empty
        self._offsets = self.lxu_cache_locations_empty
        self.prefetch_stream: Optional[torch.cuda.Stream] = None
        self._grad_mode = torch.is_grad_enabled
        self.register_buffer(
            "lxu_cache_locking_counter",
            torch.zeros(1, DEFAULT_ASSOC, device=self.current_device, dtype=torch.int32),
        )

    def _update_cache_counter_and_locations(self) -> None:
        torch.ops.fbgemm.lxu_cache_locking_counter_decrement(
            self.lxu_cache_locking_counter,
            self.lxu_cache_locations,
        )

    def _prefetch(self, indices: Tensor, offsets: Tensor, forward_stream: Optional[torch.cuda.Stream] = None) -> None:
        self.timestep += 1
        self.timesteps_prefetched.append(self.timestep)
        if not self.lxu_cache_weights.numel():
            return
        linear_cache_indices = torch.ops.fbgemm.linearize_cache_indices(
            self.cache_hash_size_cumsum, indices, offsets,
        )
        if self.cache_algorithm == CacheAlgorithm.LRU:
            torch.ops.fbgemm.lru_cache_populate(
                self.weights_uvm, self.cache_hash_size_cumsum, self.total_cache_hash_size,
                self.cache_index_table_map, self.weights_offsets, self.D_offsets,
                linear_cache_indices, self.lxu_cache_state, self.lxu_cache_weights,
                self.timestep, self.lxu_state, False, self.gather_uvm_cache_stats,
                self.local_uvm_cache_stats, self.lxu_cache_locking_counter,
            )
        self.lxu_cache_locations_list.append(
            torch.ops.fbgemm.lxu_cache_lookup(
                linear_cache_indices, self.lxu_cache_state, self.total_cache_hash_size,
                self.gather_uvm_cache_stats, self.local_uvm_cache_stats,
            )
        )

    def forward(
        self,
        indices: Tensor,
        offsets: Tensor,
        per_sample_weights: Optional[Tensor] = None,
        feature_requires_grad: Optional[Tensor] = None,
    ) -> Tensor:
        (indices, offsets, per_sample_weights) = self.prepare_inputs(indices, offsets, per_sample_weights)

        if len(self.timesteps_prefetched) == 0 and self._grad_mode():
            # In forward, we don't enable multi-pass prefetch as we want the process
            # to be as fast as possible and memory usage doesn't matter (will be recycled
            # by dense fwd/bwd)
            self._prefetch(indices, offsets)

        if len(self.timesteps_prefetched) > 0:
            self.timesteps_prefetched.pop(0)

        self.lxu_cache_locations = (
            self.lxu_cache_locations_empty
            if len(self.lxu_cache_locations_list) == 0
            else self.lxu_cache_locations_list.pop(0)
        )

        common_args = invokers.lookup_args.CommonArgs(
            placeholder_autograd_tensor=self.placeholder_autograd_tensor,
            dev_weights=self.weights_dev,
            host_weights=self.weights_host,
            uvm_weights=self.weights_uvm,
            lxu_cache_weights=self.lxu_cache_weights,
            weights_placements=self.weights_placements,
            weights_offsets=self.weights_offsets,
            D_offsets=self.D_offsets,
            total_D=self.total_D,
            max_D=self.max_D,
            hash_size_cumsum=self.hash_size_cumsum,
            total_hash_size_bits=self.total_hash_size_bits,
            indices=indices,
            offsets=offsets,
            pooling_mode=self.pooling_mode,
            indice_weights=per_sample_weights,
            feature_requires_grad=feature_requires_grad,
            lxu_cache_locations=self.lxu_cache_locations,
        )

        if self.prefetch_pipeline and not self._grad_mode():
            # no backward pre-hook will run for this batch; release the cache lines now
            self._update_cache_counter_and_locations()

        return invokers.lookup_sgd.invoke(common_args, self.optimizer_args)

    def prepare_inputs(self, indices: Tensor, offsets: Tensor, per_sample_weights: Optional[Tensor] = None):
        if indices.dtype != torch.int64:
            indices = indices.long()
        if offsets.dtype != torch.int64:
            offsets = offsets.long()
        return indices, offsets, per_sample_weights
