import torch
import torch.distributed as dist

from vllm.logger import init_logger

logger = init_logger(__name__)


class GroupCoordinator:

    def __init__(self, group_ranks, local_rank, torch_distributed_backend, use_custom_allreduce=True):
        self.rank = dist.get_rank()
        self.local_rank = local_rank
        self.device_group = None
        self.cpu_group = None
        for ranks in group_ranks:
            device_group = dist.new_group(ranks, backend=torch_distributed_backend)
            cpu_group = dist.new_group(ranks, backend="gloo")
            if self.rank in ranks:
                self.ranks = ranks
                self.world_size = len(ranks)
                self.device_group = device_group
                self.cpu_group = cpu_group
        self.ca_comm = None
        if use_custom_allreduce and self.world_size > 1:
            from vllm.distributed.device_communicators.custom_all_reduce import CustomAllreduce
            self.ca_comm = CustomAllreduce(group=self.cpu_group, device=torch.device(f"cuda:{local_rank}"))

    def _all_reduce_out_place(self, input_):
        ca_comm = self.ca_comm
        if ca_comm is not None and not ca_comm.disabled and ca_comm.should_custom_ar(input_):
            out = ca_comm.custom_all_reduce(input_)
            if out is not None:
                return out
        out = input_.clone()
        dist.all_reduce(out, group=self.device_group)
        return out

    def all_reduce(self, input_):
        if self.world_size == 1:
            return input_
        if input_.is_cpu:
            dist.all_reduce(input_, group=self.cpu_group)
            return input_
        if not torch.is_inference_mode_enabled() and not getattr(self, "_warned_grad", False):
            logger.warning("tensor_model_parallel_all_reduce called outside inference_mode")
            self._warned_grad = True
        if torch.is_inference_mode_enabled():
            return self._all_reduce_out_place(input_)
        dist.all_reduce(input_, group=self.device_group)
        return input_
