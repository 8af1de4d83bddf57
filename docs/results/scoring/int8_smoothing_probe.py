"""int8 with SmoothQuant-style smoothing (docs/results/scoring.md, "int8"): per-channel scales
moved from the activations into the weights before fbgemm's dynamic int8, then the bench's
30 development steps scored pruned, against fp32. A probe, not product code:

    python docs/results/scoring/int8_smoothing_probe.py
"""
import copy
import time
import warnings

import numpy as np
import torch
from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

from saycan_ros.evaluation.bench_scoring import record_steps
from saycan_ros.llm.config import LLMConfig, resolve_adapter
from saycan_ros.llm.transformers_backend import TransformersBackend
from saycan_ros.planning.vocabulary import load_vocabulary
from saycan_ros.stack import make_language_scorer

warnings.filterwarnings("ignore")
scorer = make_language_scorer(LLMConfig(), load_vocabulary().prompt)
steps = record_steps(6, scorer=scorer, progress=False)
b = scorer.backend
base = b.model

def run(backend):
    backend.clear_prefix_cache()
    out, ts = [], []
    for st in steps:
        opts = [o for o, r in zip(st.options, st.runnable) if r]
        t0 = time.perf_counter()
        out.append(backend.option_logprobs(st.prefix, st.query, opts))
        ts.append(time.perf_counter() - t0)
    return out, np.median(ts)


def choice(scores, st):
    """SayCan's pick among the runnable skills: argmax of log-prob + log affordance."""
    aff = np.array([a for a, r in zip(st.affordance, st.runnable) if r])
    return int(np.argmax(scores + np.log(aff)))

ref, t_ref = run(b)

def act_max(model, texts_ids):
    stats = {}
    hooks = []
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear):
            def hook(m, inp, out, name=name):
                x = inp[0].detach().reshape(-1, inp[0].shape[-1]).abs().amax(0)
                stats[name] = torch.maximum(stats[name], x) if name in stats else x
            hooks.append(mod.register_forward_hook(hook))
    with torch.inference_mode():
        for ids in texts_ids: model(input_ids=torch.tensor([ids]))
    for h in hooks: h.remove()
    return stats

def smooth(model, stats, alpha):
    m = copy.deepcopy(model)
    cfg = m.config
    hd = cfg.hidden_size // cfg.num_attention_heads
    groups = cfg.num_attention_heads // cfg.num_key_value_heads
    with torch.no_grad():
        for i, layer in enumerate(m.model.layers):
            pre = f"model.layers.{i}."
            att, mlp = layer.self_attn, layer.mlp
            # norm -> q,k,v
            a = stats[pre+"self_attn.q_proj"]
            w = torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight]).abs().amax(0)
            s = (a.clamp(min=1e-5) ** alpha / w.clamp(min=1e-5) ** (1 - alpha)).clamp(min=1e-5)
            layer.input_layernorm.weight.div_(s)
            for lin in (att.q_proj, att.k_proj, att.v_proj): lin.weight.mul_(s)
            # norm -> gate, up
            a = stats[pre+"mlp.gate_proj"]
            w = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]).abs().amax(0)
            s = (a.clamp(min=1e-5) ** alpha / w.clamp(min=1e-5) ** (1 - alpha)).clamp(min=1e-5)
            layer.post_attention_layernorm.weight.div_(s)
            for lin in (mlp.gate_proj, mlp.up_proj): lin.weight.mul_(s)
            # up -> down
            a = stats[pre+"mlp.down_proj"]; w = mlp.down_proj.weight.abs().amax(0)
            s = (a.clamp(min=1e-5) ** alpha / w.clamp(min=1e-5) ** (1 - alpha)).clamp(min=1e-5)
            mlp.up_proj.weight.div_(s[:, None]); mlp.down_proj.weight.mul_(s)
            # v -> o (per kv channel, shared by its query heads)
            a = stats[pre+"self_attn.o_proj"].view(cfg.num_key_value_heads, groups, hd).amax(1)
            w = att.o_proj.weight.abs().amax(0).view(cfg.num_key_value_heads, groups, hd).amax(1)
            s = (a.clamp(min=1e-5) ** alpha / w.clamp(min=1e-5) ** (1 - alpha)).clamp(min=1e-5)
            att.v_proj.weight.div_(s.reshape(-1)[:, None])
            att.o_proj.weight.mul_(s[:, None, :].expand(-1, groups, -1).reshape(-1))
    return m

# calibration: 24 synthetic planning dialogues (a generator seed no adapter trains on)
from saycan_ros.learning.planner_data import PlanDataGenerator, load_lexicon
from saycan_ros.planning.vocabulary import load_vocabulary
from saycan_ros.stack import adapter_prompt
v = load_vocabulary(); prompt = adapter_prompt(resolve_adapter("smollm2-135m","auto"))
gen = PlanDataGenerator(v.kitchen, v.skills, load_lexicon(v.kitchen), seed=123)
cal = []
for d in gen.dialogues(24):
    sc = d.scene if isinstance(d.scene, str) else d.scene[-1]
    text = prompt.prefix() + prompt.query(d.instruction, d.steps[:-1], sc) + prompt.option(d.steps[-1])
    cal.append(b._bos + b._encode(text))
stats = act_max(base, cal)
VARIANTS = [(0.0, ()), (0.5, ()), (0.7, ()), (0.85, ()), (0.7, ("lm_head",)),
            (0.7, ("lm_head", "down_proj")), (0.85, ("lm_head", "down_proj", "o_proj"))]
for alpha, skip in VARIANTS:      # skip: linear layers left in fp32
    sm = smooth(base, stats, alpha) if alpha > 0 else copy.deepcopy(base)
    spec = {n: per_channel_dynamic_qconfig for n, mod in sm.named_modules()
            if isinstance(mod, torch.nn.Linear) and not any(k in n for k in skip)}
    q = TransformersBackend.from_objects(quantize_dynamic(sm, spec, dtype=torch.qint8),
                                         b.tokenizer, name="q")
    print(f"fp32 {skip}", end=" ")
    out, t = run(q)
    same = sum(choice(o, st) == choice(r_, st) for o, r_, st in zip(out, ref, steps))
    d5 = max(np.abs(o - r_)[np.argsort(-r_)[:5]].max() for o, r_ in zip(out, ref))
    dmax = max(np.abs(o - r_).max() for o, r_ in zip(out, ref))
    print(f"alpha {alpha}: median {t:.3f}s (fp32 {t_ref:.3f}) same {same}/{len(steps)} "
          f"top5diff {d5:.2f} maxdiff {dmax:.2f}", flush=True)
