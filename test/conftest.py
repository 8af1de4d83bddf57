"""Test-wide settings: DDS stays on loopback, each test process gets its own ROS domain, and the
language models are loaded once per session."""
import os

# Before anything imports rclpy: discovery on this machine only, a domain of our own (node
# subprocesses inherit both), and no model hub.
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ["ROS_DOMAIN_ID"] = str(20 + os.getpid() % 37)  # 20..56; 57-59 are make's, 6x tests'
os.environ.setdefault("SAYCAN_TEST_DOMAIN_ID", os.environ["ROS_DOMAIN_ID"])
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def kitchen():
    from saycan_ros.core.kitchen import load_kitchen
    return load_kitchen()


@pytest.fixture(scope="session")
def skills(kitchen):
    from saycan_ros.core.skills import load_skills
    return load_skills(kitchen)


@pytest.fixture(scope="session")
def vocabulary():
    from saycan_ros.planning.vocabulary import load_vocabulary
    return load_vocabulary()


@pytest.fixture(scope="session")
def test_scorer(vocabulary):
    """The language scorer on the small shipped model (SmolLM2-135M), loaded once."""
    from saycan_ros.stack import TEST_MODEL, make_language_scorer
    return make_language_scorer({"backend": "transformers", "model": TEST_MODEL},
                                vocabulary.prompt)


@pytest.fixture(scope="session")
def speech():
    """espeak-ng's speech as 16 kHz clips (saycan_ros.speech.synth.speak). Skipped where
    espeak-ng is missing, except under SAYCAN_REQUIRE_SPEECH=1 (CI), where that fails."""
    from saycan_ros.speech.synth import have_espeak, speak
    if not have_espeak():
        if os.environ.get("SAYCAN_REQUIRE_SPEECH") == "1":
            pytest.fail("espeak-ng is missing but SAYCAN_REQUIRE_SPEECH=1 (make test installs it)")
        pytest.skip("espeak-ng is not installed (apt-get install espeak-ng)")
    return speak


@pytest.fixture(scope="session")
def whisper(kitchen):
    """The shipped recogniser as the speech node makes it (Whisper base, kitchen prompt)."""
    from saycan_ros.speech.recognisers import kitchen_prompt, make_recogniser
    return make_recogniser("whisper", threads=2, prompt=kitchen_prompt(kitchen))
