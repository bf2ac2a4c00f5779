import torch

from thunder.core.transforms import split_forward_backward
from thunder.executors.torch_autograd import connect_to_autograd
from thunder.extend import get_executor


def _cache_info(args, kwargs):
    return {
        "is_grad_enabled": torch.is_grad_enabled(),
        "autocast_dtype": torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None,
        "num_args": len(args),
        "kwarg_names": tuple(sorted(kwargs)),
    }


def _select_executors(executors_list, cache_info):
    cudnn = get_executor("cudnn")
    selected = []
    for ex in executors_list:
        if ex is cudnn and cache_info["is_grad_enabled"]:
            continue
        selected.append(ex)
    return tuple(selected)


class CompiledEntry:

    def __init__(self, computation_fn, backward_fn, epilogue):
        self.computation_fn = computation_fn
        self.backward_fn = backward_fn
        self.epilogue = epilogue


def build_entry(cd, computation_trc, inps, cache_info):
    executors = _select_executors(cd.executors_list, cache_info)
    requires_grad = any(isinstance(t, torch.Tensor) and t.requires_grad for t in inps)
    if cache_info["is_grad_enabled"] and requires_grad:
        fw_trace, bw_trace = split_forward_backward(computation_trc, cd, executors, *inps)
        return CompiledEntry(fw_trace.python_callable(), bw_trace.python_callable(), None)
    extrace = cd.transform_for_execution(computation_trc, executors_list=executors)
    return CompiledEntry(extrace.python_callable(), None, None)


def run_cached(cd, cache, fn_trace, args, kwargs):
    info = _cache_info(args, kwargs)
    key = tuple(sorted(info.items()))
    entry = cache.get(key)
    if entry is None:
        computation_trc, inps = fn_trace(*args, **kwargs)
        entry = build_entry(cd, computation_trc, inps, info)
        cache[key] = entry
    result = entry.computation_fn(*args)
    if entry.backward_fn is not None:
        result = connect_to_autograd(entry.backward_fn, result)
    return result
