import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from .operations import gather_features


class ClipLoss(nn.Module):
    def __init__(self, local_loss: bool = False, cache_labels: bool = False, rank: int = 0,
                 world_size: int = 1, group=None):
        super().__init__()
        self.local_loss = local_loss
        self.cache_labels = cache_labels
        self.rank = rank
        self.world_size = world_size
        self.group = group
        self.prev_num_logits = 0
        self.labels = {}

    def get_ground_truth(self, device, num_logits, local_logits: bool) -> torch.Tensor:
        if self.prev_num_logits != num_logits or device not in self.labels:
            labels = torch.arange(num_logits, device=device, dtype=torch.long)
            if self.world_size > 1 and local_logits:
                labels = labels + num_logits * self.rank
            if self.cache_labels:
                self.labels[device] = labels
                self.prev_num_logits = num_logits
        else:
            labels = self.labels[device]
        return labels

    def get_logits(self, image_features, text_features, logit_scale, local_logits: bool):
        if self.world_size > 1:
            all_image_features = gather_features(image_features, self.group)
            all_text_features = gather_features(text_features, self.group)
            if local_logits:
                logits_per_image = logit_scale * image_features @ all_text_features.T
                logits_per_text = logit_scale * text_features @ all_image_features.T
            else:
                logits_per_image = logit_scale * all_image_features @ all_text_features.T
                logits_per_text = logits_per_image.T
        else:
            logits_per_image = logit_scale * image_features @ text_features.T
            logits_per_text = logit_scale * text_features @ image_features.T
        return logits_per_image, logits_per_text

    def forward(self, image_features, text_features, logit_scale, output_dict: bool = False):
        device = image_features.device
        local_logits = self.local_loss and torch.is_grad_enabled()
        logits_per_image, logits_per_text = self.get_logits(image_features, text_features, logit_scale, local_logits)
        labels = self.get_ground_truth(device, logits_per_image.shape[0], local_logits)
        total_loss = (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2
        return {"contrastive_loss": total_loss} if output_dict else total_loss
