from typing import List, Optional, Union

import torch


def deallocate_output_tensor(out: Optional[torch.Tensor], deallocate_pipeline_outputs: bool = False) -> None:
    if (out is None) or (not deallocate_pipeline_outputs):
        return
    assert isinstance(out, torch.Tensor), "expected Tensor, found %s." % type(out).__name__
    assert out._base is None, "counter-productive to free a view of another tensor."
    out.data = torch.empty((1,), device=out.device, dtype=out.dtype)


def get_tensor_shapes(seq_length: int, micro_batch_size: int, hidden_size: int,
                      sequence_parallel: bool, tp_size: int) -> List[tuple]:
    if sequence_parallel:
        seq_length = seq_length // tp_size
    return [(seq_length, micro_batch_size, hidden_size)]


def listify_model(model: Union[torch.nn.Module, List[torch.nn.Module]]) -> List[torch.nn.Module]:
    return model if isinstance(model, list) else [model]
