# v2 kernel modes the engine misses today. Lines ending in "# GG003" must be reported.
import torch.nn.functional as F
import torch


# -- issue 11, 3: "a kernel's training or dropout mode, positional or keyword"
# (F.dropout's third positional parameter is `training`; the keyword form is found)

def dropout_positional(x, p):
    return F.dropout(x, p, torch.is_grad_enabled())  # GG003
