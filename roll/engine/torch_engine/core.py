"""The engine's working part, run step by step on one worker thread: admits prompts, prefills them in chunks,
decodes the running batch, samples, detokenizes, and applies weight updates and sleep/wake between steps (a
new state dict or model folder copied into the model's tensors in place; sleep moves the parameters to a
safetensors file, or to host memory from an accelerator, and wake brings them back).

Only the worker thread touches this state; the asyncio side hands commands to `step` and receives events.
"""

from __future__ import annotations

import contextlib
import gc
import tempfile
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from safetensors.torch import load_file, save_file
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

from roll.engine.protocol import EngineError
from roll.engine.torch_engine.attention import PREFILL_CHUNK, SHARED_PREFIX_KV, engine_attention_on
from roll.engine.torch_engine.config import TorchEngineConfig
from roll.engine.torch_engine.detokenize import IncrementalDetokenizer
from roll.engine.torch_engine.kv_cache import BatchKVCache
from roll.engine.torch_engine.packed_linear import PackedLinears, packing_supported
from roll.engine.torch_engine.prefix_cache import PrefixCache
from roll.engine.torch_engine.sampling import SampledToken, sample_tokens
from roll.engine.torch_engine.sequence import PrefillJob, Sequence
from roll.engine.types import EngineStats, FinishReason, GenerateRequest


@dataclass
class Submit:
    request: GenerateRequest


@dataclass
class Abort:
    request_id: str


@dataclass
class Control:
    """A weight update, sleep or wake; `ticket` identifies it in the acknowledgement."""

    kind: Literal["update_weights", "sleep", "wake"]
    ticket: int
    weights: Mapping[str, torch.Tensor] | Path | None = None
    version: int = 0


Command = Submit | Abort | Control


@dataclass
class TokenEvent:
    request_id: str
    index: int
    token_ids: list[int]
    logprobs: list[float]
    top_logprobs: list[list[tuple[int, float]]] | None
    text: str
    finish_reason: FinishReason | None
    weight_version: int


@dataclass
class StepOutput:
    events: list[TokenEvent]
    acks: list[tuple[int, Exception | None]]


def _eos_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    ids: set[int] = set()
    for value in (getattr(model.generation_config, "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(value)
    return frozenset(ids)


class EngineCore:
    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        config: TorchEngineConfig,
        max_context: int,
    ) -> None:
        attention = model.config._attn_implementation
        if attention not in ("sdpa", "eager"):
            raise EngineError(
                f"the torch engine needs attn_implementation 'sdpa' or 'eager', not {attention!r}: "
                "load it with attn_implementation='sdpa'"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.max_context = max_context
        self.eos_ids = _eos_ids(model, tokenizer)
        self.weight_version = 0
        self.sleeping = False
        text_config = model.config.get_text_config(decoder=True)
        head_dim = getattr(text_config, "head_dim", None) or (
            text_config.hidden_size // text_config.num_attention_heads
        )
        parameter = next(model.parameters())
        self.device = parameter.device
        self.batch = BatchKVCache(
            text_config.num_hidden_layers,
            text_config.num_key_value_heads,
            head_dim,
            parameter.dtype,
            self.device,
            # Decode attention to a shared prefix is full attention; a sliding window keeps every row whole.
            min_shared=config.prefix_min_match
            if getattr(text_config, "sliding_window", None) is None
            else max_context + 1,
        )
        self.running: list[Sequence] = []
        self.waiting: deque[PrefillJob] = deque()
        self.prefix_cache = PrefixCache(config.prefix_cache_tokens, config.prefix_min_match)
        self._offloaded: OffloadedWeights | None = None
        self._linears = PackedLinears(model, getattr(torch, config.matmul_dtype))
        self._pack_linears = packing_supported(model)
        if self._pack_linears:
            self._linears.pack()
        self._seeds = torch.Generator().manual_seed(config.seed)
        self.prompt_tokens = 0
        self.prefix_hit_tokens = 0
        self.generated_tokens = 0
        self.decode_steps = 0

    def has_work(self) -> bool:
        return not self.sleeping and bool(self.running or self.waiting)

    def stats(self) -> EngineStats:
        return EngineStats(
            running=len(self.running),
            waiting=sum(len(job.sequences) for job in self.waiting),
            weight_version=self.weight_version,
            sleeping=self.sleeping,
            requests_finished=0,
            prompt_tokens=self.prompt_tokens,
            prefix_cache_hit_tokens=self.prefix_hit_tokens,
            generated_tokens=self.generated_tokens,
            decode_steps=self.decode_steps,
            kv_cache_bytes=self.batch.nbytes(),
            shared_prefix_tokens=self.batch.shared_length,
        )

    def step(self, commands: list[Command]) -> StepOutput:
        output = StepOutput([], [])
        with torch.inference_mode():
            for command in commands:
                if isinstance(command, Submit):
                    self._submit(command.request)
                elif isinstance(command, Abort):
                    output.events.extend(self._abort(command.request_id))
                else:
                    output.acks.append((command.ticket, self._control(command)))
            if not self.sleeping:
                self._prefill()
                if self.running:
                    output.events.extend(self._decode())
        return output

    def fail_all(self) -> list[str]:
        """Forget every request (after an error in a step); returns their ids."""
        ids = {s.request_id for s in self.running} | {s.request_id for j in self.waiting for s in j.sequences}
        self.running = []
        self.waiting.clear()
        self.batch.release()
        return sorted(ids)

    def _submit(self, request: GenerateRequest) -> None:
        params = request.params
        seed = (
            params.seed if params.seed is not None else int(torch.randint(2**62, (1,), generator=self._seeds))
        )
        stop_ids = frozenset(params.stop_token_ids) | (frozenset() if params.ignore_eos else self.eos_ids)
        sequences = [
            Sequence(
                request_id=request.request_id,
                index=index,
                params=params,
                prompt_ids=list(request.prompt_token_ids),
                generator=torch.Generator(self.device).manual_seed(hash((seed, index)) & (2**63 - 1)),
                detokenizer=IncrementalDetokenizer(self.tokenizer, params.stop),
                stop_ids=stop_ids,
            )
            for index in range(params.n)
        ]
        self.waiting.append(PrefillJob(sequences, sequences[0].context_ids()))

    def _abort(self, request_id: str) -> list[TokenEvent]:
        aborted: list[Sequence] = []
        for job in list(self.waiting):
            if job.sequences[0].request_id == request_id:
                aborted.extend(job.sequences)
                self.waiting.remove(job)
        for row in reversed(range(len(self.running))):
            if self.running[row].request_id == request_id:
                aborted.append(self.running[row])
                self._retire(row, keep_prefix=False)
        return [
            TokenEvent(
                request_id,
                seq.index,
                [],
                [],
                None,
                seq.detokenizer.take_new_text(True),
                "abort",
                self.weight_version,
            )
            for seq in aborted
        ]

    def _control(self, command: Control) -> Exception | None:
        try:
            if command.kind == "update_weights":
                self._update_weights(command.weights, command.version)
            elif command.kind == "sleep":
                self._sleep()
            else:
                self._wake()
        except Exception as error:
            return error
        return None

    def _update_weights(self, weights: Mapping[str, torch.Tensor] | Path | None, version: int) -> None:
        if self.sleeping:
            raise EngineError("the engine is asleep: await wake() before update_weights()")
        assert weights is not None
        load_into(self.model, read_weights(weights, self.model))
        if self._pack_linears:
            self._linears.pack()
        self.weight_version = version
        self.prefix_cache.clear()
        for job in self.waiting:  # prompts not yet admitted are prefilled again under the new weights
            job.cache, job.done, job.reused = None, 0, 0

    def _sleep(self) -> None:
        if self.sleeping:
            return
        # Running completions keep their tokens and are recomputed from them after wake (preemption).
        preempted = [PrefillJob([seq], seq.context_ids()) for seq in self.running]
        for job in self.waiting:
            job.cache, job.done, job.reused = None, 0, 0
        self.waiting.extendleft(reversed(preempted))
        self.running = []
        self.batch.release()
        self.prefix_cache.clear()
        self._linears.drop()
        self._offloaded = OffloadedWeights(self.model)
        self.sleeping = True
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()  # give the freed blocks back to the driver, not only to torch

    def _wake(self) -> None:
        if not self.sleeping:
            return
        assert self._offloaded is not None
        self._offloaded.restore()
        self._offloaded = None
        if self._pack_linears:
            self._linears.pack()
        self.sleeping = False

    def _prefill(self) -> None:
        budget = self.config.prefill_chunk_tokens
        while (
            self.waiting and len(self.running) + len(self.waiting[0].sequences) <= self.config.max_batch_size
        ):
            job = self.waiting[0]
            if job.cache is None:
                self._start_prefill(job)
            if job.remaining:
                if budget <= 0:
                    return
                chunk = min(job.remaining, budget)
                self._prefill_chunk(job, chunk)
                budget -= chunk
                if job.remaining:
                    return
            self.waiting.popleft()
            self._admit(job)

    def _start_prefill(self, job: PrefillJob) -> None:
        reused, kv = self.prefix_cache.lookup(job.tokens)
        job.cache = DynamicCache(ddp_cache_data=kv) if kv is not None else DynamicCache()
        job.done = job.reused = reused
        self.prefix_hit_tokens += reused

    def _prefill_chunk(self, job: PrefillJob, chunk: int) -> None:
        ids = torch.tensor([job.tokens[job.done : job.done + chunk]], device=self.device)
        positions = torch.arange(job.done, job.done + chunk, device=self.device).unsqueeze(0)
        with engine_attention_on(self.model), self._linears.active():
            self.model.base_model(
                input_ids=ids,
                position_ids=positions,
                cache=job.cache,
                use_cache=True,
                **{PREFILL_CHUNK: True},
            )
        job.done += chunk
        self.prompt_tokens += chunk

    def _admit(self, job: PrefillJob) -> None:
        assert job.cache is not None
        length = len(job.tokens)
        kv = [(layer.keys, layer.values) for layer in job.cache.layers] if length else None
        if kv is not None and job.done > job.reused and self.config.prefix_cache_tokens:
            self.prefix_cache.insert(job.tokens, kv)
        self.batch.add(kv, job.tokens, copies=len(job.sequences))
        self.running.extend(job.sequences)

    def _decode(self) -> list[TokenEvent]:
        positions, mask = self.batch.prepare_step()
        ids = torch.tensor([[seq.pending_token] for seq in self.running], device=self.device)
        attention_mask: torch.Tensor = mask
        if self.model.config._attn_implementation == "eager":
            attention_mask = torch.zeros(mask.shape, dtype=self.batch.dtype, device=self.device).masked_fill(
                ~mask, torch.finfo(self.batch.dtype).min
            )
        shared = self.batch.shared_kv()
        with engine_attention_on(self.model) if shared else contextlib.nullcontext(), self._linears.active():
            out = self.model(
                input_ids=ids,
                position_ids=positions,
                attention_mask=attention_mask,
                cache=self.batch.view(),
                use_cache=True,
                **({SHARED_PREFIX_KV: shared} if shared else {}),
            )
        self.batch.finish_step()
        self.decode_steps += 1
        sampled = sample_tokens(
            out.logits[:, -1], [s.params for s in self.running], [s.generator for s in self.running]
        )
        events = [self._append(seq, token) for seq, token in zip(self.running, sampled, strict=True)]
        for row in reversed(range(len(self.running))):
            if self.running[row].finish_reason is not None:
                self._retire(row, keep_prefix=True)
        return events

    def _append(self, seq: Sequence, token: SampledToken) -> TokenEvent:
        seq.output_ids.append(token.token_id)
        seq.logprobs.append(token.logprob)
        if token.top_logprobs is not None:
            seq.top_logprobs.append(token.top_logprobs)
        self.generated_tokens += 1
        if token.token_id in seq.stop_ids:
            seq.finish_reason = "stop"
        else:
            seq.detokenizer.add(token.token_id)
            if seq.detokenizer.stopped:
                seq.finish_reason = "stop"
        if seq.finish_reason is None and (
            len(seq.output_ids) >= seq.params.max_new_tokens
            or len(seq.prompt_ids) + len(seq.output_ids) >= self.max_context
        ):
            seq.finish_reason = "length"
        if seq.finish_reason is not None:
            seq.detokenizer.flush()
        return TokenEvent(
            seq.request_id,
            seq.index,
            [token.token_id],
            [token.logprob],
            [token.top_logprobs] if token.top_logprobs is not None else None,
            seq.detokenizer.take_new_text(final=seq.finish_reason is not None),
            seq.finish_reason,
            self.weight_version,
        )

    def _retire(self, row: int, keep_prefix: bool) -> None:
        seq = self.running[row]
        if keep_prefix and self.config.prefix_cache_tokens:
            self.prefix_cache.insert(seq.context_ids(), self.batch.row_kv(row))
        self.batch.remove(row)
        self.running[row] = self.running[-1]
        self.running.pop()


def read_weights(
    source: Mapping[str, torch.Tensor] | Path, model: PreTrainedModel
) -> Mapping[str, torch.Tensor]:
    """A state dict given directly (named as the model's own parameters), or the weights of a model folder.

    A folder is loaded through transformers, which maps checkpoint names to the model's own (transformers 5
    stores MoE experts differently on disk than in memory).
    """
    if not isinstance(source, Path):
        return source
    if not (source / "config.json").is_file() or not any(source.glob("*.safetensors")):
        raise EngineError(
            f"{source} is not a model folder with config.json and *.safetensors: pass a folder written by "
            "save_pretrained, or a state dict of tensors"
        )
    dtype = next(model.parameters()).dtype
    return type(model).from_pretrained(source, dtype=dtype).state_dict()


def load_into(model: torch.nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Copy `state` into the model's tensors in place (tied weights stay tied); a partial state is allowed."""
    targets = dict(model.named_parameters(remove_duplicate=False))
    targets.update(model.named_buffers(remove_duplicate=False))
    unknown = [name for name in state if name not in targets]
    if unknown:
        raise EngineError(
            f"{len(unknown)} weight names are not in the model, e.g. {unknown[:3]}; "
            f"expected names like {list(targets)[:3]}"
        )
    for name, tensor in state.items():
        target = targets[name]
        if tuple(target.shape) != tuple(tensor.shape):
            raise EngineError(
                f"weight {name} has shape {tuple(tensor.shape)} but the model expects {tuple(target.shape)}"
            )
    with torch.no_grad():
        for name, tensor in state.items():
            targets[name].copy_(tensor.to(dtype=targets[name].dtype))


class OffloadedWeights:
    """A model's parameters moved out of its device: to a safetensors file when the model lives in host memory
    (keeping a host copy would free nothing), to host memory when it lives on an accelerator."""

    def __init__(self, model: torch.nn.Module) -> None:
        self._params = dict(model.named_parameters())
        self._device = next(iter(self._params.values())).device
        self._host: dict[str, torch.Tensor] | None = None
        self._folder: tempfile.TemporaryDirectory[str] | None = None
        tensors = {name: p.data for name, p in self._params.items()}
        if self._device.type == "cpu":
            self._folder = tempfile.TemporaryDirectory(prefix="roll-engine-sleep-")
            save_file({n: t.contiguous() for n, t in tensors.items()}, self._file)
        else:
            self._host = {name: t.to("cpu") for name, t in tensors.items()}
        for p in self._params.values():
            p.data = torch.empty(0, dtype=p.dtype, device=self._device)

    @property
    def _file(self) -> str:
        assert self._folder is not None
        return str(Path(self._folder.name) / "weights.safetensors")

    def restore(self) -> None:
        saved = self._host if self._host is not None else load_file(self._file)
        for name, p in self._params.items():
            p.data = saved[name].to(self._device)
        if self._folder is not None:
            self._folder.cleanup()
