# Adapted from NVIDIA/NeMo nemo/collections/asr/modules/rnnt.py (RNNTJoint.forward fused loss/wer batching)
import torch
import torch.nn as nn


class RNNTJoint(nn.Module):
    def __init__(self, enc_dim, pred_dim, joint_dim, vocab, fused_batch_size=None):
        super().__init__()
        self.enc = nn.Linear(enc_dim, joint_dim)
        self.pred = nn.Linear(pred_dim, joint_dim)
        self.out = nn.Linear(joint_dim, vocab + 1)
        self._fused_batch_size = fused_batch_size
        self._fuse_loss_wer = fused_batch_size is not None

    def joint(self, f, g):
        return self.out(torch.relu(self.enc(f).unsqueeze(2) + self.pred(g).unsqueeze(1)))

    def forward(self, encoder_outputs, decoder_outputs):
        encoder_outputs = encoder_outputs.transpose(1, 2)
        try:
            fuse = self._fuse_loss_wer and torch.is_grad_enabled()
        except AttributeError:
            fuse = False
        if not fuse:
            return self.joint(encoder_outputs, decoder_outputs)
        outs = []
        B = encoder_outputs.shape[0]
        for b in range(0, B, self._fused_batch_size):
            sub_enc = encoder_outputs[b: b + self._fused_batch_size]
            sub_dec = decoder_outputs[b: b + self._fused_batch_size]
            outs.append(self.joint(sub_enc, sub_dec).log_softmax(-1))
        return torch.cat(outs, 0)
