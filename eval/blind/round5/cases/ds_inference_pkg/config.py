import torch


class TransformerConfig:
    def __init__(self, hidden_size, intermediate_size, heads, num_hidden_layers):
        self.layer_id = -1
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.heads = heads
        self.num_hidden_layers = num_hidden_layers


class DeepSpeedInferenceConfig(TransformerConfig):
    def __init__(self, hidden_size=-1, intermediate_size=-1, heads=-1, num_hidden_layers=-1,
                 layer_norm_eps=1e-12, mp_size=1, dtype=torch.float16, pre_layer_norm=True,
                 triangular_masking=True, use_triton=False, training=False, attn_dropout_ratio=0.0):
        super().__init__(hidden_size, intermediate_size, heads, num_hidden_layers)
        self.layer_norm_eps = layer_norm_eps
        self.mp_size = mp_size
        self.dtype = dtype
        self.pre_layer_norm = pre_layer_norm
        self.triangular_masking = triangular_masking
        self.use_triton = use_triton
        self.training = training
        self.attn_dropout_ratio = attn_dropout_ratio

    @property
    def grad_mode(self) -> bool:
        return getattr(self, "is_grad_enabled", True)
