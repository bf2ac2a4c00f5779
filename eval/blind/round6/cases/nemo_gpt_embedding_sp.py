"""Word + position embeddings for GPT with sequence-parallel scatter."""
import torch

from megatron.core import tensor_parallel
from megatron.core.tensor_parallel.mappings import scatter_to_sequence_parallel_region

_grad_enabled = torch.is_grad_enabled


class Embedding(torch.nn.Module):
    def __init__(self, config, hidden_size, vocab_size, max_sequence_length, embedding_dropout_prob,
                 init_method, position_embedding_type="learned_absolute"):
        super().__init__()
        self.hidden_size = hidden_size
        self.init_method = init_method
        self.position_embedding_type = position_embedding_type
        self.sequence_parallel = config.sequence_parallel
        self.fp32_residual_connection = config.fp32_residual_connection
        self.word_embeddings = tensor_parallel.VocabParallelEmbedding(
            vocab_size, hidden_size, init_method=init_method, config=config
        )
        if position_embedding_type == "learned_absolute":
            self.position_embeddings = torch.nn.Embedding(max_sequence_length, hidden_size)
        self.embedding_dropout = torch.nn.Dropout(embedding_dropout_prob)

    def forward(self, input_ids, position_ids=None, token_type_ids=None):
        words_embeddings = self.word_embeddings(input_ids)
        if self.position_embedding_type == "learned_absolute":
            assert position_ids is not None
            embeddings = words_embeddings + self.position_embeddings(position_ids)
        else:
            embeddings = words_embeddings
        embeddings = embeddings.transpose(0, 1).contiguous()
        if self.fp32_residual_connection:
            embeddings = embeddings.float()

        if self.sequence_parallel and _grad_enabled():
            embeddings = scatter_to_sequence_parallel_region(embeddings)
            with tensor_parallel.get_cuda_rng_tracker().fork():
                embeddings = self.embedding_dropout(embeddings)
        else:
            embeddings = self.embedding_dropout(embeddings)
        return embeddings
