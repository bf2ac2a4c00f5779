import torch
import torch.nn.functional as F
import lightning.pytorch as pl


class LitClassifier(pl.LightningModule):

    def __init__(self, backbone, head, lr=1e-3):
        super().__init__()
        self.backbone = backbone
        self.head = head
        self.lr = lr
        self.automatic_optimization = False

    def forward(self, x):
        return self.head(self.backbone(x))

    def _shared_step(self, batch, stage):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(dim=-1) == y).float().mean()
        self.log(f"{stage}/loss", loss, on_step=False, on_epoch=True, sync_dist=torch.is_grad_enabled())
        self.log(f"{stage}/acc", acc, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def training_step(self, batch, batch_idx):
        opt = self.optimizers()
        if not torch.is_inference_mode_enabled():
            self.toggle_optimizer(opt)
        loss = self._shared_step(batch, "train")
        self.manual_backward(loss)
        opt.step()
        opt.zero_grad()
        self.untoggle_optimizer(opt)
        return loss

    def validation_step(self, batch, batch_idx):
        return self._shared_step(batch, "val")

    def test_step(self, batch, batch_idx):
        return self._shared_step(batch, "test")

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)
