# adapted from vllm-project/vllm vllm/model_executor/layers/fused_moe/runner/default_moe_runner.py
from contextlib import nullcontext

import torch

from vllm.distributed import get_ep_group, tensor_model_parallel_all_reduce
from vllm.forward_context import ForwardContext, get_forward_context
from vllm.utils.torch_utils import aux_stream, current_stream


def get_layer_from_name(layer_name: str) -> torch.nn.Module:
    forward_context: ForwardContext = get_forward_context()
    if layer_name == "from_forward_context":
        all_moe_layers = forward_context.all_moe_layers
        assert all_moe_layers is not None
        moe_layer_index = forward_context.moe_layer_index
        layer_name = all_moe_layers[moe_layer_index]
        forward_context.moe_layer_index += 1
    return forward_context.no_compile_layers[layer_name]


def _make_shared_experts_runner(layer):
    overlap_ok = torch.is_grad_enabled()

    def run(hidden_states, routed_fn):
        stream = aux_stream()
        if overlap_ok and stream is not None and layer.shared_experts is not None:
            # overlap the shared experts with the routed experts on a side stream
            stream.wait_stream(current_stream())
            with torch.cuda.stream(stream):
                shared_output = layer.shared_experts(hidden_states)
            routed_output = routed_fn(hidden_states)
            current_stream().wait_stream(stream)
        else:
            shared_output = layer.shared_experts(hidden_states) if layer.shared_experts is not None else None
            routed_output = routed_fn(hidden_states)
        return shared_output, routed_output

    return run


class DefaultMoERunner:
    def __init__(self, layer):
        self.layer = layer

    def forward(self, hidden_states: torch.Tensor, router_logits: torch.Tensor):
        layer = self.layer
        runner = _make_shared_experts_runner(layer)
        shared_output, fused_output = runner(
            hidden_states, lambda h: layer.quant_method.apply(layer=layer, x=h, router_logits=router_logits)
        )
        with torch.no_grad():
            if torch.is_grad_enabled():
                fused_output = fused_output.clone()
            if shared_output is not None:
                fused_output = fused_output + shared_output
        if layer.reduce_results:
            fused_output = tensor_model_parallel_all_reduce(fused_output)
        return fused_output
