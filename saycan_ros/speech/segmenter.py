"""Cut a live microphone stream into utterances by energy: an utterance starts when a block is
louder than the threshold and ends after ``silence_s`` of quiet (push-to-talk needs none)."""
from __future__ import annotations

from collections import deque
from typing import Iterator

import numpy as np

from saycan_ros.speech.audio import MAX_SECONDS, SAMPLE_RATE


class UtteranceSegmenter:
    def __init__(self, threshold: float = 0.02, silence_s: float = 0.8, min_speech_s: float = 0.3,
                 preroll_s: float = 0.2, rate: int = SAMPLE_RATE):
        if not threshold > 0 or not silence_s > 0:
            raise ValueError(f"threshold and silence_s must be > 0, got {threshold}, {silence_s}")
        self.threshold, self.rate = float(threshold), int(rate)
        self.silence = int(silence_s * rate)
        self.min_speech = int(min_speech_s * rate)
        self.max_len = int(MAX_SECONDS * rate)
        self.tail = int(preroll_s * rate)          # quiet kept after the speech, as before it
        self._preroll: deque[np.ndarray] = deque(maxlen=max(1, int(preroll_s * rate / 480)))
        self._blocks: list[np.ndarray] = []
        self._quiet = self._loud = 0

    def feed(self, block: np.ndarray) -> Iterator[np.ndarray]:
        """Take one block of float32 samples; yield each utterance it completes."""
        block = np.asarray(block, dtype=np.float32).reshape(-1)
        loud = float(np.sqrt(np.mean(block ** 2))) > self.threshold if block.size else False
        if not self._blocks:
            if not loud:
                self._preroll.append(block)
                return
            self._blocks = list(self._preroll)
            self._preroll.clear()
            self._quiet = self._loud = 0
        self._blocks.append(block)
        if loud:
            self._loud += block.size
            self._quiet = 0
        else:
            self._quiet += block.size
        length = sum(b.size for b in self._blocks)
        if self._quiet >= self.silence or length >= self.max_len:
            clip, speech = np.concatenate(self._blocks), self._loud
            clip = clip[:clip.size - max(0, self._quiet - self.tail)]
            self._blocks = []
            if speech >= self.min_speech:
                yield clip[:self.max_len]
