# Adapted from NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py (ColumnParallelLinear.forward).
import torch

from megatron.core.tensor_parallel.layers import (
    linear_with_frozen_weight,
    linear_with_grad_accumulation_and_async_allreduce,
)
from megatron.core.tensor_parallel.mappings import (
    _gather_along_last_dim,
    copy_to_tensor_model_parallel_region,
    gather_from_tensor_model_parallel_region,
)
from megatron.core.tensor_parallel.overlap import tp_overlapped_all_gather_linear


class ColumnParallelLinear(torch.nn.Module):
    def forward(self, input_: torch.Tensor, weight=None, runtime_gather_output=None):
        if weight is None:
            weight = self.weight
        bias = self.bias if not self.skip_bias_add else None

        if self.allreduce_dgrad or self.sequence_parallel or self.explicit_expert_comm or self.disable_grad_reduce:
            input_parallel = input_
        else:
            input_parallel = copy_to_tensor_model_parallel_region(input_, group=self.tp_group)

        if not weight.requires_grad:
            self._forward_impl = linear_with_frozen_weight
        else:
            self._forward_impl = linear_with_grad_accumulation_and_async_allreduce

        allreduce_dgrad = False if self.explicit_expert_comm else self.allreduce_dgrad

        if (grad_on := torch.is_grad_enabled()) and self.config.tp_comm_overlap_ag and self.sequence_parallel:
            output_parallel = tp_overlapped_all_gather_linear(
                input_parallel, weight, bias, tp_group=self.tp_group, num_chunks=self.config.tp_comm_split_ag
            )
        else:
            output_parallel = self._forward_impl(
                input=input_parallel,
                weight=weight,
                bias=bias,
                gradient_accumulation_fusion=self.gradient_accumulation_fusion,
                allreduce_dgrad=allreduce_dgrad,
                sequence_parallel=False if self.explicit_expert_comm else self.sequence_parallel,
                grad_output_buffer=self.grad_output_buffer if self.config.defer_embedding_wgrad_compute else None,
                tp_group=self.tp_group,
            )

        gather_output = self.gather_output if runtime_gather_output is None else runtime_gather_output
        if gather_output:
            assert not self.sequence_parallel
            gather_fn = gather_from_tensor_model_parallel_region if grad_on else _gather_along_last_dim
            output = gather_fn(output_parallel, group=self.tp_group)
        else:
            output = output_parallel
        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias
