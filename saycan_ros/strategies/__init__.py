"""Planning strategies beyond SayCan's scoring loop (``saycan_ros.planning.planner`` holds ``saycan`` and
``no_vf``): the paper's baselines and the two related planners.

- ``generative`` (Huang et al. 2022): generate the next step, translate it to the nearest
  admissible skill (:mod:`.translation`).
- ``llm_planner`` (Song et al. 2022): retrieved few-shot examples (:mod:`.retrieval`), a whole
  plan per call, re-planning on failure.
- ``saycan_cot``: SayCan with a generated chain-of-thought "Explanation:" kept in the context.
- ``bc_use`` / ``bc_nl``: the paper's end-to-end baselines (:mod:`.baselines`).

They need more than two score sources (a text generator, a sentence embedder, the pick policy):
:class:`~saycan_ros.strategies.resources.StrategyResources` carries those, and a strategy that
lacks one fails at construction with a message naming it.
"""
