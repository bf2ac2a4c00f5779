# Modelled on DeepSpeed deepspeed/runtime/pipe/dualpipev.py and deepspeed/runtime/pipe/engine.py
import torch

from deepspeed import comm as dist
from deepspeed.runtime.pipe.engine import PipelineEngine


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


class DualPipeVEngine(PipelineEngine):
    def train_batch(self, data_iter=None):
        if not torch._C.is_grad_enabled():
            raise RuntimeError('train_batch() requires gradients enabled. Use eval_batch() instead.')
        if data_iter is not None:
            self.set_dataiterator(data_iter)
        self.module.train()
        return self._run_schedule(training=True)

    def _queue_p2p(self, op, tensors, stage):
        peer = self.grid.stage_to_global(stage)
        for tensor in tensors:
            self._p2p_ops.append(dist.P2POp(op, tensor, peer))

    def _exec_commit_p2p(self):
        if not self._p2p_ops:
            return
        if torch.is_grad_enabled():
            for req in dist.batch_isend_irecv(self._p2p_ops):
                req.wait()
        else:
            for p2p_op in self._p2p_ops:
                p2p_op.op(p2p_op.tensor, p2p_op.peer).wait()
        self._p2p_ops = []

    def _exec_forward_pass(self, buffer_id, phase):
        with self._phase(phase):
            super()._exec_forward_pass(buffer_id)
        outputs = self.pipe_buffers['outputs'][buffer_id]
        if self._is_loss_stage(phase):
            if torch.is_grad_enabled():
                self.pipe_buffers['losses'][buffer_id] = self.loss
        elif self._is_last_rank() and phase == 0:
            inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in _as_list(outputs)]
            inputs = inputs[0] if torch.is_tensor(outputs) else tuple(inputs)
            self.pipe_buffers['inputs'][self._phase1_buffer(buffer_id)] = inputs
        if not torch.is_grad_enabled():
            # No backward will run; nothing else frees these.
            self.pipe_buffers['inputs'][buffer_id] = None
            self.pipe_buffers['labels'][buffer_id] = None
            if self._is_loss_stage(phase) or (self._is_last_rank() and phase == 0):
                self.pipe_buffers['outputs'][buffer_id] = None

    def _exec_send_activations(self, buffer_id, phase):
        outputs = self.pipe_buffers['outputs'][buffer_id]
        stage = self._downstream_stage(phase)
        if self._first_send[phase]:
            self._first_send[phase] = False
            self._send_tensor_meta(outputs, stage)
        self._queue_p2p(dist.isend, _as_list(outputs), stage)
        if not torch.is_grad_enabled():
            self.pipe_buffers['outputs'][buffer_id] = None

    def _exec_recv_activations(self, buffer_id, phase):
        stage = self._upstream_stage(phase)
        if self._recv_specs[phase] is None:
            buffers = self._recv_tensor_meta(stage)
            self._recv_specs[phase] = (torch.is_tensor(buffers), [(t.shape, t.dtype) for t in _as_list(buffers)])
        is_tensor, specs = self._recv_specs[phase]
        buffers = [torch.empty(shape, dtype=dtype, device=self.device) for shape, dtype in specs]
        self._queue_p2p(dist.irecv, buffers, stage)
        self.pipe_buffers['inputs'][buffer_id] = buffers[0] if is_tensor else tuple(buffers)
