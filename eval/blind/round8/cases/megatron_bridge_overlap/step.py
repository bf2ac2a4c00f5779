import torch

from .runtime import resolve_runtime_flags


def _configure_model_chunk(chunk, flags, cfg):
    for module in chunk.modules():
        if hasattr(module, "ub_overlap_ag"):
            module.ub_overlap_ag = flags.tp_comm_overlap
            module.ub_overlap_rs = flags.tp_comm_overlap
    if flags.grad_enabled and cfg.defer_embedding_wgrad_compute:
        chunk.embedding_activation_buffer = []
        chunk.grad_output_buffer = []
    ddp = getattr(chunk, "ddp_config", None)
    if ddp is not None:
        ddp.overlap_grad_reduce = flags.overlap_grad_reduce


def forward_step(model_chunks, batch, cfg, optimizer=None):
    flags = resolve_runtime_flags(cfg, torch.is_grad_enabled())
    for chunk in model_chunks:
        _configure_model_chunk(chunk, flags, cfg)
    if optimizer is not None and flags.overlap_param_gather:
        optimizer.start_param_sync(model_index=0, force_dispatch=True)
    elif optimizer is not None:
        optimizer.finish_param_sync(model_index=0)
    return [chunk(**batch) for chunk in model_chunks]
