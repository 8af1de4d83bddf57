"""The paper's end-to-end baselines (SayCan, Table 2), which bypass the language model.

- ``bc_use``: the instruction is projected, by sentence-embedding cosine similarity, to the
  nearest single skill or two-skill sequence ("find a coke can, pick up the coke can"),
  which is then executed step by step (paper: 60% on single primitives, 0% elsewhere).
- ``bc_nl``: the whole instruction is given to the language-conditioned pick policy, run in the
  simulator's pick scene of the robot's current surface; whatever the policy ends up holding is
  what was done ("pick up the <object>"), and the plan ends (paper: 0%).
"""
from __future__ import annotations

import numpy as np

from saycan_ros.planning.planner import Decision, StepContext, Strategy
from saycan_ros.strategies.resources import StrategyResources
from saycan_ros.strategies.translation import cosine_ranking


def _onehot(skills, selected) -> np.ndarray:
    return np.array([1.0 if s == selected else 0.0 for s in skills])


def skill_sequences(skills, terminate: str) -> list[tuple[str, ...]]:
    """Every skill alone and every ordered pair of two different non-terminal skills."""
    texts = [s for s in skills if s != terminate]
    return [(s,) for s in texts] + [(a, b) for a in texts for b in texts if a != b]


def sequence_text(seq) -> str:
    """How a command sequence is embedded: the skill texts joined by commas, unnumbered (a
    single skill is then its own text, so direct commands find their skill)."""
    return ", ".join(seq)


class BCUseStrategy(Strategy):
    name = "bc_use"

    def __init__(self, language, affordance, resources: StrategyResources):
        super().__init__(language, affordance)
        resources.require(self.name, "embed")
        self.resources = resources
        self.terminate = resources.skills.terminate.text
        self.sequences = skill_sequences(resources.skills.texts, self.terminate)
        self.texts = [sequence_text(s) for s in self.sequences]
        resources.embed(self.texts)          # embed the ~2,500 sequences once (memoised)
        self.queue: list[str] = []
        self.choice = ""

    def reset(self, instruction: str) -> None:
        self.queue, self.choice = [], ""
        if instruction:
            similarity = cosine_ranking(instruction, self.texts, self.resources.embed)
            best = int(np.argmax(similarity))
            self.queue = [*self.sequences[best], self.terminate]
            self.choice = f"{self.texts[best]} (cos {similarity[best]:.2f})"

    def stats(self) -> dict:
        return {"projection": self.choice}

    def decide(self, ctx: StepContext) -> Decision:
        if not self.queue and not self.choice:
            self.reset(ctx.instruction)
        selected = self.queue.pop(0) if self.queue else self.terminate
        nan = np.full(len(ctx.skills), np.nan)
        return Decision(_onehot(ctx.skills, selected), nan, _onehot(ctx.skills, selected),
                        selected, f"projected: {self.choice}")


class BCNLStrategy(Strategy):
    name = "bc_nl"

    def __init__(self, language, affordance, resources: StrategyResources, max_actions: int = 50):
        super().__init__(language, affordance)
        resources.require(self.name, "pick_policy")
        self.resources = resources
        self.policy = resources.pick_policy()
        self.max_actions = int(max_actions)
        self.terminate = resources.skills.terminate.text
        self.acted = False
        self.outcome = ""

    def reset(self, instruction: str) -> None:
        self.acted, self.outcome = False, ""

    def stats(self) -> dict:
        return {"policy_outcome": self.outcome}

    def decide(self, ctx: StepContext) -> Decision:
        nan = np.full(len(ctx.skills), np.nan)
        selected = self.terminate
        if not self.acted:
            self.acted = True
            held = self._run_policy(ctx)
            candidate = f"pick up the {held}" if held else None
            if candidate and candidate in ctx.skills:
                selected = candidate
            else:
                # the pick skill text uses the object's article ("pick up the X" for all)
                matches = [s for s in ctx.skills if held and s.startswith("pick up") and
                           s.endswith(f" {held}")]
                selected = matches[0] if matches else self.terminate
        return Decision(_onehot(ctx.skills, selected), nan, _onehot(ctx.skills, selected),
                        selected, f"policy on the instruction: {self.outcome}")

    def _run_policy(self, ctx: StepContext) -> str | None:
        """Roll the pick policy out on the instruction text in the current surface's scene."""
        from saycan_ros.sim.envs import PICK_LOCATIONS, KitchenSkillEnv
        from saycan_ros.sim.expert import lifted
        observation = ctx.observation or {}
        location = observation.get("location")
        objects = list(observation.get("objects", ()))
        if location not in PICK_LOCATIONS or not objects:
            self.outcome = f"nothing to pick at {location or 'an unknown place'}"
            return None
        from saycan_ros.learning.data import ee_view_of
        ee_view, ee_zoom, ee_camera = ee_view_of(self.policy)   # the views the policy takes
        env = KitchenSkillEnv("pick", distractors=(0, 0), ee_view=ee_view, ee_view_zoom=ee_zoom,
                              ee_camera=ee_camera)
        seed = self.resources.seed + len(ctx.instruction)
        env.reset(seed=seed, options={"object": objects[0], "location": location,
                                      "infeasible": False})
        obs = env.set_scene(location, {o: location for o in objects}, skill=ctx.instruction,
                            holding=observation.get("holding"), seed=seed)
        for _ in range(self.max_actions):
            obs, _, terminated, truncated, _ = env.step(self.policy.act(obs))
            obs["skill"] = ctx.instruction
            if terminated or truncated:
                break
        held = [o for o in objects if lifted(env.world, o)]
        self.outcome = f"holding the {held[0]}" if held else "holding nothing"
        return held[0] if held else None
