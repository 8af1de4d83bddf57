"""A "soup" of LoRA planner adapters: the mean of their weight deltas, exactly, as one adapter.

Each adapter's delta is B @ A * alpha / r. Stacking the A matrices along the rank and the B
matrices (each divided by n) gives an adapter of rank n * r whose delta is the mean; alpha is
scaled with r so that alpha / r stays the same. The base model and prompt are the first's.
Usage: python docs/results/kitchens/soup.py OUT ADAPTER ADAPTER...
"""
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

out, parts = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]
if len(parts) < 2:
    raise SystemExit(__doc__)
for p in parts:
    missing = [f for f in ("adapter_config.json", "adapter_model.safetensors", "planner.json")
               if not (p / f).is_file()]
    if missing:
        raise SystemExit(f"{p}: not a planner adapter (no {', '.join(missing)})")
configs = [json.loads((p / "adapter_config.json").read_text()) for p in parts]
rank, alpha = configs[0]["r"], configs[0]["lora_alpha"]
if any((c["r"], c["lora_alpha"]) != (rank, alpha) for c in configs):
    raise SystemExit("the adapters differ in r or lora_alpha")
records = [json.loads((p / "planner.json").read_text()) for p in parts]
if len({r.get("base_model") for r in records}) != 1:
    raise SystemExit("the adapters are of different base models: "
                     + ", ".join(str(r.get("base_model")) for r in records))
weights = [load_file(str(p / "adapter_model.safetensors")) for p in parts]
n = len(weights)
merged = {}
for key in weights[0]:
    if "lora_A" in key:
        merged[key] = torch.cat([w[key] for w in weights], 0).contiguous()
    elif "lora_B" in key:
        merged[key] = torch.cat([w[key] / n for w in weights], 1).contiguous()
    else:
        raise SystemExit(f"not a plain LoRA weight: {key}")
out.mkdir(parents=True, exist_ok=True)
save_file(merged, str(out / "adapter_model.safetensors"))
(out / "adapter_config.json").write_text(
    json.dumps(dict(configs[0], r=rank * n, lora_alpha=alpha * n), indent=2))
record = records[0]
record["soup_of"] = [str(p) for p in parts]
(out / "planner.json").write_text(json.dumps(record, indent=1))
print(f"soup of {n} adapters -> {out} (rank {rank * n})")
