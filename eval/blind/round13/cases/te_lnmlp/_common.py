# adapted from NVIDIA/TransformerEngine transformer_engine/pytorch/module/_common.py
"""Internal function used by multiple modules."""
from typing import Union

import torch

from .. import cpp_extensions as tex

_ub_communicators = {}


def get_ub(name: str):
    """Get userbuffer communicator corresponding to give key."""
    assert name in _ub_communicators, f"UB for {name} is not registered."
    return _ub_communicators[name]


def clear_tensor_data(*tensors: Union[torch.Tensor, None]) -> None:
    """
    Trick to deallocate tensor memory when delete operation does not
    release the tensor due to PyTorch override.

    Must be used carefully.
    """
    for t in tensors:
        if t is not None:
            t.data = torch.Tensor()
            del t


def _act_func(activation: str):
    funcs = {
        "gelu": (tex.gelu, tex.dgelu, tex.dbias_dgelu),
        "relu": (tex.relu, tex.drelu, tex.dbias_drelu),
        "geglu": (tex.geglu, tex.dgeglu, None),
        "reglu": (tex.reglu, tex.dreglu, None),
        "swiglu": (tex.swiglu, tex.dswiglu, None),
        "qgelu": (tex.qgelu, tex.dqgelu, tex.dbias_dqgelu),
        "srelu": (tex.srelu, tex.dsrelu, tex.dbias_dsrelu),
    }
    if activation not in funcs:
        raise NotImplementedError("Activation type " + activation + " is not supported!")
    return funcs[activation]
