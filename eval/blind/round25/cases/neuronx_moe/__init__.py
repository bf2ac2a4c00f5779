# adapted from aws-neuron/neuronx-distributed src/neuronx_distributed/modules/moe/__init__.py
from .expert_mlps import ExpertMLPsCapacityFactor
from .model import MoE
from .routing import RouterSinkhorn, RouterTopK
