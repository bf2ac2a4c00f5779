# Modelled on NeMo nemo/collections/nlp/modules/common/megatron/transformer.py (ParallelTransformer.forward)
from contextlib import nullcontext

import torch

from megatron.core import parallel_state, tensor_parallel

try:
    from transformer_engine.pytorch import fp8_autocast

    HAVE_TE = True
except (ImportError, ModuleNotFoundError):
    HAVE_TE = False


class MegatronModule(torch.nn.Module):
    def __init__(self, share_token_embeddings=True):
        super().__init__()
        self.share_token_embeddings = share_token_embeddings

    def _grad_active(self) -> bool:
        return torch.is_grad_enabled()


class ParallelTransformer(MegatronModule):
    def _checkpointed_forward(self, hidden_states, attention_mask, encoder_output, enc_dec_attn_mask,
                              rotary_pos_emb):
        def custom(start, end):
            def custom_forward(*inputs):
                x_ = inputs[0]
                for index in range(start, end):
                    x_ = self._get_layer(index)(x_, inputs[1], encoder_output=inputs[2],
                                                enc_dec_attn_mask=inputs[3], rotary_pos_emb=inputs[4])
                return x_

            return custom_forward

        l = 0
        while l < self.num_layers:
            hidden_states = tensor_parallel.checkpoint(
                custom(l, l + self.activations_checkpoint_num_layers), False,
                hidden_states, attention_mask, encoder_output, enc_dec_attn_mask, rotary_pos_emb,
            )
            l += self.activations_checkpoint_num_layers
        return hidden_states

    def forward(self, hidden_states, attention_mask, encoder_output=None, enc_dec_attn_mask=None,
                rotary_pos_emb=None, num_micro_batches=1):
        if not self.pre_process:
            hidden_states = self.input_tensor

        if self.sequence_parallel:
            rng_context = tensor_parallel.random.get_cuda_rng_tracker().fork()
        else:
            rng_context = nullcontext()

        with rng_context:
            fp8_group = None
            if parallel_state.model_parallel_is_initialized():
                fp8_group = parallel_state.get_amax_reduction_group()

            if HAVE_TE:
                fp8_context = fp8_autocast(
                    enabled=self.fp8 and self._grad_active(), fp8_recipe=self.fp8_recipe, fp8_group=fp8_group
                )
            else:
                fp8_context = nullcontext()

            with fp8_context:
                if (self.activations_checkpoint_granularity == 'full'
                        and self.activations_checkpoint_num_layers > 0
                        and torch.is_grad_enabled()):
                    hidden_states = self._checkpointed_forward(
                        hidden_states, attention_mask, encoder_output, enc_dec_attn_mask, rotary_pos_emb
                    )
                else:
                    for index in range(self.num_layers):
                        layer = self._get_layer(index)
                        hidden_states = layer(
                            hidden_states,
                            attention_mask,
                            encoder_output=encoder_output,
                            enc_dec_attn_mask=enc_dec_attn_mask,
                            rotary_pos_emb=rotary_pos_emb,
                            is_first_microbatch=self.is_first_microbatch,
                        )

        # Skip counter update for eval and activation checkpointing
        if torch.is_grad_enabled() and self.training:
            self.microbatch_count += 1
            if self.microbatch_count % num_micro_batches == 0:
                self.microbatch_count = 0
                self.is_first_microbatch = True
            else:
                self.is_first_microbatch = False

        output = hidden_states
        if self.post_process:
            output = self.final_layernorm(hidden_states)
        return output
