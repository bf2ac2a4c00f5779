# adapted from vllm-project/vllm vllm/model_executor/layers/linear.py
import torch
from torch.nn.parameter import Parameter

import vllm.envs as envs
from vllm.distributed import (
    divide,
    get_tensor_model_parallel_rank,
    get_tensor_model_parallel_world_size,
    split_tensor_along_last_dim,
    tensor_model_parallel_all_reduce,
)
from vllm.distributed.communication_op import tensor_model_parallel_custom_all_reduce
from vllm.model_executor.custom_op import PluggableLayer
from vllm.model_executor.layers.batch_invariant import (
    linear_batch_invariant,
)
from vllm.model_executor.layers.quantization.base_config import QuantizeMethodBase
from vllm.model_executor.layers.utils import (
    dispatch_unquantized_gemm,
)
from vllm.platforms import current_platform


class UnquantizedLinearMethod(QuantizeMethodBase):
    """Linear method without quantization."""

    def apply(
        self,
        layer: torch.nn.Module,
        x: torch.Tensor,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        # Training engines (RL weight sync) need bitwise-reproducible logits.
        batch_invariant = envs.VLLM_BATCH_INVARIANT or torch.is_grad_enabled()
        if batch_invariant and current_platform.is_cuda_alike():
            return linear_batch_invariant(x, layer.weight, bias)
        return dispatch_unquantized_gemm()(layer, x, layer.weight, bias)


@PluggableLayer.register("row_parallel_linear")
class RowParallelLinear(PluggableLayer):
    """Linear layer with row parallelism."""

    def __init__(self, input_size: int, output_size: int, bias: bool = True,
                 input_is_parallel: bool = True, skip_bias_add: bool = False,
                 reduce_results: bool = True, prefix: str = ""):
        super().__init__()
        self.tp_rank = get_tensor_model_parallel_rank()
        self.tp_size = get_tensor_model_parallel_world_size()
        self.input_size_per_partition = divide(input_size, self.tp_size)
        self.input_is_parallel = input_is_parallel
        self.reduce_results = reduce_results
        self.skip_bias_add = skip_bias_add
        self.quant_method = UnquantizedLinearMethod()
        self.weight = Parameter(torch.empty(output_size, self.input_size_per_partition))
        self.bias = Parameter(torch.empty(output_size)) if bias else None

    def forward(self, input_):
        if self.input_is_parallel:
            input_parallel = input_
        else:
            splitted_input = split_tensor_along_last_dim(
                input_, num_partitions=self.tp_size
            )
            input_parallel = splitted_input[self.tp_rank].contiguous()

        # Only fuse bias add into GEMM for rank 0 (this ensures that
        # bias will not get added more than once in TP>1 case)
        bias_ = None if (self.tp_rank > 0 or self.skip_bias_add) else self.bias
        output_parallel = self.quant_method.apply(self, input_parallel, bias_)

        if self.reduce_results and self.tp_size > 1:
            # the one-shot custom allreduce buffers are only registered for inference graphs
            use_custom_ar = torch.is_inference_mode_enabled() and envs.VLLM_USE_CUSTOM_ALL_REDUCE
            if use_custom_ar:
                output = tensor_model_parallel_custom_all_reduce(output_parallel)
            else:
                output = tensor_model_parallel_all_reduce(output_parallel)
        else:
            output = output_parallel

        output_bias = self.bias if self.skip_bias_add else None
        return output, output_bias
