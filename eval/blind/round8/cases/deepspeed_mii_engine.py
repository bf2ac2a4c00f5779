import torch

from deepspeed.inference.v2.ragged import DSStateManager, RaggedBatchWrapper
from deepspeed.inference.v2.model_implementations import DSInferenceModelBase


class InferenceEngineV2:

    def __init__(self, policy, engine_config):
        self._config = engine_config
        self._policy = policy
        self._model: DSInferenceModelBase = policy.build_model(engine_config)
        self._batch = RaggedBatchWrapper(engine_config.state_manager)
        self._state_manager = DSStateManager(engine_config.state_manager, self._model.kv_cache_config())
        self._graphs = {}

    def _graph_for(self, n_tokens):
        if n_tokens not in self._graphs:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self._static_out = self._model.forward(self._batch)
            self._graphs[n_tokens] = graph
        return self._graphs[n_tokens]

    def put(self, batch_uids, batch_tokens, do_checks=True):
        if torch.is_grad_enabled():
            raise RuntimeError("InferenceEngineV2.put must be called under torch.inference_mode()")
        self._batch.clear()
        for uid, tokens in zip(batch_uids, batch_tokens):
            host_seq_desc = self._state_manager.get_or_create_sequence(uid)
            self._model.maybe_allocate_kv(host_seq_desc, tokens.numel())
            host_seq_desc.pre_forward(tokens.numel())
            self._batch.insert_sequence(host_seq_desc, tokens, do_checks=do_checks)
        self._batch.finalize()
        self._model.prepare_batch(self._batch)
        n_tokens = self._batch.current_tokens
        use_graph = self._config.enable_cuda_graph and not torch.is_grad_enabled() and n_tokens <= 256
        if use_graph:
            self._graph_for(n_tokens).replay()
            logits = self._static_out
        else:
            logits = self._model.forward(self._batch)
        for uid in batch_uids:
            host_seq_desc = self._state_manager.get_sequence(uid)
            host_seq_desc.post_forward()
            self._model.maybe_free_kv(host_seq_desc)
        return logits
