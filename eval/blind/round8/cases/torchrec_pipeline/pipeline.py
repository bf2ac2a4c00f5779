import functools

import torch

from .context import TrainPipelineContext
from .dist import start_sparse_data_dist, wait_sparse_data_dist


def _on_embedding_grad(name, stats, grad):
    stats[name] = grad.norm().item()
    return grad


class SparseDistPipeline:

    def __init__(self, model, sharded_modules, device):
        self.model = model
        self.sharded_modules = sharded_modules
        self.device = device
        self._data_dist_stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.grad_stats = {}

    def progress(self, batch):
        ctx = TrainPipelineContext(grad_enabled=torch.is_grad_enabled(), data_dist_stream=self._data_dist_stream)
        for name, module in self.sharded_modules.items():
            start_sparse_data_dist(name, module, batch.sparse_features, ctx)
        dist_inputs = wait_sparse_data_dist(ctx)
        embeddings = {name: self.sharded_modules[name].compute(kjt) for name, kjt in dist_inputs.items()}
        for name, emb in embeddings.items():
            if ctx.grad_enabled and emb.requires_grad:
                emb.register_hook(functools.partial(_on_embedding_grad, name, self.grad_stats))
        return self.model(batch.dense_features, embeddings)
