"""The voice front end without ROS: audio checks, resampling, the utterance segmenter,
transcript -> instruction, and the real Whisper model on espeak-ng speech."""
import wave

import numpy as np
import pytest

from saycan_ros.speech.audio import (MAX_SECONDS, SAMPLE_RATE, AudioError, from_pcm16, read_wav,
                                     resample)
from saycan_ros.speech.recognisers import (RecogniserError, WHISPER_SHA256, make_recogniser,
                                           whisper_model_dir)
from saycan_ros.speech.segmenter import UtteranceSegmenter
from saycan_ros.speech.transcript import to_instruction


def tone(seconds, rate=SAMPLE_RATE, hz=440.0, level=0.3):
    t = np.arange(int(seconds * rate)) / rate
    return (level * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def write_wav(path, samples, rate, width=2, channels=1):
    kinds = {1: (np.uint8, 127, 128), 2: (np.int16, 32767, 0), 4: (np.int32, 2**31 - 1, 0)}
    dtype, scale, offset = kinds[width]
    data = np.repeat((samples * scale + offset).astype(dtype)[:, None], channels, axis=1)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(data.tobytes())


def dominant_hz(samples, rate=SAMPLE_RATE):
    spectrum = np.abs(np.fft.rfft(samples))
    return np.fft.rfftfreq(samples.size, 1 / rate)[spectrum.argmax()]


@pytest.mark.parametrize("rate", [8000, 22050, 44100, 48000])
def test_resampling_keeps_length_and_pitch(rate):
    out = resample(tone(1.0, rate, hz=440.0), rate)
    assert abs(out.size - SAMPLE_RATE) <= 1
    assert dominant_hz(out) == pytest.approx(440.0, abs=2.0)


def test_resampling_filters_what_16_khz_cannot_hold():
    """A 9 kHz tone at 44.1 kHz is above 16 kHz's Nyquist: filtered out, not folded to 7 kHz."""
    out = resample(tone(1.0, 44100, hz=9000.0), 44100)
    assert np.sqrt(np.mean(out ** 2)) < 0.02


@pytest.mark.parametrize("width,channels", [(1, 1), (2, 1), (2, 2), (4, 1)])
def test_wav_files_of_every_pcm_kind_read_the_same(tmp_path, width, channels):
    path = tmp_path / "a.wav"
    write_wav(path, tone(0.5, 22050), 22050, width, channels)
    clip = read_wav(path)
    assert clip.dtype == np.float32 and abs(clip.size - SAMPLE_RATE // 2) <= 1
    assert np.sqrt(np.mean(clip ** 2)) == pytest.approx(0.3 / np.sqrt(2), rel=0.05)


def test_bad_audio_is_one_clear_error(tmp_path):
    (tmp_path / "text.wav").write_text("not a wav file")
    with pytest.raises(AudioError, match="cannot read"):
        read_wav(tmp_path / "text.wav")
    with pytest.raises(AudioError, match="no audio file"):
        read_wav(tmp_path / "missing.wav")
    write_wav(tmp_path / "short.wav", tone(0.05), SAMPLE_RATE)
    with pytest.raises(AudioError, match="too short"):
        read_wav(tmp_path / "short.wav")
    long_clip = np.zeros(int((MAX_SECONDS + 1) * SAMPLE_RATE), dtype=np.int16)
    with pytest.raises(AudioError, match="too long"):
        from_pcm16(long_clip, SAMPLE_RATE)
    with pytest.raises(AudioError, match="sample rate"):
        from_pcm16(np.zeros(16000, dtype=np.int16), 0)
    with pytest.raises(AudioError, match="channels"):
        from_pcm16(np.zeros(16001, dtype=np.int16), 16000, channels=2)
    with pytest.raises(AudioError, match="channels must be"):
        from_pcm16(np.zeros(16000, dtype=np.int16), 16000, channels=0)


@pytest.mark.parametrize("raw,instruction", [
    ("Throw away the Coke Can!", "Throw away the coke can."),
    ("  bring me   the sponge ", "Bring me the sponge."),
    ("Can you help me?", "Can you help me?"),
    ("i spilled my drink, can i have a sponge", "I spilled my drink, can I have a sponge."),
    ("[BLANK_AUDIO]", ""), ("(music)", ""), ("", ""), (" . ", ""),
])
def test_a_transcript_becomes_an_instruction(raw, instruction):
    assert to_instruction(raw) == instruction


def test_the_segmenter_cuts_one_utterance_out_of_a_stream():
    stream = np.concatenate([np.zeros(8000), tone(1.0), np.zeros(16000), tone(0.1),
                             np.zeros(16000)]).astype(np.float32)
    segmenter = UtteranceSegmenter(threshold=0.05, silence_s=0.5, min_speech_s=0.3)
    clips = [c for i in range(0, stream.size, 480) for c in segmenter.feed(stream[i:i + 480])]
    assert len(clips) == 1                     # the 0.1 s blip is too short to be speech
    assert 1.5 * SAMPLE_RATE > clips[0].size >= 1.0 * SAMPLE_RATE
    with pytest.raises(ValueError):
        UtteranceSegmenter(threshold=0)


def test_an_unknown_recogniser_is_refused():
    with pytest.raises(RecogniserError, match="unknown recogniser"):
        make_recogniser("siri")


def test_the_whisper_weights_are_joined_and_checked():
    import hashlib
    model = whisper_model_dir() / "model.bin"
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    assert digest == WHISPER_SHA256


@pytest.mark.parametrize("said,instruction", [
    ("bring me the sponge", "Bring me the sponge."),
    ("throw away the coke can", "Throw away the coke can."),
])
def test_whisper_hears_spoken_instructions(speech, whisper, said, instruction):
    assert to_instruction(whisper.transcribe(speech(said))) == instruction


def test_whisper_hears_nothing_in_silence(whisper):
    assert to_instruction(whisper.transcribe(np.zeros(SAMPLE_RATE, dtype=np.float32))) == ""
