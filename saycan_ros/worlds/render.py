"""Pictures and videos of the simulated kitchen for people (``saycan sim --render FILE``): a
``.png`` of a start state, or an ``.mp4`` of a scripted errand run by the skill controllers."""
from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from saycan_ros.core.kitchen import USER, load_kitchen
from saycan_ros.core.skills import load_skills
from saycan_ros.sim.render import TopDownRenderer, write_png
from saycan_ros.sim.world import KitchenWorld
from saycan_ros.worlds.simulated import SimulatedKitchen


def demo_skills(sim) -> list[str]:
    """A short scripted errand from the current scene: fetch an object for the user."""
    scene = sim.objects
    here = sim.robot_at
    candidates = [n for n, loc in scene.items() if loc == here] or \
                 [n for n, loc in scene.items() if loc in sim.kitchen.locations and loc != USER]
    if not candidates:
        return []
    name = candidates[0]
    return [f"find {sim.kitchen.object(name).phrase}", f"pick up the {name}", "bring it to you",
            f"put down the {name}"]


def render_kitchen(path: str | Path, seed: int = 0, init=None, kitchen_file: str = "") -> str:
    """Render the kitchen to ``path``: a ``.png`` picture of the start state, or an ``.mp4`` of a
    scripted errand (find an object, pick it up, bring it to the user, put it down).
    ``init`` is a task init (mapping or TaskInit); ``kitchen_file`` another kitchen than the
    built-in one. Returns a one-line summary."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".png", ".mp4"):
        raise ValueError(f"render to a .png or .mp4 file, not {path.name!r}")
    kitchen = load_kitchen(kitchen_file or None)
    if suffix == ".png":
        world = KitchenWorld(kitchen, seed=seed)
        world.reset(init, seed=seed)
        write_png(path, TopDownRenderer(world).render())
        return f"wrote {path} (seed {seed})"

    frames: list[np.ndarray] = []
    caption = {"text": ""}
    sim = SimulatedKitchen(kitchen, init=init, seed=seed)
    renderer = TopDownRenderer(sim.world)
    fps, every = 10, 5                        # a frame every 5 steps of 20 ms: real time

    def record(world: KitchenWorld) -> None:
        if int(round(world.time / world.dt)) % every == 0:
            frames.append(renderer.render(caption["text"]))
    sim.on_step = record
    record(sim.world)
    outcomes = []
    skills = load_skills(kitchen)
    for text in demo_skills(sim):
        caption["text"] = f"skill: {text}"
        outcome = sim.execute(skills.get(text))
        outcomes.append(f"{text}: {'ok' if outcome.success else 'FAILED (' + outcome.message + ')'}")
        if not outcome.success:
            break
    frames.extend([renderer.render(caption["text"])] * fps)   # hold the last frame a second
    height, width = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (width, height))
    if not writer.isOpened():
        raise OSError(f"OpenCV cannot write {path} (no mp4v encoder?)")
    for frame in frames:
        writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    writer.release()
    return f"wrote {path}: {len(frames)} frames; " + "; ".join(outcomes)
