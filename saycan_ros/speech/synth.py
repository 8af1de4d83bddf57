"""Spoken test audio from text with espeak-ng (Debian's ``espeak-ng`` package): for the tests,
``saycan bench speech`` and trying the voice path without a microphone."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from saycan_ros.speech.audio import read_wav

ESPEAK = "espeak-ng"


def have_espeak() -> bool:
    return shutil.which(ESPEAK) is not None


def speak_to_wav(text: str, path: str | Path, voice: str = "en-us", words_per_minute: int = 160) -> Path:
    """Write ``text`` spoken by espeak-ng to the WAV file ``path`` (22,050 Hz mono)."""
    if not have_espeak():
        raise RuntimeError("espeak-ng is not installed (Debian: apt-get install espeak-ng)")
    subprocess.run([ESPEAK, "-v", voice, "-s", str(int(words_per_minute)), "-w", str(path), text],
                   check=True, capture_output=True, timeout=60)
    return Path(path)


def speak(text: str, voice: str = "en-us", words_per_minute: int = 160) -> np.ndarray:
    """``text`` spoken by espeak-ng, as a 16 kHz mono float32 clip."""
    with tempfile.TemporaryDirectory(prefix="saycan_speak_") as folder:
        return read_wav(speak_to_wav(text, Path(folder) / "clip.wav", voice, words_per_minute))
