import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from torchao.float8.config import Float8LinearConfig, ScalingType
from torchao.float8.float8_tensor import GemmInputRole, LinearMMConfig, hp_tensor_and_scale_to_float8
from torchao.float8.float8_utils import amax_to_scale, e4m3_dtype, e5m2_dtype


def tensor_to_amax(x, reduce_amax=False, device_mesh=None):
    amax = torch.max(torch.abs(x))
    if reduce_amax and dist.is_initialized():
        pg = device_mesh.get_group() if device_mesh is not None else None
        amax = funcol.all_reduce(amax, "MAX", pg)
    return amax


def hp_tensor_to_float8_dynamic(hp_tensor, float8_dtype, linear_mm_config, reduce_amax=False,
                                gemm_input_role=GemmInputRole.INPUT, device_mesh=None):
    amax = tensor_to_amax(hp_tensor, reduce_amax, device_mesh)
    scale = amax_to_scale(amax, float8_dtype)
    return hp_tensor_and_scale_to_float8(hp_tensor, scale, float8_dtype, linear_mm_config, gemm_input_role)


class NoopFwToFloat8BwDynamic(torch.autograd.Function):

    @staticmethod
    def forward(ctx, tensor, linear_mm_config, target_dtype):
        ctx.linear_mm_config = linear_mm_config
        ctx.target_dtype = target_dtype
        return tensor

    @staticmethod
    def backward(ctx, gradY):
        fp8_tensor = hp_tensor_to_float8_dynamic(gradY, ctx.target_dtype, ctx.linear_mm_config,
                                                 gemm_input_role=GemmInputRole.GRAD_OUTPUT)
        return fp8_tensor, None, None


class Float8Linear(torch.nn.Linear):

    def __init__(self, *args, config: Float8LinearConfig, device_mesh=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.config = config
        self.device_mesh = device_mesh
        self.linear_mm_config = LinearMMConfig()
        self.scaling_type_input = config.cast_config_input.scaling_type

    def cast_input_to_float8(self, input):
        if torch.is_autocast_enabled():
            input = input.to(torch.get_autocast_gpu_dtype())
        reduce = all([
            self.config.enable_amax_reduction_for_input,
            self.device_mesh is not None,
            torch.is_grad_enabled(),
        ])
        return hp_tensor_to_float8_dynamic(input, e4m3_dtype, self.linear_mm_config,
                                           reduce_amax=reduce, device_mesh=self.device_mesh)

    def cast_weight_to_float8(self, weight):
        return hp_tensor_to_float8_dynamic(weight, e4m3_dtype, self.linear_mm_config,
                                           gemm_input_role=GemmInputRole.WEIGHT)

    def cast_output_to_float8_in_bw(self, output):
        if torch.is_grad_enabled() and output.requires_grad:
            output = NoopFwToFloat8BwDynamic.apply(output, self.linear_mm_config, e5m2_dtype)
        return output

    def forward(self, input):
        input_fp8 = self.cast_input_to_float8(input)
        weight_fp8 = self.cast_weight_to_float8(self.weight)
        output = torch.mm(input_fp8.reshape(-1, input_fp8.shape[-1]), weight_fp8.t())
        output = output.reshape(*input.shape[:-1], output.shape[-1])
        output = self.cast_output_to_float8_in_bw(output)
        if self.bias is not None:
            output = output + self.bias.to(output.dtype)
        return output
