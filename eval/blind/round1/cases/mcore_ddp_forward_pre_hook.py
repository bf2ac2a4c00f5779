# Copyright (c) 2023, NVIDIA CORPORATION. All rights reserved.
"""Forward pre-hooks of megatron.core.distributed.DistributedDataParallel (trimmed)."""
import torch

from megatron.core.distributed.data_parallel_base import _BaseDataParallel
from megatron.core.transformer.cuda_graphs import is_graph_capturing


class DistributedDataParallel(_BaseDataParallel):

    def enable_forward_pre_hook(self):
        assert self.use_forward_hook
        assert len(self.remove_forward_pre_hook_handles) == 0
        for module in self.module.modules():
            self.remove_forward_pre_hook_handles[module] = module.register_forward_pre_hook(
                self._make_forward_pre_hook()
            )

    def _make_forward_pre_hook(self):
        """
        Create a forward pre-hook to wait on all-gather handles when necessary (i.e.,
        when a module uses a parameter in a bucket with a still incomplete all-gather).
        """

        def hook(module, *unused):
            assert (
                self.use_forward_hook
            ), "Should use pre-hook only when overlap_param_gather is True"

            if is_graph_capturing():
                return

            grad_on = torch.is_grad_enabled()
            for param in module.parameters(recurse=False):
                # Skip parameters not in self.param_to_bucket_group.
                if param not in self.param_to_bucket_group:
                    continue
                assert param.requires_grad

                # If aligning param all-gather across pipeline stages, all-gather is dispatched
                # by start_param_sync calls in core/pipeline_parallelism/schedules.py.
                skip_next_bucket_dispatch = (
                    self.ddp_config.align_param_gather
                    or self.overlap_param_gather_with_optimizer_step
                    or not grad_on
                )
                self.param_to_bucket_group[param].finish_param_sync(
                    skip_next_bucket_dispatch=skip_next_bucket_dispatch
                )
                if grad_on and self.ddp_config.overlap_grad_reduce:
                    self.param_to_bucket_group[param].reset_grad_ready(param)

        return hook
