"""``saycan bench speech``: the offline recognisers side by side on the same spoken
instructions (espeak-ng), word error rate of the instruction text and seconds per clip."""
from __future__ import annotations

import re
import statistics
import time

from tqdm import tqdm

#: Kitchen requests in everyday phrasing, spoken by espeak-ng (American English voice).
PHRASES = (
    "bring me the sponge", "throw away the coke can", "go to the far counter",
    "put the apple on the table", "pick up the green tea", "bring me something to drink",
    "i spilled my drink can you help", "move the water bottle to the close counter",
    "find an orange", "bring me a bag of chips and a soda", "put the redbull can in the trash",
    "come over here", "take the energy bar to the table", "bring me a fruit",
    "throw out the rice chips and the pepsi can", "put down what you are holding",
    "i am thirsty", "bring me the lime soda please", "clear the table", "fetch me a snack",
)


def _words(text: str) -> list[str]:
    return re.sub(r"[^\w\s']", " ", text.lower()).split()


def word_errors(reference: str, hypothesis: str) -> tuple[int, int]:
    """(substitutions + insertions + deletions, reference words): Levenshtein over words."""
    ref, hyp = _words(reference), _words(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, start=1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1], len(ref)


def run_speech_bench(recognisers: dict, phrases=PHRASES, progress: bool = True) -> dict:
    """``recognisers``: name -> zero-argument factory. Every recogniser hears the same clips."""
    from saycan_ros.speech.recognisers import timed
    from saycan_ros.speech.synth import speak
    from saycan_ros.speech.transcript import to_instruction
    clips = [speak(p) for p in tqdm(phrases, desc="speak (espeak-ng)", disable=not progress)]
    audio_s = [c.size / 16000 for c in clips]
    results = {}
    for name, make in recognisers.items():
        start = time.perf_counter()
        recogniser = make()
        load_s = time.perf_counter() - start
        errors = words = 0
        seconds, misses = [], []
        for phrase, clip in tqdm(list(zip(phrases, clips)), desc=name, disable=not progress):
            heard = timed(recogniser, clip)
            text = to_instruction(heard.text)
            e, n = word_errors(phrase, text)
            errors, words = errors + e, words + n
            seconds.append(heard.seconds)
            if e:
                misses.append({"said": phrase, "heard": text})
        results[name] = {"wer": errors / max(1, words), "word_errors": errors, "words": words,
                         "median_s": statistics.median(seconds), "max_s": max(seconds),
                         "load_s": load_s, "misses": misses}
    return {"clips": len(clips), "median_audio_s": statistics.median(audio_s),
            "recognisers": results}


def format_speech_result(result: dict) -> str:
    lines = [f"speech: {result['clips']} spoken instructions (espeak-ng, median "
             f"{result['median_audio_s']:.1f} s of audio)"]
    rows = result["recognisers"]
    base = rows.get("whisper")
    for name, r in rows.items():
        ratio = (f", {r['median_s'] / base['median_s']:.2f}x whisper's time"
                 if base and name != "whisper" else "")
        lines.append(f"  {name:13s} WER {r['wer']:.3f} ({r['word_errors']}/{r['words']} words), "
                     f"{r['median_s']:.2f} s per clip median, {r['max_s']:.2f} s worst, "
                     f"load {r['load_s']:.1f} s{ratio}")
        for miss in r["misses"][:5]:
            lines.append(f"      said {miss['said']!r} -> heard {miss['heard']!r}")
    return "\n".join(lines)
