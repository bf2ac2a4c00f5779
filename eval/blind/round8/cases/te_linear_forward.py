import torch

from transformer_engine.pytorch.fp8 import FP8GlobalStateManager
from transformer_engine.pytorch.cpp_extensions import general_gemm
from transformer_engine.pytorch.distributed import gather_along_first_dim, reduce_scatter_along_first_dim


class _Linear(torch.autograd.Function):

    @staticmethod
    def forward(ctx, weight, inp, bias, non_tensor_args):
        (
            fp8,
            input_quantizer,
            weight_quantizer,
            output_quantizer,
            tp_group,
            sequence_parallel,
            parallel_mode,
            is_grad_enabled,
        ) = non_tensor_args
        inputmat = inp.view(-1, inp.shape[-1])
        if fp8:
            if is_grad_enabled:
                weight_quantizer.set_usage(rowwise=True, columnwise=True)
                input_quantizer.set_usage(rowwise=True, columnwise=not sequence_parallel)
            else:
                weight_quantizer.set_usage(rowwise=True, columnwise=False)
                input_quantizer.set_usage(rowwise=True, columnwise=False)
            inputmat = input_quantizer(inputmat)
            weightmat = weight_quantizer(weight)
        else:
            weightmat = weight
        if parallel_mode == "column" and sequence_parallel:
            inputmat_total, _ = gather_along_first_dim(inputmat, tp_group)
        else:
            inputmat_total = inputmat
        out, *_ = general_gemm(weightmat, inputmat_total, quantization_params=output_quantizer, bias=bias)
        if parallel_mode == "row" and sequence_parallel:
            out, _ = reduce_scatter_along_first_dim(out, tp_group)
        if is_grad_enabled:
            ctx.save_for_backward(inputmat, weightmat)
            ctx.tp_group = tp_group
        return out.view(-1, *inp.shape[1:-1], out.shape[-1])


class Linear(torch.nn.Module):

    def __init__(self, weight, bias, tp_group, sequence_parallel, parallel_mode, quantizers):
        super().__init__()
        self.weight = weight
        self.bias = bias
        self.tp_group = tp_group
        self.sequence_parallel = sequence_parallel
        self.parallel_mode = parallel_mode
        self.quantizers = quantizers
        self.fp8 = False
        self.fp8_meta = {"recipe": None}

    def prepare_forward(self):
        self.fp8 = FP8GlobalStateManager.is_fp8_enabled()
        if self.fp8 and torch.is_grad_enabled() and not FP8GlobalStateManager.fp8_graph_capturing():
            FP8GlobalStateManager.add_fp8_tensors_to_global_buffer(self.fp8_meta)

    def forward(self, inp):
        self.prepare_forward()
        if torch.is_grad_enabled():
            linear_fn = _Linear.apply
            args = []
        else:
            linear_fn = _Linear.forward
            args = [None]
        non_tensor_args = (
            self.fp8,
            self.quantizers["input"],
            self.quantizers["weight"],
            self.quantizers["output"],
            self.tp_group,
            self.sequence_parallel,
            self.parallel_mode,
            torch.is_grad_enabled(),
        )
        args += (self.weight, inp, self.bias, non_tensor_args)
        return linear_fn(*args)
