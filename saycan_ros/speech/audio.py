"""Audio in the one form the recognisers take: mono float32 in [-1, 1] at 16 kHz.

Everything from outside (a WAV file, a ROS message's samples) is checked here, so that a bad
clip is one clear :class:`AudioError` and never reaches a model."""
from __future__ import annotations

import math
import wave
from pathlib import Path

import numpy as np

SAMPLE_RATE = 16_000
#: The longest clip accepted (s): one spoken instruction, not a recording session.
MAX_SECONDS = 30.0
MIN_SECONDS = 0.1


class AudioError(ValueError):
    """Audio that cannot be used (unreadable, empty, too long, not finite)."""


def resample(samples: np.ndarray, rate: int, target: int = SAMPLE_RATE) -> np.ndarray:
    """Polyphase resampling with its anti-aliasing filter (plain interpolation of 22 kHz
    speech to 16 kHz aliases enough to turn "throw" into "flow" for Whisper)."""
    if rate == target or samples.size == 0:
        return samples.astype(np.float32, copy=False)
    from scipy.signal import resample_poly
    g = math.gcd(int(rate), int(target))
    return resample_poly(samples, target // g, int(rate) // g).astype(np.float32)


def from_pcm16(samples, rate: int, channels: int = 1) -> np.ndarray:
    """Interleaved 16-bit PCM (a sequence or array of ints) -> checked 16 kHz mono float32."""
    if not isinstance(rate, (int, np.integer)) or not 8_000 <= rate <= 192_000:
        raise AudioError(f"sample rate must be 8000..192000 Hz, got {rate!r}")
    if not isinstance(channels, (int, np.integer)) or not 1 <= channels <= 8:
        raise AudioError(f"channels must be 1..8, got {channels!r}")
    if len(samples) > MAX_SECONDS * rate * channels:     # refused before any conversion
        raise AudioError(f"clip of {len(samples) / (rate * channels):.1f} s is too long (at most "
                         f"{MAX_SECONDS:.0f} s: one instruction per clip)")
    pcm = np.asarray(samples, dtype=np.int16)
    if pcm.size % channels:
        raise AudioError(f"{pcm.size} samples do not divide into {channels} channels")
    mono = pcm.reshape(-1, channels).astype(np.float32).mean(axis=1) / 32768.0
    return checked(resample(mono, int(rate)))


def checked(samples: np.ndarray, rate: int = SAMPLE_RATE) -> np.ndarray:
    """``samples`` if they are a usable clip at ``rate``, else :class:`AudioError`."""
    seconds = samples.size / rate
    if seconds < MIN_SECONDS:
        raise AudioError(f"clip of {seconds:.2f} s is too short (at least {MIN_SECONDS} s)")
    if seconds > MAX_SECONDS:
        raise AudioError(f"clip of {seconds:.1f} s is too long (at most {MAX_SECONDS:.0f} s: "
                         "one instruction per clip)")
    if not np.all(np.isfinite(samples)):
        raise AudioError("clip has NaN or infinite samples")
    return samples


def read_wav(path: str | Path) -> np.ndarray:
    """A PCM WAV file (8/16/32-bit, any rate, any channels) as a checked 16 kHz mono clip."""
    try:
        with wave.open(str(path), "rb") as wav:
            width, channels, rate = wav.getsampwidth(), wav.getnchannels(), wav.getframerate()
            frames = wav.readframes(wav.getnframes())
    except FileNotFoundError:
        raise AudioError(f"no audio file {str(path)!r}") from None
    except (wave.Error, EOFError, OSError) as error:
        raise AudioError(f"cannot read {str(path)!r} as a PCM WAV file: {error}") from None
    kinds = {1: (np.uint8, 128.0, 128.0), 2: (np.int16, 0.0, 32768.0),
             4: (np.int32, 0.0, 2147483648.0)}
    if width not in kinds:
        raise AudioError(f"{str(path)!r}: {8 * width}-bit samples are not supported (8, 16, 32)")
    dtype, offset, scale = kinds[width]
    data = np.frombuffer(frames, dtype=dtype).astype(np.float32)
    if data.size % channels:
        raise AudioError(f"{str(path)!r}: truncated frames")
    mono = ((data - offset) / scale).reshape(-1, channels).mean(axis=1)
    return checked(resample(mono, rate))
