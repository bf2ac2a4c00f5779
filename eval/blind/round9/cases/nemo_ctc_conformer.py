from typing import List, Optional

import torch
import torch.nn as nn


def compute_stochastic_depth_drop_probs(num_layers: int, drop_prob: float = 0.0,
                                        mode: str = "linear", start_layer: int = 1) -> List[float]:
    if not (0 <= drop_prob < 1.0):
        raise ValueError("stochastic_depth_drop_prob has to be in [0, 1).")
    layer_drop_probs = [0.0] * (start_layer - 1)
    num_active = num_layers - start_layer + 1
    if mode == "linear":
        layer_drop_probs += [i / num_active * drop_prob for i in range(1, num_active + 1)]
    elif mode == "uniform":
        layer_drop_probs += [drop_prob] * num_active
    else:
        raise ValueError(f"Unknown stochastic depth mode {mode}")
    return layer_drop_probs


class ConformerEncoder(nn.Module):
    def __init__(self, layers: nn.ModuleList, pre_encode: nn.Module,
                 stochastic_depth_drop_prob: float = 0.0, stochastic_depth_mode: str = "linear"):
        super().__init__()
        self.layers = layers
        self.pre_encode = pre_encode
        self.layer_drop_probs = compute_stochastic_depth_drop_probs(
            len(layers), stochastic_depth_drop_prob, stochastic_depth_mode
        )

    def forward(self, audio_signal: torch.Tensor, length: torch.Tensor):
        audio_signal = torch.transpose(audio_signal, 1, 2)
        audio_signal, length = self.pre_encode(x=audio_signal, lengths=length)
        pad_mask = torch.arange(audio_signal.size(1), device=audio_signal.device)[None, :] >= length[:, None]
        lth = 0
        while lth < len(self.layers):
            layer = self.layers[lth]
            drop_prob = self.layer_drop_probs[lth]
            original_signal = audio_signal
            audio_signal = layer(x=audio_signal, pad_mask=pad_mask)
            if torch.is_grad_enabled() and drop_prob > 0.0:
                should_drop = torch.rand(1) < drop_prob
                if should_drop:
                    audio_signal = audio_signal * 0.0 + original_signal
                else:
                    audio_signal = (audio_signal - original_signal) / (1.0 - drop_prob) + original_signal
            lth += 1
        return torch.transpose(audio_signal, 1, 2), length


class EncDecCTCModel(nn.Module):
    def __init__(self, preprocessor, encoder, decoder, spec_augmentation: Optional[nn.Module] = None):
        super().__init__()
        self.preprocessor = preprocessor
        self.encoder = encoder
        self.decoder = decoder
        self.spec_augmentation = spec_augmentation

    def forward(self, input_signal=None, input_signal_length=None,
                processed_signal=None, processed_signal_length=None):
        has_input_signal = input_signal is not None and input_signal_length is not None
        has_processed_signal = processed_signal is not None and processed_signal_length is not None
        if (has_input_signal ^ has_processed_signal) is False:
            raise ValueError(
                f"{self} Arguments ``input_signal`` and ``input_signal_length`` are mutually exclusive "
                " with ``processed_signal`` and ``processed_signal_len`` arguments."
            )
        if not has_processed_signal:
            processed_signal, processed_signal_length = self.preprocessor(
                input_signal=input_signal, length=input_signal_length,
            )
        if self.spec_augmentation is not None and torch.is_grad_enabled():
            processed_signal = self.spec_augmentation(input_spec=processed_signal, length=processed_signal_length)

        encoded, encoded_len = self.encoder(audio_signal=processed_signal, length=processed_signal_length)
        log_probs = self.decoder(encoder_output=encoded)
        greedy_predictions = log_probs.argmax(dim=-1, keepdim=False)
        return log_probs, encoded_len, greedy_predictions
