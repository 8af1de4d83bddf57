"""The latest reading of each sensor stream a node subscribes to, thread-safe.

Sensor callbacks (on the node's sensor callback group) ``put`` readings; a skill's worker
thread reads the latest (``get``, optionally no older than ``max_age``), or waits for the first
one received after a moment (``wait_since``: a camera frame taken after the arm came to rest).
Joint states arrive as name/position lists, often split over several publishers, so they are
merged into one table (``put_joints``) and read back in the order a node needs (``joints``).
No rclpy here: the cache holds plain values, the node converts messages before putting them.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable, Sequence

JOINTS = "joint_states"


class SensorCache:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._changed = threading.Condition()
        self._latest: dict[str, tuple[Any, float]] = {}      # stream -> (value, received)
        self._joints: dict[str, float] = {}

    # -- sensor callbacks ----------------------------------------------------------------------
    def put(self, stream: str, value: Any) -> None:
        with self._changed:
            self._latest[stream] = (value, self._clock())
            self._changed.notify_all()

    def put_joints(self, names: Iterable[str], positions: Iterable[float]) -> None:
        with self._changed:
            self._joints.update(zip(names, positions))
            self._latest[JOINTS] = (None, self._clock())
            self._changed.notify_all()

    # -- readers ---------------------------------------------------------------------------------
    def received(self, stream: str) -> float | None:
        """When the latest reading of ``stream`` arrived (the cache's clock), or None."""
        with self._changed:
            entry = self._latest.get(stream)
        return None if entry is None else entry[1]

    def has(self, *streams: str) -> bool:
        with self._changed:
            return all(s in self._latest for s in streams)

    def get(self, stream: str, max_age: float | None = None, since: float | None = None):
        """The latest value of ``stream``, or None when there is none, it is older than
        ``max_age`` seconds, or it arrived before ``since``."""
        with self._changed:
            entry = self._latest.get(stream)
        if entry is None:
            return None
        value, received = entry
        if max_age is not None and self._clock() - received > max_age:
            return None
        if since is not None and received < since:
            return None
        return value

    def joints(self, names: Sequence[str], max_age: float | None = None
               ) -> tuple[float, ...] | None:
        """The positions of ``names`` in that order, or None when one is missing or the last
        joint state is older than ``max_age``."""
        with self._changed:
            entry = self._latest.get(JOINTS)
            if entry is None or (max_age is not None and self._clock() - entry[1] > max_age):
                return None
            try:
                return tuple(float(self._joints[n]) for n in names)
            except KeyError:
                return None

    def joint_table(self) -> dict[str, float]:
        with self._changed:
            return dict(self._joints)

    def wait_since(self, stream: str, since: float, timeout: float,
                   check: Callable[[], None] | None = None, poll: float = 0.05):
        """The first value of ``stream`` received at or after ``since``, waiting until
        ``since + timeout``; None when none came. ``check()`` runs while waiting (a cancelled
        skill raises from it)."""
        deadline = since + timeout
        with self._changed:
            while True:
                entry = self._latest.get(stream)
                if entry is not None and entry[1] >= since:
                    return entry[0]
                if check is not None:
                    check()
                left = deadline - self._clock()
                if left <= 0:
                    return None
                self._changed.wait(min(left, poll))
