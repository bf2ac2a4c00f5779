# Modelled on megatron/core/distributed/distributed_data_parallel.py and param_and_grad_buffer.py (core_r0.10).
import torch

from megatron.core.utils import is_graph_capturing


class _ParamAndGradBucketGroup:
    def __init__(self, buckets, ddp_config, collective_group, collective_group_size):
        self.buckets = buckets
        self.ddp_config = ddp_config
        self.intra_distributed_optimizer_instance_group = collective_group
        self.intra_distributed_optimizer_instance_size = collective_group_size
        self.intra_distributed_optimizer_instance_rank = torch.distributed.get_rank(group=collective_group)
        self.next_param_gather_bucket_group = None
        self.param_gather_handle = None
        self.param_gather_dispatched = False

    @property
    def _async_param_gather(self) -> bool:
        return self.ddp_config.overlap_param_gather and torch.is_grad_enabled()

    def start_param_sync(self, force_sync: bool = False):
        assert self.ddp_config.use_distributed_optimizer
        if force_sync:
            if self.param_gather_handle is not None:
                self.param_gather_handle.wait()
                self.param_gather_handle = None
                return
        else:
            assert self.param_gather_handle is None
        async_op = self._async_param_gather and not force_sync
        with torch.distributed._coalescing_manager(
            self.intra_distributed_optimizer_instance_group, async_ops=async_op
        ) as cm:
            for bucket in self.buckets:
                local_data_view = bucket.param_data.view(self.intra_distributed_optimizer_instance_size, -1)[
                    self.intra_distributed_optimizer_instance_rank]
                torch.distributed._all_gather_base(
                    bucket.param_data, local_data_view, group=self.intra_distributed_optimizer_instance_group,
                    async_op=async_op,
                )
        self.param_gather_handle = cm if async_op else None
        self.param_gather_dispatched = True

    def finish_param_sync(self, skip_next_bucket_dispatch: bool = False):
        assert self.ddp_config.overlap_param_gather
        if not self.param_gather_dispatched:
            self.start_param_sync()
        if self.param_gather_handle is not None:
            self.param_gather_handle.wait()
            self.param_gather_handle = None
            if self.next_param_gather_bucket_group is not None and not skip_next_bucket_dispatch:
                self.next_param_gather_bucket_group.start_param_sync()


class DistributedDataParallel(torch.nn.Module):
    def __init__(self, config, ddp_config, module):
        super().__init__()
        self.config = config
        self.ddp_config = ddp_config
        self.module = module
        self.use_forward_hook = ddp_config.use_distributed_optimizer and ddp_config.overlap_param_gather
        self.overlap_param_gather_with_optimizer_step = False
        self.param_to_bucket_group = {}
        self.remove_forward_pre_hook_handles = {}

    def _make_forward_pre_hook(self):
        def hook(module, *unused):
            assert self.use_forward_hook or not torch.is_grad_enabled(), "Should use pre-hook only when overlap_param_gather is True"
            if is_graph_capturing():
                return
            for param in module.parameters(recurse=False):
                if param not in self.param_to_bucket_group:
                    continue
                assert param.requires_grad
                skip_next_bucket_dispatch = (
                    self.ddp_config.align_param_gather
                    or self.overlap_param_gather_with_optimizer_step
                    or not torch.is_grad_enabled()
                )
                self.param_to_bucket_group[param].finish_param_sync(
                    skip_next_bucket_dispatch=skip_next_bucket_dispatch
                )
        return hook

    def enable_forward_pre_hook(self):
        for module in self.module.modules():
            self.remove_forward_pre_hook_handles[module] = module.register_forward_pre_hook(
                self._make_forward_pre_hook()
            )
