# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/autograd/_functions.py
from ._functions import MatmulLtState, matmul
from .modules import Linear8bitLt
