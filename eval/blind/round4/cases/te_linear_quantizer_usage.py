# Modeled on TransformerEngine transformer_engine/pytorch/module/linear.py
# (Linear.forward -> _Linear.apply with is_grad_enabled in the args tuple; quantizer usage
# flags; symmetric all-reduce type for row-parallel output).
import torch


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight, inp, bias, non_tensor_args):
        (is_first_microbatch, fp8, input_quantizer, weight_quantizer, tp_group, tp_size,
         parallel_mode, symmetric_ar_type, is_grad_enabled) = non_tensor_args
        from transformer_engine.pytorch.distributed import allreduce, symmetric_all_reduce
        if fp8:
            # columnwise (transposed) copies are consumed only by the wgrad/dgrad GEMMs
            input_quantizer.set_usage(rowwise=True, columnwise=is_grad_enabled and weight.requires_grad)
            weight_quantizer.set_usage(rowwise=True, columnwise=is_grad_enabled)
            inputmat = input_quantizer(inp)
            weightmat = weight_quantizer(weight)
        else:
            inputmat, weightmat = inp, weight
        out = torch.nn.functional.linear(inputmat.dequantize() if fp8 else inputmat,
                                         weightmat.dequantize() if fp8 else weightmat, bias)
        if is_grad_enabled:
            ctx.save_for_backward(inputmat, weightmat)
            ctx.tp_group = tp_group
        if parallel_mode == "row" and tp_size > 1:
            ar_type = symmetric_ar_type if is_grad_enabled else None
            if ar_type is not None:
                out, _ = symmetric_all_reduce(out, tp_group, all_reduce_type=ar_type)
            else:
                out, _ = allreduce(out, tp_group)
        return out

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError


class Linear(torch.nn.Module):
    def __init__(self, in_features, out_features, tp_group=None, tp_size=1, parallel_mode=None,
                 symmetric_ar_type=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(out_features, in_features))
        self.bias = None
        self.tp_group, self.tp_size = tp_group, tp_size
        self.parallel_mode = parallel_mode
        self.symmetric_ar_type = symmetric_ar_type
        self.fp8 = False
        self.quantizers = (None, None)

    def forward(self, inp, is_first_microbatch=None):
        if torch.is_grad_enabled():
            linear_fn = _Linear.apply
            autograd_ctx = []
        else:
            linear_fn = _Linear.forward
            autograd_ctx = [None]
        non_tensor_args = (
            is_first_microbatch, self.fp8, self.quantizers[0], self.quantizers[1],
            self.tp_group, self.tp_size, self.parallel_mode, self.symmetric_ar_type,
            torch.is_grad_enabled(),
        )
        return linear_fn(*autograd_ctx, self.weight, inp, self.bias, non_tensor_args)
