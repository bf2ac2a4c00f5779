from typing import NamedTuple, Optional

import torch


class EmbeddingDistContext(NamedTuple):
    stream: Optional[torch.cuda.Stream]
    build_graph: bool
    batch_size: int


def make_context(stream: Optional[torch.cuda.Stream], batch_size: int) -> EmbeddingDistContext:
    return EmbeddingDistContext(stream=stream, build_graph=torch.is_grad_enabled(), batch_size=batch_size)
