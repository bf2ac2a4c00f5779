import torch

from .layers import ColumnParallelLinear
from .mode import current_mode


def _project(hidden, weight, bias, *, grad=True, autocast=False):
    out_dtype = torch.float32 if grad else hidden.dtype
    logits = torch.matmul(hidden.to(out_dtype), weight.t().to(out_dtype))
    if bias is not None:
        logits = logits + bias.to(out_dtype)
    return logits


def vocab_parallel_logits(hidden_states, word_embeddings_weight, bias=None, output_layer: ColumnParallelLinear = None):
    mode_kwargs = current_mode()
    if output_layer is not None:
        logits, _ = output_layer(hidden_states, mode=mode_kwargs)
        return logits
    return _project(hidden_states, word_embeddings_weight, bias, **mode_kwargs)
