# Modelled on ColossalAI colossalai/nn/layer/moe/layers.py (MoeLayer)
import torch
import torch.nn as nn
import torch.nn.functional as F

from colossalai.nn.layer.moe._operation import COL_MOE_KERNEL_FLAG, AllToAll, MoeCombine, MoeDispatch
from colossalai.nn.layer.moe._operation import moe_dispatch_cuda_kernel  # raw kernel, no autograd

from .routers import MoeRouter


class MoeLayer(nn.Module):
    def __init__(self, dim_model: int, num_experts: int, router: MoeRouter, experts):
        super().__init__()
        self.d_model = dim_model
        self.num_experts = num_experts
        self.gate_weight = torch.nn.Parameter(torch.empty(num_experts, dim_model))
        self.router = router
        self.experts = experts
        self.use_kernel = COL_MOE_KERNEL_FLAG
        self.ep_group = experts.dist_info.ep_group
        self.ep_size = experts.dist_info.ep_size
        self.num_local_experts = experts.num_local_experts

    def a2a_process(self, dispatch_data: torch.Tensor):
        expert_input = AllToAll.apply(dispatch_data, self.ep_group)
        input_shape = expert_input.shape
        expert_input = expert_input.reshape(self.ep_size, self.num_local_experts, -1, self.d_model)
        expert_output = self.experts(expert_input)
        expert_output = AllToAll.apply(expert_output, self.ep_group)
        return expert_output.reshape(input_shape)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        grad_on = torch.is_grad_enabled()
        tokens = inputs.reshape(-1, self.d_model)
        fp32_input = tokens.to(torch.float)
        fp32_weight = self.gate_weight.to(torch.float)
        gate_output = F.linear(fp32_input, fp32_weight)

        route_result_list = self.router(inputs=gate_output, use_kernel=self.use_kernel, ep_group=self.ep_group,
                                        grad_on=grad_on)

        if self.use_kernel:
            if grad_on:
                dispatch_data = MoeDispatch.apply(tokens, *route_result_list[1:])
            else:
                dispatch_data = moe_dispatch_cuda_kernel(tokens, *route_result_list[1:])
            dispatch_data = dispatch_data.reshape(self.num_experts, -1, self.d_model)
        else:
            sec_mask_f = route_result_list[1].type_as(inputs)
            dispatch_data = torch.matmul(sec_mask_f.permute(1, 2, 0), tokens)

        expert_output = self.a2a_process(dispatch_data)

        if self.use_kernel:
            expert_output = expert_output.reshape(-1, self.d_model)
            ans = MoeCombine.apply(expert_output, *route_result_list)
        else:
            combine_weights = route_result_list[0].type_as(inputs)
            combine_weights = combine_weights.view(combine_weights.shape[0], -1)
            expert_output = expert_output.view(-1, expert_output.shape[-1])
            ans = torch.matmul(combine_weights, expert_output)
        return ans.reshape(inputs.shape)
