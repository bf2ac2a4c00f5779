"""Spectrogram augmentation (time / frequency masking) for ASR encoders."""
import random

import torch
import torch.nn as nn


class SpecAugment(nn.Module):
    def __init__(self, freq_masks=0, time_masks=0, freq_width=10, time_width=0.1, rng=None, mask_value=0.0):
        super().__init__()
        self._rng = random.Random() if rng is None else rng
        self.freq_masks = freq_masks
        self.time_masks = time_masks
        self.freq_width = freq_width
        self.time_width = time_width
        self.mask_value = mask_value

    @torch.no_grad()
    def _apply_masks(self, input_spec, length):
        batch_size, num_freq_bins, _ = input_spec.shape
        fill_mask = torch.zeros_like(input_spec, dtype=torch.bool)
        for idx in range(batch_size):
            for _ in range(self.freq_masks):
                x_left = self._rng.randint(0, num_freq_bins - self.freq_width)
                w = self._rng.randint(0, self.freq_width)
                fill_mask[idx, x_left : x_left + w, :] = True
            for _ in range(self.time_masks):
                time_width = max(1, int(int(length[idx]) * self.time_width))
                y_left = self._rng.randint(0, max(1, int(length[idx]) - time_width))
                w = self._rng.randint(0, time_width)
                fill_mask[idx, :, y_left : y_left + w] = True
        return input_spec.masked_fill(fill_mask, self.mask_value)


class SpectrogramAugmentation(nn.Module):
    def __init__(self, freq_masks=2, time_masks=10, freq_width=27, time_width=0.05, mask_value=0.0):
        super().__init__()
        self.spec_augment = SpecAugment(
            freq_masks=freq_masks, time_masks=time_masks, freq_width=freq_width,
            time_width=time_width, mask_value=mask_value,
        )

    def forward(self, input_spec, length):
        if not torch.is_grad_enabled():
            return input_spec
        return self.spec_augment._apply_masks(input_spec, length)
