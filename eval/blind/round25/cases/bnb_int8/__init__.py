# adapted from bitsandbytes-foundation/bitsandbytes bitsandbytes/autograd/_functions.py
from .autograd import MatMul8bitLt, matmul
from .state import MatmulLtState
