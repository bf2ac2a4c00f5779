import torch
import torch.nn as nn


class Encoder(nn.Module):

    def __init__(self, down_blocks, mid_block, conv_in, conv_out):
        super().__init__()
        self.conv_in = conv_in
        self.down_blocks = nn.ModuleList(down_blocks)
        self.mid_block = mid_block
        self.conv_out = conv_out
        self.gradient_checkpointing = False

    def forward(self, sample):
        sample = self.conv_in(sample)
        if torch.is_grad_enabled() and self.gradient_checkpointing:
            for down_block in self.down_blocks:
                sample = torch.utils.checkpoint.checkpoint(down_block, sample, use_reentrant=False)
            sample = torch.utils.checkpoint.checkpoint(self.mid_block, sample, use_reentrant=False)
        else:
            for down_block in self.down_blocks:
                sample = down_block(sample)
            sample = self.mid_block(sample)
        return self.conv_out(sample)


class AutoencoderKL(nn.Module):

    def __init__(self, encoder, quant_conv, sample_size=512, tile_overlap_factor=0.25, latent_factor=8):
        super().__init__()
        self.encoder = encoder
        self.quant_conv = quant_conv
        self.use_slicing = False
        self.use_tiling = False
        self.tile_sample_min_size = sample_size
        self.tile_latent_min_size = sample_size // latent_factor
        self.tile_overlap_factor = tile_overlap_factor

    def enable_tiling(self, use_tiling=True):
        self.use_tiling = use_tiling

    def blend_v(self, a, b, blend_extent):
        blend_extent = min(a.shape[2], b.shape[2], blend_extent)
        for y in range(blend_extent):
            b[:, :, y, :] = a[:, :, -blend_extent + y, :] * (1 - y / blend_extent) + b[:, :, y, :] * (y / blend_extent)
        return b

    def blend_h(self, a, b, blend_extent):
        blend_extent = min(a.shape[3], b.shape[3], blend_extent)
        for x in range(blend_extent):
            b[:, :, :, x] = a[:, :, :, -blend_extent + x] * (1 - x / blend_extent) + b[:, :, :, x] * (x / blend_extent)
        return b

    def _tiled_encode(self, x):
        overlap_size = int(self.tile_sample_min_size * (1 - self.tile_overlap_factor))
        blend_extent = int(self.tile_latent_min_size * self.tile_overlap_factor)
        row_limit = self.tile_latent_min_size - blend_extent
        rows = []
        for i in range(0, x.shape[2], overlap_size):
            row = []
            for j in range(0, x.shape[3], overlap_size):
                tile = x[:, :, i:i + self.tile_sample_min_size, j:j + self.tile_sample_min_size]
                row.append(self.quant_conv(self.encoder(tile)))
            rows.append(row)
        result_rows = []
        for i, row in enumerate(rows):
            result_row = []
            for j, tile in enumerate(row):
                if i > 0:
                    tile = self.blend_v(rows[i - 1][j], tile, blend_extent)
                if j > 0:
                    tile = self.blend_h(row[j - 1], tile, blend_extent)
                result_row.append(tile[:, :, :row_limit, :row_limit])
            result_rows.append(torch.cat(result_row, dim=3))
        return torch.cat(result_rows, dim=2)

    def _encode(self, x):
        _, _, height, width = x.shape
        large = width > self.tile_sample_min_size or height > self.tile_sample_min_size
        tiling = self.use_tiling or not torch.is_grad_enabled()
        if tiling and large:
            return self._tiled_encode(x)
        return self.quant_conv(self.encoder(x))

    def encode(self, x):
        if self.use_slicing and x.shape[0] > 1:
            encoded_slices = [self._encode(x_slice) for x_slice in x.split(1)]
            return torch.cat(encoded_slices)
        return self._encode(x)
