"""Language-model back ends for the SayCan planner (ROS-free).

``make_backend({"type": "transformers", "model": "gemma3-270m"})`` or
``make_backend({"type": "openai", "base_url": ..., "model": ...})``. The concrete back ends
(and torch) are imported only when built.
"""

from saycan_ros.llm.backend import (
    BACKENDS,
    BackendStats,
    Generation,
    LanguageBackend,
    make_backend,
    register_backend,
)

__all__ = [
    "BACKENDS",
    "BackendStats",
    "Generation",
    "LanguageBackend",
    "make_backend",
    "register_backend",
]
