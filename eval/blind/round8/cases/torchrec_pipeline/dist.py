import torch

from torchrec.distributed.dist_data import KJTAllToAll


def start_sparse_data_dist(name, module, features, ctx):
    stream = ctx.data_dist_stream if ctx.grad_enabled else None
    codecs = module.qcomm_codecs_registry
    codec = codecs.get("forward") if ctx.grad_enabled and codecs is not None else None
    dist = KJTAllToAll(pg=module.pg, splits=module.feature_splits, stagger=module.stagger,
                       codec=codec)
    with torch.cuda.stream(stream) if stream is not None else torch.cuda.stream(torch.cuda.current_stream()):
        awaitable = dist(features)
    ctx.input_dist_tensors_requests[name] = awaitable
    if stream is not None:
        features.record_stream(stream)
    return awaitable


def wait_sparse_data_dist(ctx):
    return {name: req.wait() for name, req in ctx.input_dist_tensors_requests.items()}
