# adapted from pytorch/torchtune torchtune/modules/loss/ce_chunked_output_loss.py
from typing import List

import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor


class CEWithChunkedOutputLoss(torch.nn.Module):
    """
    Cross-entropy with chunked outputs that saves memory by only upcasting one chunk at a time.
    """

    def __init__(self, num_output_chunks: int = 8, ignore_index: int = -100):
        super().__init__()
        self.num_output_chunks = num_output_chunks
        self.ignore_index = ignore_index

    def compute_cross_entropy(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """
        Upcast logits to fp32 and compute cross entropy loss.
        """
        if isinstance(logits, DTensor):
            logits = logits.full_tensor()
        return F.cross_entropy(
            logits.float(), labels, ignore_index=self.ignore_index, reduction="sum"
        )

    def forward(self, logits: List[torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
        total_elements = (labels != self.ignore_index).sum()

        # chunking only saves activation memory for backward; eval does it in one shot
        num_chunks = self.num_output_chunks if torch.is_grad_enabled() else 1
        if num_chunks == 1:
            logits = [torch.cat(logits, dim=1)]

        # chunk and reshape labels (bsz, num_tokens, vocab) -> [(bsz*num_tokens/num_chunks, vocab)]
        labels = [
            target_chunk.reshape(-1)
            for target_chunk in labels.tensor_split(num_chunks, dim=1)
        ]

        # reshape logits [(bsz, num_tokens/num_chunks, vocab)] -> [(bsz*num_tokens/num_chunks, vocab)]
        logits = [
            logit_chunk.reshape(-1, logit_chunk.size(-1)) for logit_chunk in logits
        ]

        # compute one chunk at a time
        total_loss = 0.0
        for logits_chunk, labels_chunk in zip(logits, labels):
            total_loss += self.compute_cross_entropy(logits_chunk, labels_chunk)

        return total_loss / total_elements
