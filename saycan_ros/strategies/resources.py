"""What the non-scoring strategies need besides the language and affordance score sources."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

from saycan_ros.planning.retrieval import Embedder
from saycan_ros.planning.prompt import DialoguePrompt
from saycan_ros.core.skills import SkillSet


class TextGenerator(Protocol):
    """Free generation (``saycan_ros.llm.backend.LanguageBackend.generate`` fits)."""

    def generate(self, prefix: str, query: str, *, max_new_tokens: int = 24,
                 stop: Sequence[str] = ("\n",), num_samples: int = 1, temperature: float = 0.0,
                 seed: int | None = None) -> list: ...


def minilm_embedder() -> Embedder:
    """all-MiniLM-L6-v2 (offline wheel), memoised per text in memory: the translation and
    retrieval LM. Generated steps are one-off texts: they never touch the disk cache."""
    from functools import partial

    from saycan_ros.learning.text_encoder import embed_texts
    return partial(embed_texts, use_cache=False)


@dataclass
class StrategyResources:
    skills: SkillSet
    prompt: DialoguePrompt | None = None
    kitchen: Any = None                       # saycan_ros.core.kitchen.Kitchen
    generator: TextGenerator | None = None
    embed: Embedder | None = None
    #: () -> a pick policy with ``act(obs) -> action`` (``saycan_ros.learning.factory``).
    pick_policy: Callable[[], Any] | None = None
    seed: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)

    def require(self, strategy: str, *names: str) -> None:
        missing = [n for n in names if getattr(self, n) is None]
        if missing:
            raise ValueError(f"strategy {strategy!r} needs {', '.join(missing)} "
                             "(available in-process: saycan eval / saycan run)")
