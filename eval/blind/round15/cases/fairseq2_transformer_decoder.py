# adapted from facebookresearch/fairseq2 src/fairseq2/nn/transformer/decoder.py
from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import Dict, Iterable, Iterator, Optional, Protocol, Tuple, final

import torch
from torch import Tensor
from torch.nn import Module
from torch.nn import ModuleList as TorchModuleList
from torch.utils.hooks import RemovableHandle

from fairseq2.nn.incremental_state import IncrementalStateBag
from fairseq2.nn.normalization import LayerNorm
from fairseq2.nn.padding import PaddingMask
from fairseq2.nn.transformer.attention_mask import AttentionMaskFactory, CausalAttentionMaskFactory
from fairseq2.nn.transformer.decoder_layer import TransformerDecoderLayer
from fairseq2.nn.transformer.layer_norm import LayerNormFactory, create_standard_layer_norm
from fairseq2.nn.transformer.norm_order import TransformerNormOrder
from fairseq2.typing import DataType, Device, finaloverride


class ModuleList(TorchModuleList):
    """Holds submodules in a list, with an optional LayerDrop probability."""

    drop_p: float

    def __init__(self, modules: Optional[Iterable[Module]] = None, *, drop_p: float = 0.0) -> None:
        super().__init__(modules)
        self.drop_p = drop_p

    def drop_iter(self) -> Iterator[Module]:
        """Return an iterator that drops a random set of submodules."""
        if self.drop_p > 0.0 and torch.is_grad_enabled():
            prob_dist = torch.rand(len(self), device="cpu", dtype=torch.float32)
        else:
            prob_dist = None

        for idx, m in enumerate(super().__iter__()):
            if prob_dist is None or prob_dist[idx] > self.drop_p:
                yield m


class TransformerDecoder(Module, ABC):
    """Represents a Transformer decoder."""

    model_dim: int
    layers: ModuleList

    _layer_output_hooks: Dict[int, DecoderLayerOutputHook]

    def __init__(self, model_dim: int) -> None:
        super().__init__()
        self.model_dim = model_dim
        self._layer_output_hooks = OrderedDict()

    @abstractmethod
    def forward(
        self,
        seqs: Tensor,
        padding_mask: Optional[PaddingMask],
        encoder_output: Optional[Tensor] = None,
        encoder_padding_mask: Optional[PaddingMask] = None,
        *,
        state_bag: Optional[IncrementalStateBag] = None,
    ) -> Tuple[Tensor, Optional[PaddingMask]]:
        """Decode ``seqs``."""

    def register_layer_output_hook(self, hook: DecoderLayerOutputHook) -> RemovableHandle:
        handle = RemovableHandle(self._layer_output_hooks)
        self._layer_output_hooks[handle.id] = hook
        return handle

    def extra_repr(self) -> str:
        """:meta private:"""
        return f"model_dim={self.model_dim}"


class DecoderLayerOutputHook(Protocol):
    def __call__(
        self,
        layer_idx: int,
        layer_output: Tensor,
        layer_padding_mask: Optional[PaddingMask],
        num_layers: int,
    ) -> bool:
        ...


@final
class StandardTransformerDecoder(TransformerDecoder):
    """Represents a Transformer decoder as described in
    :cite:t:`https://doi.org/10.48550/arxiv.1706.03762`."""

    self_attn_mask_factory: Optional[AttentionMaskFactory]
    layer_norm: Optional[LayerNorm]
    norm_order: TransformerNormOrder

    def __init__(
        self,
        layers: Iterable[TransformerDecoderLayer],
        *,
        self_attn_mask_factory: Optional[AttentionMaskFactory] = None,
        use_causal_attn_mask: bool = True,
        layer_drop_p: float = 0.0,
        norm_order: TransformerNormOrder = TransformerNormOrder.POST,
        layer_norm_factory: Optional[LayerNormFactory] = None,
        device: Optional[Device] = None,
        dtype: Optional[DataType] = None,
    ) -> None:
        layer_list = ModuleList(layers, drop_p=layer_drop_p)
        if not layer_list:
            raise ValueError("`layers` must be non-empty.")

        model_dim = layer_list[0].model_dim
        super().__init__(model_dim)

        if layer_norm_factory is None:
            layer_norm_factory = create_standard_layer_norm

        if self_attn_mask_factory is not None:
            self.self_attn_mask_factory = self_attn_mask_factory
        elif use_causal_attn_mask:
            self.self_attn_mask_factory = CausalAttentionMaskFactory()
        else:
            self.self_attn_mask_factory = None

        self.layers = layer_list

        if norm_order != TransformerNormOrder.POST:
            self.layer_norm = layer_norm_factory(model_dim, device=device, dtype=dtype)
        else:
            self.register_module("layer_norm", None)

        self.norm_order = norm_order

    @finaloverride
    def forward(
        self,
        seqs: Tensor,
        padding_mask: Optional[PaddingMask],
        encoder_output: Optional[Tensor] = None,
        encoder_padding_mask: Optional[PaddingMask] = None,
        *,
        state_bag: Optional[IncrementalStateBag] = None,
    ) -> Tuple[Tensor, Optional[PaddingMask]]:
        if self._layer_output_hooks and self.layers.drop_p > 0.0 and self.training:
            raise RuntimeError("The layer output hooks cannot be run when LayerDrop is enabled.")

        num_layers = len(self.layers)

        if self.self_attn_mask_factory is None:
            self_attn_mask = None
        else:
            self_attn_mask = self.self_attn_mask_factory(seqs, keys=seqs, training=self.training, state_bag=state_bag)

        for layer_idx, layer in enumerate(self.layers.drop_iter()):
            seqs, padding_mask = layer(
                seqs,
                padding_mask,
                self_attn_mask,
                encoder_output,
                encoder_padding_mask,
                state_bag=state_bag,
            )

            for hook in self._layer_output_hooks.values():
                if not hook(layer_idx, seqs, padding_mask, num_layers):
                    break

        if self.layer_norm is not None:
            seqs = self.layer_norm(seqs)

        return seqs, padding_mask

    def extra_repr(self) -> str:
        """:meta private:"""
        s = super().extra_repr()
        if self.self_attn_mask_factory is not None:
            self_attn_mask_factory = getattr(self.self_attn_mask_factory, "__name__", self.self_attn_mask_factory)
            s = f"{s}, self_attn_mask_factory={self_attn_mask_factory}"
        return f"{s}, norm_order={self.norm_order}"
