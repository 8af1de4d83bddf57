"""The world's state kept on disk, so that a world survives a restart of the process that holds
it (a skill executor killed mid-plan and respawned by its launch file).

A store belongs to one *session* (one launch of the graph): a file written by another session
is never restored, so a new launch starts from the default scene while a respawn within the
same launch continues where the world was. Revisions never go back: the restored world's
revision is above the one saved.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from saycan_ros.core.kitchen import GRIPPER, Kitchen
from saycan_ros.core.tasks import TaskInit
from saycan_ros.core.world import WorldSnapshot

FORMAT = 1


def default_path(session: str, name: str) -> Path:
    """``<tmp>/saycan_ros/<session>/<name>.json``: per boot, per launch, per node."""
    safe = [re.sub(r"[^A-Za-z0-9_-]+", "_", part).strip("_") or "_" for part in (session, name)]
    return Path(tempfile.gettempdir()) / "saycan_ros" / safe[0] / f"{safe[1]}.json"


class WorldStore:
    """Saves a :class:`WorldSnapshot` atomically after every change; loads it for a restart."""

    def __init__(self, path: str | Path, session: str):
        if not session:
            raise ValueError("a world store needs a session (one launch of the graph)")
        self.path = Path(path)
        self.session = session

    def save(self, snapshot: WorldSnapshot) -> None:
        """Write the snapshot (temporary file + rename: a kill mid-write leaves the old one)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = {"format": FORMAT, "session": self.session, "world": snapshot.to_dict()}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, self.path)

    def load(self) -> WorldSnapshot | None:
        """The snapshot this session saved last; None when there is none (or it is another
        session's, or unreadable: then the world starts from its default scene)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != FORMAT \
                or data.get("session") != self.session or not isinstance(data.get("world"), dict):
            return None
        try:
            return WorldSnapshot.from_dict(data["world"])
        except (TypeError, ValueError):
            return None


def init_from_snapshot(snapshot: WorldSnapshot, kitchen: Kitchen) -> TaskInit:
    """The start state that recreates ``snapshot``: robot place, held object, every object's
    place, and the default scene's objects that are gone as absent. Raises TaskError for names
    this kitchen lacks."""
    placed = {o: at for o, at in snapshot.objects.items() if at != GRIPPER}
    present = set(snapshot.objects)
    absent = tuple(o for o in kitchen.default_scene() if o not in present)
    return TaskInit.from_mapping({"robot_at": snapshot.robot_at, "holding": snapshot.holding,
                                  "objects": placed, "absent": list(absent)}, kitchen)
