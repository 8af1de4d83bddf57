"""``llm_scorer``: serves p(skill | instruction, history) on ``/saycan/llm/score`` (SkillScore).

The model loads once at start-up. ``backend`` picks ``transformers`` (a shipped shorthand, a
Hugging Face folder or a GGUF file) or ``openai`` (a completions server that returns prompt
log-probs, e.g. vLLM; the API key is read from the environment variable ``api_key_env``).
"""
from __future__ import annotations

import threading

from rclpy.node import Node

from saycan_ros.core.memory import trimmed
from saycan_ros.planning.language import ScoringError
from saycan_ros.llm.config import LLMConfig
from saycan_ros.ros.nodes.common import LLM_SERVICE, announce_alive, declare_parameters, spin_node
from saycan_ros.planning.scene import fit_scene
from saycan_ros.planning.vocabulary import load_vocabulary
from saycan_ros.stack import make_language_scorer
from saycan_ros.srv import SkillScore
from saycan_ros.core.tasks import TaskError, check_instruction

#: A scene line names every object of a kitchen once; far longer is not a scene.
MAX_SCENE_CHARS = 4000
#: Skills already executed that a request may carry (a plan is at most 100 steps).
MAX_HISTORY = 100

#: The language model's settings (backend, model, threads, adapter, prior_weight, retrieve,
#: base_url, ...: saycan_ros.llm.config.LLMConfig, the same as the saycan flags), then the node's.
DEFAULTS = {
    **LLMConfig().params(),
    "prompt_file": "",             # "" = config/prompt.yaml (the adapter's own with one)
    "kitchen_file": "",
    "skills_file": "",
    "max_candidates": 512,
}


class LlmScorerNode(Node):
    def __init__(self, scorer=None, **kwargs):
        super().__init__("llm_scorer", **kwargs)
        self.params = declare_parameters(self, DEFAULTS)
        vocabulary = load_vocabulary(self.params["kitchen_file"], self.params["skills_file"],
                                     self.params["prompt_file"])
        self.skills, self.kitchen = vocabulary.skills, vocabulary.kitchen
        self.get_logger().info(f"loading {self.params['backend']} model "
                               f"{self.params['model']!r}...")
        self.scorer = scorer or make_language_scorer(LLMConfig.from_params(self.params),
                                                     vocabulary.prompt, self.params["prompt_file"])
        self._model_lock = threading.Lock()  # one forward pass at a time
        # Encode the few-shot prefix now (its KV cache is reused by every request), so the
        # first planning step is as fast as the others.
        try:
            self.scorer.score("warm up", [], [vocabulary.skills.terminate.text])
        except (ScoringError, ValueError) as exc:  # reported again on every request
            self.get_logger().error(f"the language model fails to score: {exc}")
        self.create_service(SkillScore, LLM_SERVICE, trimmed(self.on_score))
        self.alive_pub = announce_alive(self, LLM_SERVICE)
        self.get_logger().info(f"language scorer ready on {LLM_SERVICE}")

    def on_score(self, request, response):
        response.success = False
        try:
            instruction = check_instruction(request.instruction)
        except TaskError as exc:
            response.message = str(exc)
            return response
        if not request.skills:
            response.message = "no candidate skills to score"
            return response
        if len(request.skills) > self.params["max_candidates"]:
            response.message = (f"{len(request.skills)} candidates; the limit is "
                                f"{self.params['max_candidates']}")
            return response
        if any(not s.strip() for s in request.skills):
            response.message = "a candidate skill is empty"
            return response
        if len(set(request.skills)) < len(request.skills):   # bounds a request by the repertoire
            response.message = "a candidate skill is repeated: each skill is scored once"
            return response
        if len(request.history) > MAX_HISTORY:
            response.message = f"{len(request.history)} history steps; the limit is {MAX_HISTORY}"
            return response
        # Only the robot's own skills: no free text reaches the prompt as a step or an option.
        unknown = [s for s in [*request.skills, *request.history] if s not in self.skills]
        if unknown:
            response.message = (f"unknown skill {unknown[0][:80]!r}: the scorer scores the "
                                f"robot's {len(self.skills.texts)} skills only")
            return response
        if len(request.scene) > MAX_SCENE_CHARS or any(
                ord(c) < 32 and c not in "\t\n" for c in request.scene):
            response.message = (f"scene: at most {MAX_SCENE_CHARS} characters of printable text "
                                f"(got {len(request.scene)})")
            return response
        # an adapter scores well only on the scene line it was trained on (where it shows one):
        # the planner sends the detailed line, shown plain to a prompt trained without details
        prompt = getattr(self.scorer, "prompt", None)
        scene = request.scene
        if getattr(prompt, "scene", False):
            try:
                details = bool(getattr(prompt, "scene_details", False))
                scene = fit_scene(self.kitchen, scene, details)
            except ValueError as exc:
                response.message = str(exc)
                return response
        try:
            with self._model_lock:
                probs, raw = self.scorer.score(instruction, list(request.history),
                                               list(request.skills), scene=scene)
        except (ScoringError, ValueError) as exc:
            response.message = f"scoring failed: {exc}"
            self.get_logger().error(response.message)
            return response
        response.scores = [float(p) for p in probs]
        response.raw = [float(r) for r in raw]
        response.success = True
        return response


def main(args=None) -> None:
    spin_node(LlmScorerNode, args)


if __name__ == "__main__":
    main()
