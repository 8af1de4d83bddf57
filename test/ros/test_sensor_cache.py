"""The sensor cache every node reads its sensors through (saycan_ros.ros.sensor_cache): latest
value, age, joint tables merged from several publishers, and waiting for a fresh reading.
No DDS: the cache holds plain values; a fake clock makes the ages exact."""
import threading
import time

import pytest

from saycan_ros.ros.sensor_cache import SensorCache


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_latest_value_its_age_and_since():
    clock = Clock()
    cache = SensorCache(clock)
    assert cache.get("image") is None and not cache.has("image") and cache.received("image") is None
    cache.put("image", "frame 1")
    clock.now += 0.5
    cache.put("image", "frame 2")
    assert cache.get("image") == "frame 2" and cache.received("image") == 100.5
    clock.now += 1.0
    assert cache.get("image", max_age=2.0) == "frame 2"
    assert cache.get("image", max_age=0.5) is None            # too old
    assert cache.get("image", since=100.6) is None            # arrived before
    assert cache.get("image", since=100.5) == "frame 2"


def test_joints_merge_publishers_and_go_stale():
    clock = Clock()
    cache = SensorCache(clock)
    names = ("lift", "yaw", "extend", "gripper")
    assert cache.joints(names) is None
    cache.put_joints(["lift", "yaw"], [1.0, 0.1])
    assert cache.joints(names) is None                        # the gripper has not reported
    cache.put_joints(["extend", "gripper"], [0.4, 0.9])       # another publisher
    assert cache.joints(names) == (1.0, 0.1, 0.4, 0.9)
    assert cache.joints(["gripper", "lift"]) == (0.9, 1.0)    # in the order asked
    clock.now += 3.0
    assert cache.joints(names, max_age=2.0) is None and cache.joints(names) is not None
    assert cache.joint_table() == {"lift": 1.0, "yaw": 0.1, "extend": 0.4, "gripper": 0.9}


def test_wait_since_returns_the_first_fresh_reading_or_none():
    cache = SensorCache()
    cache.put("image", "old")
    since = time.monotonic()
    threading.Timer(0.1, cache.put, ("image", "new")).start()
    assert cache.wait_since("image", since, timeout=5.0) == "new"
    assert cache.wait_since("image", time.monotonic(), timeout=0.1) is None   # none came


def test_wait_since_stops_when_the_check_raises():
    cache = SensorCache()

    def cancelled():
        raise RuntimeError("cancelled")
    with pytest.raises(RuntimeError, match="cancelled"):
        cache.wait_since("image", time.monotonic(), timeout=5.0, check=cancelled)
