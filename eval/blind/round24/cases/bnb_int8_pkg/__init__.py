# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/nn/modules.py
from .modules import Linear8bitLt
