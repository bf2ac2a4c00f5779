# adapted from pytorch/torchtitan torchtitan/models/moe.py
import torch
import torch.distributed as dist
from torch.distributed._functional_collectives import all_to_all_single, all_to_all_single_autograd
from torch.distributed.tensor import DeviceMesh, distribute_module

from .moe import GroupedExperts


class ExpertParallel:
    def __init__(self):
        self.input_splits = None
        self.output_splits = None

    def _token_dispatch(self, mod, inputs, device_mesh: DeviceMesh):
        assert isinstance(mod, GroupedExperts), type(mod)
        routed_input, num_tokens_per_expert = inputs
        ep_size = device_mesh.shape[0]
        with torch.no_grad():
            num_tokens_per_expert_group = all_to_all_single(
                num_tokens_per_expert, None, None, group=device_mesh.get_group(),
            )
            input_splits = num_tokens_per_expert.view(ep_size, -1).sum(dim=1).to(torch.device("cpu"), non_blocking=True)
            output_splits = num_tokens_per_expert_group.view(ep_size, -1).sum(dim=1).to(torch.device("cpu"))
            self.input_splits = input_splits.tolist()
            self.output_splits = output_splits.tolist()
        if getattr(mod, "_ep_overlap_dispatch", False):
            # issue the token all-to-all asynchronously and overlap it with the permutation
            routed_input = all_to_all_single_autograd(
                routed_input, self.output_splits, self.input_splits, device_mesh.get_group(),
            )
        else:
            out = routed_input.new_empty((sum(self.output_splits), routed_input.shape[-1]))
            dist.all_to_all_single(out, routed_input, self.output_splits, self.input_splits,
                                   group=device_mesh.get_group())
            routed_input = out
        return routed_input, num_tokens_per_expert_group

    def _apply(self, module, device_mesh: DeviceMesh):
        return distribute_module(module, device_mesh, partition_fn=None,
                                 input_fn=self._token_dispatch, output_fn=self._token_combine)
