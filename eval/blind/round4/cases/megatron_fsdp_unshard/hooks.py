import torch

from .all_gather_pipeline import PrefetchOrder


def register_fsdp_forward_hooks(root_module, fsdp_unit_modules, ag_pipeline, buffer):
    handles = []
    for module in root_module.modules():
        if not isinstance(module, tuple(fsdp_unit_modules)):
            continue

        def _pre_forward_param_unshard(module, args, kwargs, _ag=ag_pipeline):
            grad_on = torch.is_grad_enabled()
            ag_kwargs = {"prefetch_order": PrefetchOrder.FORWARD_PASS_ORDER, "grad_enabled": grad_on}
            module._fsdp_ag_kwargs = ag_kwargs
            _ag.all_gather_params(list(module.parameters()), **ag_kwargs)
            return args, kwargs

        def _post_forward(module, input, output, _ag=ag_pipeline):
            bucket_ids = sorted({buffer.param_to_bucket[p] for p in module.parameters()})
            _ag.release_after_forward(bucket_ids, **{"grad_enabled": module._fsdp_ag_kwargs["grad_enabled"]})
            if torch.is_grad_enabled():
                # re-gather in backward order before this module's backward runs
                for t in (output if isinstance(output, tuple) else (output,)):
                    if torch.is_tensor(t) and t.requires_grad:
                        t.register_hook(lambda g, m=module: _ag.all_gather_params(
                            list(m.parameters()), prefetch_order=PrefetchOrder.BACKWARD_PASS_ORDER) or g)
            return output

        handles.append(module.register_forward_pre_hook(_pre_forward_param_unshard, with_kwargs=True))
        handles.append(module.register_forward_hook(_post_forward))
    return handles
