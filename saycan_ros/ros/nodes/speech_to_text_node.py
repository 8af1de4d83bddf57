"""``speech_to_text``: the voice front end. Spoken audio in, an instruction on
``saycan/instruction`` out, with an offline recogniser (:mod:`saycan_ros.speech.recognisers`,
Whisper base by default: measured against PocketSphinx by ``saycan bench speech``).

In:
- ``saycan/speech/audio`` (saycan_ros/AudioClip): one utterance of 16-bit PCM (push-to-talk,
  a microphone node, a test).
- ``saycan/speech/file`` (std_msgs/String): the path of a WAV file to transcribe.
- the parameter ``audio_file``: a WAV file transcribed once at start (a demo without a mic).
- the parameter ``microphone: true``: the default input device through PortAudio
  (``sounddevice``), cut into utterances by energy (:mod:`saycan_ros.speech.segmenter`).
Out:
- ``saycan/instruction`` (std_msgs/String): the transcript as an instruction ("Bring me the
  sponge."); nothing is published for silence or a clip that cannot be read.
- ``saycan/speech/status`` (std_msgs/String): ``heard: <text> (<s> s)`` or ``error: <why>``
  for every clip, so a bad clip is answered and the node keeps running.

Run: ``ros2 run saycan_ros speech_to_text --ros-args -p audio_file:=/tmp/say.wav``
"""
from __future__ import annotations

import threading
import time

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from saycan_ros.core.kitchen import load_kitchen
from saycan_ros.msg import AudioClip
from saycan_ros.ros.nodes.common import INSTRUCTION_TOPIC, declare_parameters, spin_node
from saycan_ros.speech.audio import SAMPLE_RATE, AudioError, from_pcm16, read_wav
from saycan_ros.speech.recognisers import (DEFAULT_RECOGNISER, RECOGNISERS, RecogniserError,
                                           kitchen_prompt, make_recogniser, timed)
from saycan_ros.speech.transcript import to_instruction

AUDIO_TOPIC = "saycan/speech/audio"
FILE_TOPIC = "saycan/speech/file"
SPEECH_STATUS_TOPIC = "saycan/speech/status"
#: the last few answers kept for a late subscriber (rqt started after the clip was sent)
SPEECH_STATUS_QOS = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE,
                               durability=DurabilityPolicy.TRANSIENT_LOCAL)

DEFAULTS = {
    "recogniser": DEFAULT_RECOGNISER,
    "threads": 2,
    "beam_size": 1,
    "language": "en",
    "kitchen_prompt": True,
    "audio_file": "",
    "audio_file_wait_s": 120.0,
    "microphone": False,
    "mic_threshold": 0.02,
    "mic_silence_s": 0.8,
}
DESCRIPTIONS = {
    "recogniser": f"offline recogniser: {', '.join(sorted(RECOGNISERS))}",
    "threads": "CPU threads of the recogniser (>= 1)",
    "beam_size": "Whisper's beam size (1 = greedy, fastest)",
    "language": "spoken language code for Whisper ('' = detect)",
    "kitchen_prompt": "give Whisper the kitchen's object and place names as its initial prompt",
    "audio_file": "a WAV file transcribed once at start ('' = none)",
    "audio_file_wait_s": "audio_file: the longest wait (s) for a subscriber of the instruction "
                         "topic (the planner) before the file is transcribed (>= 0)",
    "microphone": "listen on the default input device (needs PortAudio and sounddevice)",
    "mic_threshold": "RMS level (0..1) above which a microphone block counts as speech",
    "mic_silence_s": "quiet (s) that ends a microphone utterance",
}


class SpeechToTextNode(Node):
    def __init__(self, recogniser=None, **kwargs):
        super().__init__("speech_to_text", **kwargs)
        p = declare_parameters(self, DEFAULTS, DESCRIPTIONS)
        if p["recogniser"] not in RECOGNISERS:
            raise ValueError(f"speech_to_text: recogniser must be one of {sorted(RECOGNISERS)}, "
                             f"got {p['recogniser']!r}")
        if int(p["threads"]) < 1 or int(p["beam_size"]) < 1:
            raise ValueError("speech_to_text: threads and beam_size must be >= 1")
        if not float(p["audio_file_wait_s"]) >= 0:
            raise ValueError("speech_to_text: audio_file_wait_s must be >= 0, "
                             f"got {p['audio_file_wait_s']!r}")
        self.recogniser = recogniser or make_recogniser(
            p["recogniser"], threads=int(p["threads"]), beam_size=int(p["beam_size"]),
            language=p["language"],
            prompt=kitchen_prompt(load_kitchen()) if p["kitchen_prompt"] else None)
        self.heard: list[str] = []
        self.pub_instruction = self.create_publisher(String, INSTRUCTION_TOPIC, 10)
        self.pub_status = self.create_publisher(String, SPEECH_STATUS_TOPIC, SPEECH_STATUS_QOS)
        # one clip at a time: the recogniser is not re-entrant, later clips queue in DDS
        group = MutuallyExclusiveCallbackGroup()
        self.create_subscription(AudioClip, AUDIO_TOPIC, self._on_clip, 5, callback_group=group)
        self.create_subscription(String, FILE_TOPIC, self._on_file, 5, callback_group=group)
        self._lock = threading.Lock()
        if p["audio_file"]:
            self._started, self._file_wait_s = time.monotonic(), float(p["audio_file_wait_s"])
            self._once = self.create_timer(0.5, lambda: self._start_file(p["audio_file"]),
                                           callback_group=group)
        if p["microphone"]:
            self._listen(float(p["mic_threshold"]), float(p["mic_silence_s"]))

    def _start_file(self, path: str) -> None:
        """The start-up file, once the planner listens: started with it in one launch, the
        planner may still be loading when the transcript is ready (a message nobody hears)."""
        waited = time.monotonic() - self._started
        if self.pub_instruction.get_subscription_count() == 0:
            if waited < self._file_wait_s:
                return                      # the timer calls again
            self._status(f"error: nobody listens on {INSTRUCTION_TOPIC} after {waited:.0f} s: "
                         f"transcribing {path!r} anyway")
        self._once.cancel()
        self._from(lambda: read_wav(path), f"file {path!r}")

    def _on_file(self, msg: String) -> None:
        self._from(lambda: read_wav(msg.data.strip()), f"file {msg.data.strip()!r}")

    def _on_clip(self, msg: AudioClip) -> None:
        self._from(lambda: from_pcm16(msg.samples, int(msg.sample_rate), int(msg.channels)), "clip")

    def _from(self, load, source: str) -> None:
        try:
            samples = load()
        except AudioError as error:
            return self._status(f"error: {source}: {error}")
        self.hear(samples)

    def hear(self, samples: np.ndarray) -> str:
        """Transcribe one checked clip and publish it as an instruction (returns the text)."""
        with self._lock:
            try:
                result = timed(self.recogniser, samples)
            except Exception as error:       # a recogniser failure must not stop the node
                self._status(f"error: the recogniser failed: {type(error).__name__}: {error}")
                return ""
        text = to_instruction(result.text)
        if not text:
            self._status(f"error: no words heard ({result.seconds:.2f} s)")
            return ""
        self.heard.append(text)
        self.pub_instruction.publish(String(data=text))
        self._status(f"heard: {text} ({result.seconds:.2f} s)")
        return text

    def _status(self, text: str) -> None:
        if text.startswith("error"):         # rclpy: one severity per logging call site
            self.get_logger().warning(text)
        else:
            self.get_logger().info(text)
        self.pub_status.publish(String(data=text))

    def _listen(self, threshold: float, silence_s: float) -> None:
        """Microphone input on a PortAudio thread; utterances are transcribed off that thread."""
        try:
            import sounddevice
        except (ImportError, OSError) as error:
            raise RecogniserError(f"microphone: sounddevice/PortAudio unavailable ({error})") from None
        from saycan_ros.speech.segmenter import UtteranceSegmenter
        segmenter = UtteranceSegmenter(threshold, silence_s)

        def on_block(block, _frames, _time, _status):
            for clip in segmenter.feed(block[:, 0].copy()):
                threading.Thread(target=self.hear, args=(clip,), daemon=True).start()

        self._stream = sounddevice.InputStream(samplerate=SAMPLE_RATE, channels=1, dtype="float32",
                                               blocksize=480, callback=on_block)
        self._stream.start()
        self.get_logger().info("listening on the default microphone")


def main(args=None) -> None:
    spin_node(SpeechToTextNode, args)


if __name__ == "__main__":
    main()
