"""Local language models through Hugging Face transformers (CPU by default).

Scoring (SayCan's "Say") is the hot path: each planning step scores every skill description
(~50) after the dialogue so far. Three modes, selected by ``scoring``:

* ``fast`` (default): the context (prefix + query) grows with the plan. The KV caches of the
  latest contexts are kept (``max_contexts``, two) with their token ids; a call takes the one
  sharing the longest start with its context, crops it there and encodes only the rest -- between
  two steps of a plan that is the executed skill's line, after a put-down the refreshed scene
  line and what follows it. ALL options are then scored in ONE forward pass on that cache: their
  tokens are packed into one sequence, each option's position ids restart right after the
  context, and a 4-D mask lets every option token see the whole context and only the earlier
  tokens of its own option. Options that start alike (" pick up the apple", " pick up the
  orange") share those tokens: the packed sequence is a token trie and each token sees its trie
  ancestors (``share_option_prefixes = False`` packs plain concatenated options instead). The
  packed tokens are cropped off the cache again afterwards, so nothing is copied. Models whose
  caches cannot be cropped (sliding-window layers: Gemma-3) score as ``packed``.
* ``packed``: the plain packed path (the reference for ``fast``): the few-shot prefix's cache is
  kept (keyed by the prefix string, latest two kept); per call a copy of it is extended with the
  whole query, then the options are packed as above. Models with sliding-window layers (Gemma-3)
  get a dict of masks keyed by layer type; the sliding cache holds only the last
  ``sliding_window - 1`` context tokens, so that mask's context part has that width and a key is
  visible only when ``q_pos - k_pos < sliding_window``.
* ``naive``: one forward pass per option over the full text, no cache (the reference).

All tokenise prefix, query and option separately and concatenate the ids, so an option's tokens
never depend on its context. The first option token is scored from the context's last logits;
each option's last token is never fed to the model (its next-token prediction is not needed), so
one-token options need no forward pass at all.

``quantize="int8"`` replaces every linear layer (the language-model head included) with
dynamically quantised int8 arithmetic (fbgemm: AVX2, VNNI where present) after the adapter is
merged: about 1.5x faster on an AVX2 CPU, but activation outliers under its per-tensor scale move
scores by several nats, and some choices with them (docs/results/scoring.md), so it is not the
default.

``kernels`` picks what runs the linear layers: ``onednn`` packs each weight once and fuses the
projections that share an input (saycan_ros.llm.cpu_kernels; same fp32 arithmetic, ~1.2x a
step), ``aten`` is torch's default, ``auto`` (default) is ``onednn`` for a float32 model on the
CPU where torch has oneDNN and nothing is quantised, else ``aten``.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import logging
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from saycan_ros.llm.backend import (
    Generation,
    LanguageBackend,
    check_config_keys,
    cut_at_stop,
    validate_generate_args,
    validate_options,
)
from saycan_ros.llm.config import KERNELS, QUANTIZATIONS, SCORING_MODES
from saycan_ros.llm.cpu_kernels import onednn_available, use_onednn_linear
from saycan_ros.llm.models import display_name, load_causal_lm

_LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class _ContextState:
    """A KV cache after some context, and the log-probabilities of the next token."""

    cache: Any | None          # transformers Cache, None when the context is empty
    next_logprobs: torch.Tensor | None   # (vocab,) float32
    n_tokens: int
    ids: tuple[int, ...] = ()  # the context's tokens (kept for the ``fast`` contexts)


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def quantize_int8(model):
    """``model`` with every ``nn.Linear`` replaced by a dynamically quantised int8 one (weights
    per output channel, activations per tensor at run time; CPU only)."""
    import warnings

    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    with warnings.catch_warnings():   # torch marks its quantised tensor types as deprecated
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return quantize_dynamic(model, {torch.nn.Linear: per_channel_dynamic_qconfig},
                                dtype=torch.qint8)


def build_tree_masks(
    parents: Sequence[int],
    n_ctx: int,
    ctx_kv_lens: Mapping[str, int],
    windows: Mapping[str, int | None],
) -> dict[str, torch.Tensor]:
    """Boolean masks ``(L, ctx_kv_len + L)`` (True = may attend) for a packed pass.

    parents: for each of the L packed tokens, the index of the packed token before it in its
        option (``-1`` when it follows the context directly); ``parents[i] < i``. A token sees
        the context and its ancestors (itself included) only. A token trie lets options with a
        common start (" pick up the ...") share those tokens; a plain concatenation of options
        is the special case of one chain per option.
    n_ctx: number of context tokens before the packed tokens (token i sits at absolute position
        ``n_ctx + depth(i)``).
    ctx_kv_lens: per layer type, how many context keys that layer's cache holds (the LAST ones
        of the context: a sliding-window cache keeps only ``window - 1``).
    windows: per layer type, the sliding window (keys visible while ``q_pos - k_pos < window``)
        or None for full attention.
    """
    L = len(parents)
    anc = torch.zeros(L, L, dtype=torch.bool)
    depth = torch.zeros(L, dtype=torch.long)
    for i, p in enumerate(parents):
        if p >= 0:
            if p >= i:
                raise ValueError("parents[i] must be < i")
            anc[i] = anc[p]
            depth[i] = depth[p] + 1
        anc[i, i] = True
    masks = {}
    for kind, c in ctx_kv_lens.items():
        window = windows.get(kind)
        if c > n_ctx:
            raise ValueError(f"{kind}: cache holds {c} keys but the context has {n_ctx} tokens")
        if window is None:
            ctx_part = torch.ones(L, c, dtype=torch.bool)
            new_new = anc
        else:
            q_pos = n_ctx + depth                                   # (L,)
            ctx_pos = torch.arange(n_ctx - c, n_ctx)                # (c,)
            ctx_part = (q_pos[:, None] - ctx_pos[None, :]) < window
            new_new = anc & ((depth[:, None] - depth[None, :]) < window)
        masks[kind] = torch.cat([ctx_part, new_new], dim=1)
    return masks


def build_packed_masks(
    seg_lens: Sequence[int],
    n_ctx: int,
    ctx_kv_lens: Mapping[str, int],
    windows: Mapping[str, int | None],
) -> dict[str, torch.Tensor]:
    """:func:`build_tree_masks` for plainly concatenated segments of the given lengths."""
    parents: list[int] = []
    for n in seg_lens:
        base = len(parents)
        parents.extend([-1] + [base + j for j in range(n - 1)] if n else [])
    return build_tree_masks(parents, n_ctx, ctx_kv_lens, windows)


def _check_choice(name: str, value: str, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


def merge_adapter(model, adapter: str):
    """``model`` with the LoRA adapter in folder ``adapter`` merged into its weights."""
    from peft import PeftModel
    if not (Path(adapter) / "adapter_config.json").is_file():
        raise FileNotFoundError(f"no LoRA adapter in {adapter} (adapter_config.json missing)")
    dtype = model.dtype
    merged = PeftModel.from_pretrained(model, adapter).merge_and_unload()
    return merged.to(dtype).eval()


def leading_special_ids(tokenizer) -> list[int]:
    """Ids the tokenizer puts before a text (e.g. Gemma's <bos>; none for SmolLM2)."""
    with_sp = list(tokenizer("a", add_special_tokens=True)["input_ids"])
    plain = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    for i in range(len(with_sp) - len(plain) + 1):
        if with_sp[i:i + len(plain)] == plain:
            return with_sp[:i]
    return []


class _TokenTrie:
    """Packed input tokens of a set of options; common starts are shared unless ``share``
    is False. Option k's scores are read at ``paths[k]`` (one node per input token)."""

    def __init__(self, share: bool = True) -> None:
        self.share = share
        self.tokens: list[int] = []
        self.parents: list[int] = []
        self._index: dict[tuple[int, int], int] = {}

    def new_nodes(self, inputs: Sequence[int]) -> int:
        """How many nodes :meth:`add` would create for ``inputs``."""
        if not self.share:
            return len(inputs)
        p = -1
        for j, t in enumerate(inputs):
            idx = self._index.get((p, t))
            if idx is None:
                return len(inputs) - j
            p = idx
        return 0

    def add(self, inputs: Sequence[int]) -> list[int]:
        path, p = [], -1
        for t in inputs:
            idx = self._index.get((p, t)) if self.share else None
            if idx is None:
                idx = len(self.tokens)
                self.tokens.append(t)
                self.parents.append(p)
                if self.share:
                    self._index[(p, t)] = idx
            path.append(idx)
            p = idx
        return path


class TransformersBackend(LanguageBackend):
    """A causal LM run locally with transformers (see the module docstring)."""

    CONFIG_KEYS = ("model", "dtype", "threads", "scoring", "quantize", "device", "name",
                   "max_packed_tokens", "use_model_cache", "adapter", "kernels")

    def __init__(self, model: str = "smollm2-135m", *, dtype: str = "float32",
                 threads: int | None = None, scoring: str = "fast", quantize: str = "none",
                 device: str = "cpu", name: str | None = None, max_packed_tokens: int = 4096,
                 use_model_cache: bool = True, adapter: str = "", kernels: str = "auto") -> None:
        """``adapter``: a LoRA adapter folder (peft) merged into the model's weights at load,
        so scoring costs what the bare model costs; "" = the model as shipped. ``scoring``,
        ``quantize`` and ``kernels``: see the module docstring."""
        _check_choice("scoring", scoring, SCORING_MODES)
        _check_choice("quantize", quantize, QUANTIZATIONS)
        _check_choice("kernels", kernels, KERNELS)
        if threads:
            torch.set_num_threads(int(threads))
        hf_model, tokenizer, info = load_causal_lm(model, dtype, use_cache=use_model_cache)
        if adapter:
            hf_model = merge_adapter(hf_model, adapter)
            name = name or f"{display_name(model)}+{Path(adapter).name}"
        self._init(hf_model, tokenizer, name or display_name(model), scoring=scoring,
                   device=device, max_packed_tokens=max_packed_tokens, quantize=quantize,
                   kernels=kernels)
        self.load_info = info

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "TransformersBackend":
        cfg = check_config_keys(config, cls.CONFIG_KEYS, "transformers")
        return cls(**cfg)

    @classmethod
    def from_objects(cls, model, tokenizer, *, name: str = "model", scoring: str = "fast",
                     device: str = "cpu", max_packed_tokens: int = 4096,
                     quantize: str = "none", kernels: str = "auto") -> "TransformersBackend":
        """Wrap an already loaded model + tokenizer (tests, notebooks). ``kernels: onednn``
        replaces the model's linear layers in place."""
        _check_choice("scoring", scoring, SCORING_MODES)
        _check_choice("quantize", quantize, QUANTIZATIONS)
        _check_choice("kernels", kernels, KERNELS)
        self = cls.__new__(cls)
        self._init(model, tokenizer, name, scoring=scoring, device=device,
                   max_packed_tokens=max_packed_tokens, quantize=quantize, kernels=kernels)
        self.load_info = None
        return self

    def _init(self, model, tokenizer, name: str, *, scoring: str, device: str,
              max_packed_tokens: int, quantize: str, kernels: str = "auto") -> None:
        LanguageBackend.__init__(self, name)
        self._lock = threading.RLock()     # one model call at a time (ROS callbacks may overlap)
        self.device = torch.device(device)
        model = model.to(self.device).eval()
        if quantize == "int8":
            if self.device.type != "cpu":
                raise ValueError(f"quantize: int8 runs on the CPU only, not on {device!r}")
            model = quantize_int8(model)
        if kernels == "auto":
            kernels = "onednn" if (quantize == "none" and self.device.type == "cpu"
                                   and model.dtype == torch.float32 and onednn_available()) \
                else "aten"
        if kernels == "onednn":
            if quantize != "none":
                raise ValueError(f"kernels: onednn runs unquantised weights, not quantize: "
                                 f"{quantize}")
            use_onednn_linear(model)
        self.kernels = kernels      # what runs the linear layers: onednn | aten
        self.quantize = quantize
        self.model = model
        self._decoder = model.get_decoder()
        self._head = model.get_output_embeddings()
        self._softcap = getattr(model.config, "final_logit_softcapping", None) or 0.0
        self.tokenizer = tokenizer
        self.scoring = scoring
        if max_packed_tokens < 1:
            raise ValueError("max_packed_tokens must be >= 1")
        self.max_packed_tokens = int(max_packed_tokens)
        # share the tokens of common option starts in the packed pass (a token trie)
        self.share_option_prefixes = True
        self.last_packed_tokens = 0     # tokens in the packed pass(es) of the latest call
        self._prefix_cache: collections.OrderedDict[str, _ContextState] = collections.OrderedDict()
        self.max_prefix_entries = 2
        # ``fast``: the latest contexts' caches, most recently used last
        self._contexts: list[_ContextState] = []
        self.max_contexts = 2
        self._bos = leading_special_ids(tokenizer)
        cfg = model.config
        self._eos_ids = self._collect_eos_ids()
        layer_types = list(getattr(cfg, "layer_types", None) or [])
        window = getattr(cfg, "sliding_window", None)
        # dict masks are needed (and supported) by hybrid models such as Gemma-3
        self._mask_dict = bool(layer_types) and any(t != "full_attention" for t in layer_types)
        self._layer_types = layer_types
        self._windows = {t: (window if t == "sliding_attention" else None) for t in set(layer_types)}
        # a sliding-window cache forgets its oldest keys: it cannot be cropped back to a context
        self.can_grow_context = not self._mask_dict
        if self._mask_dict and not set(layer_types) <= {"full_attention", "sliding_attention"}:
            _LOG.warning("%s has layer types %s: packed scoring is only verified for full and "
                         "sliding-window attention; check it against packed=False",
                         name, sorted(set(layer_types)))

    # ------------------------------------------------------------------ tokenisation
    def _encode(self, text: str) -> list[int]:
        if not text:
            return []
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _collect_eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for v in (getattr(self.tokenizer, "eos_token_id", None),
                  getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)):
            if isinstance(v, int):
                ids.add(v)
            elif isinstance(v, (list, tuple)):
                ids.update(int(x) for x in v)
        return ids

    # ------------------------------------------------------------------ model calls
    def _forward(self, ids: Sequence[int] | torch.Tensor, *, cache=None, position_ids=None,
                 attention_mask=None, logits_to_keep: int = 0, use_cache: bool = True):
        """Logits ``(batch, kept positions, vocab)`` of the last ``logits_to_keep`` positions
        (0: all) and the cache. The decoder runs alone and the language-model head is applied
        here to a contiguous 2-D block of the kept rows: the model's own forward hands the head a
        sliced 3-D view, which torch runs as a batched product at half the speed."""
        if not isinstance(ids, torch.Tensor):
            ids = torch.tensor([list(ids)], dtype=torch.long)
        ids = ids.to(self.device)
        kwargs: dict[str, Any] = {"use_cache": use_cache}
        if cache is not None:
            kwargs["cache"] = cache
        if position_ids is not None:
            kwargs["position_ids"] = position_ids.to(self.device)
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        with torch.inference_mode():
            out = self._decoder(input_ids=ids, **kwargs)
            hidden = out.last_hidden_state
            if logits_to_keep:
                hidden = hidden[:, -logits_to_keep:]
            batch, rows, width = hidden.shape
            logits = self._head(hidden.reshape(batch * rows, width).contiguous())
            if self._softcap:
                logits = torch.tanh(logits / self._softcap) * self._softcap
            logits = logits.view(batch, rows, -1)
        self.stats.forward_passes += 1
        return logits, getattr(out, "cache", None) if use_cache else None

    def _check_finite(self, t: torch.Tensor, what: str) -> None:
        if not bool(torch.isfinite(t).all()):
            raise RuntimeError(
                f"language model {self.name!r} produced non-finite values (NaN/inf) in {what}; "
                f"the scores would be meaningless (dtype {self.model.dtype}: try float32)")

    def _next_logprobs(self, logits_row: torch.Tensor, what: str) -> torch.Tensor:
        lp = torch.log_softmax(logits_row.float(), dim=-1)
        self._check_finite(lp, what)
        return lp

    def _prefix_state(self, prefix: str) -> _ContextState:
        state = self._prefix_cache.get(prefix)
        if state is not None:
            self._prefix_cache.move_to_end(prefix)
            return state
        ids = self._bos + self._encode(prefix)
        if not ids:
            state = _ContextState(None, None, 0)
        else:
            logits, cache = self._forward(ids, logits_to_keep=1)
            self.stats.prompt_tokens += len(ids)
            state = _ContextState(cache, self._next_logprobs(logits[0, -1], "the prefix"),
                                  len(ids))
        self._prefix_cache[prefix] = state
        while len(self._prefix_cache) > self.max_prefix_entries:
            self._prefix_cache.popitem(last=False)
        return state

    def _context_state(self, prefix: str, query: str) -> _ContextState:
        """A private copy of the prefix cache extended with the query tokens."""
        pstate = self._prefix_state(prefix)
        q_ids = self._encode(query)
        if pstate.n_tokens == 0 and not q_ids:
            raise ValueError("prefix and query are both empty (and the tokenizer adds no BOS): "
                             "there is no context to score the first option token from")
        cache = copy.deepcopy(pstate.cache) if pstate.cache is not None else None
        if not q_ids:
            return _ContextState(cache, pstate.next_logprobs, pstate.n_tokens)
        logits, cache = self._forward(q_ids, cache=cache, logits_to_keep=1)
        self.stats.prompt_tokens += len(q_ids)
        return _ContextState(cache, self._next_logprobs(logits[0, -1], "the query"),
                             pstate.n_tokens + len(q_ids))

    def _kept_context(self, ids: list[int]) -> tuple[_ContextState | None, int]:
        """The kept context that shares the longest start with ``ids``, made ready to grow into
        ``ids``: removed from the kept ones (or forked, while there is room, so it goes on
        serving its own queries) and cut back to the shared tokens. Returns it (None when
        nothing is shared) and how many tokens of ``ids`` its cache now holds: at least one
        token of ``ids`` is left to run, whose logits predict the option, unless ``ids`` is
        exactly a kept context (then nothing runs and the state is returned as kept)."""
        if not ids:
            raise ValueError("prefix and query are both empty (and the tokenizer adds no BOS): "
                             "there is no context to score the first option token from")
        best, shared = None, 0
        for state in self._contexts:
            n = common_prefix_len(state.ids, ids)
            if n > shared:
                best, shared = state, n
        if best is not None and shared == len(ids) == best.n_tokens:
            return best, len(ids)
        keep = min(shared, len(ids) - 1)
        if best is None or keep == 0:
            return None, 0
        if keep < best.n_tokens and len(self._contexts) < self.max_contexts:
            cache = copy.deepcopy(best.cache)
        else:
            self._contexts.remove(best)
            cache = best.cache
        if keep < best.n_tokens:
            cache.crop(keep - best.n_tokens)
        return _ContextState(cache, None, keep, tuple(ids[:keep])), keep

    def _keep_context(self, state: _ContextState) -> None:
        if state in self._contexts:
            self._contexts.remove(state)
        self._contexts.append(state)
        del self._contexts[:-self.max_contexts]

    def _drop_context(self, state: _ContextState) -> None:
        """Forget a kept context whose cache may hold tokens beyond it (a pass that failed)."""
        if state in self._contexts:
            self._contexts.remove(state)

    def clear_prefix_cache(self) -> None:
        """Forget every kept prefix and context cache."""
        with self._lock:
            self._prefix_cache.clear()
            self._contexts.clear()

    # ------------------------------------------------------------------ scoring
    def option_logprobs(self, prefix: str, query: str, options: Sequence[str],
                        *, scoring: str | None = None) -> np.ndarray:
        """See :meth:`LanguageBackend.option_logprobs`; ``scoring`` overrides the back end's
        mode for this call (the benchmark compares them on one loaded model)."""
        opts = validate_options(options)
        mode = self.scoring if scoring is None else _check_choice("scoring", scoring,
                                                                  SCORING_MODES)
        with self._lock, self._timed():
            opt_ids = [self._encode(o) for o in opts]
            for o, ids in zip(opts, opt_ids):
                if not ids:
                    raise ValueError(f"option {o!r} encodes to no tokens")
            if mode == "naive":
                scores = self._score_naive(prefix, query, opt_ids)
            else:
                scores = self._score_packed(prefix, query, opt_ids,
                                            grow=mode == "fast" and self.can_grow_context)
            self.stats.scored_tokens += sum(len(i) for i in opt_ids)
        if not np.all(np.isfinite(scores)):
            raise RuntimeError(f"language model {self.name!r} produced non-finite option scores")
        return scores

    def _score_naive(self, prefix: str, query: str, opt_ids: list[list[int]]) -> np.ndarray:
        ctx = self._bos + self._encode(prefix) + self._encode(query)
        if not ctx:
            raise ValueError("prefix and query are both empty (and the tokenizer adds no BOS): "
                             "there is no context to score the first option token from")
        out = np.empty(len(opt_ids), dtype=np.float64)
        for i, ids in enumerate(opt_ids):
            m = len(ids)
            # the last option token is only predicted, never needed as an input
            logits, _ = self._forward(ctx + ids[:-1], logits_to_keep=m, use_cache=False)
            self.stats.prompt_tokens += len(ctx)
            lp = torch.log_softmax(logits[0].float(), dim=-1)          # (m, vocab)
            self._check_finite(lp, "the option scores")
            tgt = torch.tensor(ids, device=lp.device)
            out[i] = float(lp.gather(1, tgt[:, None]).sum())
        return out

    def _score_packed(self, prefix: str, query: str, opt_ids: list[list[int]],
                      grow: bool = False) -> np.ndarray:
        """``grow``: the ``fast`` path (module docstring): the context's new tokens run in the
        same pass as the first trie of options."""
        self.last_packed_tokens = 0
        # Each option's last token is only predicted, so the packed inputs are tokens 1..m-1;
        # one-token options need no pass. Options go into tries of <= max_packed_tokens nodes.
        chunks: list[tuple[_TokenTrie, list[tuple[int, list[int]]]]] = []
        for i, option in enumerate(opt_ids):
            if len(option) < 2:
                continue
            if not chunks or (chunks[-1][0].tokens and len(chunks[-1][0].tokens)
                              + chunks[-1][0].new_nodes(option[:-1]) > self.max_packed_tokens):
                chunks.append((_TokenTrie(self.share_option_prefixes), []))
            trie, members = chunks[-1]
            members.append((i, trie.add(option[:-1])))
        stem: list[int] = []
        if grow:
            context_ids = self._bos + self._encode(prefix) + self._encode(query)
            ctx, held = self._kept_context(context_ids)
            if ctx is None:
                ctx = _ContextState(None, None, 0, ())
            stem = context_ids[held:]            # the context's new tokens, run with chunk 0
            self.stats.prompt_tokens += len(stem)
        else:
            ctx = self._context_state(prefix, query)
        out = np.zeros(len(opt_ids), dtype=np.float64)
        for k, (trie, members) in enumerate(chunks or [(_TokenTrie(), [])]):
            rows = [r for _, path in members for r in path]
            targets = [t for i, _ in members for t in opt_ids[i][1:]]
            if not stem and not rows:      # one-token options only: the context's logits do
                continue
            if grow:      # the kept context's cache: the options' tokens are cropped off after
                cache = ctx.cache
            else:         # the last chunk may consume the call's private cache; others copy it
                cache = ctx.cache if k == len(chunks) - 1 else copy.deepcopy(ctx.cache)
            try:
                tok_lp, stem_lp, cache = self._packed_pass(cache, ctx.n_tokens, trie, rows,
                                                           targets, stem)
            except BaseException:
                if grow:
                    self._drop_context(ctx)
                raise
            if stem:          # the context has grown by the stem: keep it for the next call
                ctx = _ContextState(cache, stem_lp, ctx.n_tokens + len(stem),
                                    tuple(context_ids))
                stem = []
            if grow:
                if trie.tokens:
                    cache.crop(-len(trie.tokens))
                self._keep_context(ctx)
            start = 0
            for i, path in members:
                out[i] += float(tok_lp[start:start + len(path)].sum())
                start += len(path)
        first_lp = ctx.next_logprobs
        out += np.array([float(first_lp[option[0]]) for option in opt_ids], dtype=np.float64)
        return out

    def _ctx_kv_lens(self, cache, n_ctx: int) -> dict[str, int]:
        if not self._mask_dict:
            return {"full_attention": n_ctx}
        lens: dict[str, int] = {}
        for i, kind in enumerate(self._layer_types):
            if kind in lens:
                continue
            layer = cache.layers[i]
            keys = getattr(layer, "keys", None)
            held = 0 if keys is None or keys.numel() == 0 else int(keys.shape[-2])
            lens[kind] = held
        return lens

    def _packed_pass(self, cache, n_ctx: int, trie: _TokenTrie, rows: list[int],
                     targets: list[int], stem: Sequence[int] = ()):
        """One forward pass on top of ``cache`` (which holds ``n_ctx`` tokens and is extended
        in place): first the ``stem`` (context tokens not yet in the cache, a chain), then the
        trie's tokens hanging under it. Returns log p(targets[j] | context, ancestors of
        rows[j]) as a float32 tensor, the next-token log-probabilities after the stem (None
        without one) and the cache."""
        n_stem = len(stem)
        parents = [j - 1 for j in range(n_stem)]
        parents += [p + n_stem if p >= 0 else n_stem - 1 for p in trie.parents]
        if cache is None:
            kv_lens = dict.fromkeys(self._windows if self._mask_dict else ["full_attention"], 0)
        else:
            kv_lens = self._ctx_kv_lens(cache, n_ctx)
        bool_masks = build_tree_masks(parents, n_ctx, kv_lens, self._windows)
        depth: list[int] = []
        for p in parents:
            depth.append(0 if p < 0 else depth[p] + 1)
        positions = torch.tensor([depth], dtype=torch.long) + n_ctx
        dtype = self.model.dtype
        neg = torch.finfo(dtype).min
        # additive float masks: valid for eager and sdpa attention alike
        masks = {k: torch.zeros(m.shape, dtype=dtype).masked_fill_(~m, neg)[None, None]
                 .to(self.device) for k, m in bool_masks.items()}
        attn = masks if self._mask_dict else masks["full_attention"]
        n_keep = len(trie.tokens) + (1 if n_stem else 0)   # logits after the stem and of the trie
        logits, cache = self._forward(list(stem) + trie.tokens, cache=cache,
                                      position_ids=positions, attention_mask=attn,
                                      logits_to_keep=n_keep)
        lg = logits[0].float()                                   # (n_keep, vocab)
        stem_lp = None
        if n_stem:
            stem_lp = self._next_logprobs(lg[0], "the context")
            lg = lg[1:]
        r = torch.tensor(rows, dtype=torch.long, device=lg.device)
        t = torch.tensor(targets, dtype=torch.long, device=lg.device)
        tok_lp = lg[r, t] - torch.logsumexp(lg, dim=-1)[r] if rows else lg.new_zeros(0)
        self._check_finite(tok_lp, "the option scores")
        self.last_packed_tokens += len(trie.tokens)
        return tok_lp.cpu(), stem_lp, cache

    # ------------------------------------------------------------------ generation
    def _decode_tail(self, anchor: list[int], ids: list[int]) -> str:
        """Text of ``ids`` as it reads after ``anchor`` (keeps leading spaces)."""
        if not anchor:
            return self.tokenizer.decode(ids)
        head = self.tokenizer.decode(anchor)
        full = self.tokenizer.decode(anchor + ids)
        return full[len(head):] if full.startswith(head) else self.tokenizer.decode(ids)

    def generate(self, prefix: str, query: str, *, max_new_tokens: int = 24,
                 stop: Sequence[str] = ("\n",), num_samples: int = 1, temperature: float = 0.0,
                 seed: int | None = None) -> list[Generation]:
        validate_generate_args(max_new_tokens, num_samples, temperature)
        stop = [s for s in stop if s]
        with self._lock, self._timed():
            ctx = self._context_state(prefix, query)
            q_ids = self._encode(query)
            anchor = q_ids[-1:] or (self._bos + self._encode(prefix))[-1:]
            B = num_samples
            cache = ctx.cache
            if cache is not None and B > 1:
                cache.batch_repeat_interleave(B)
            next_lp = ctx.next_logprobs[None].expand(B, -1)
            gen = torch.Generator().manual_seed(int(seed)) if seed is not None else None
            tokens: list[list[int]] = [[] for _ in range(B)]
            lps: list[list[float]] = [[] for _ in range(B)]
            texts = [""] * B
            done = [False] * B
            for step in range(max_new_tokens):
                if temperature == 0.0:
                    nxt = next_lp.argmax(dim=-1)
                else:
                    probs = torch.softmax(next_lp / temperature, dim=-1).cpu()
                    nxt = torch.multinomial(probs, 1, generator=gen)[:, 0]
                for b in range(B):
                    if done[b]:
                        continue
                    t = int(nxt[b])
                    tokens[b].append(t)
                    lps[b].append(float(next_lp[b, t]))
                    if t in self._eos_ids:
                        done[b] = True
                        continue
                    text, hit = cut_at_stop(self._decode_tail(anchor, tokens[b]), stop)
                    texts[b] = text
                    if hit:
                        done[b] = True
                if all(done) or step == max_new_tokens - 1:
                    break
                logits, cache = self._forward(
                    nxt[:, None].to(torch.long), cache=cache,
                    position_ids=torch.full((B, 1), ctx.n_tokens + step, dtype=torch.long),
                    logits_to_keep=1)
                next_lp = torch.log_softmax(logits[:, -1].float(), dim=-1)
                self._check_finite(next_lp, "generation")
            results = []
            for b in range(B):
                n = len(tokens[b])
                self.stats.generated_tokens += n
                results.append(Generation(texts[b], float(np.mean(lps[b])) if n else float("nan"), n))
        return results
