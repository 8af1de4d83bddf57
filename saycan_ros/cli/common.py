"""What the ``saycan`` verbs share: the language-model and planner flags, and the one-line
check of them that runs before any model loads."""
from __future__ import annotations

import json


def add_model_arguments(parser) -> None:
    """--model, --backend, --adapter, --threads ... (every LLMConfig field), --strategy and
    --max-steps."""
    from saycan_ros.llm.config import LLMConfig
    LLMConfig.add_arguments(parser)
    parser.add_argument("--strategy", default="saycan", help="saycan | no_vf (comma list in eval)")
    parser.add_argument("--max-steps", type=int, default=20)


def bad_llm_options(args, command: str) -> str:
    """One line naming the first bad language-model flag (--adapter, --prior-weight,
    --retrieve, --backend openai without --base-url ...), or "" (checked before any model
    loads)."""
    from saycan_ros.llm.config import LLMConfig, LLMConfigError
    try:
        problems = LLMConfig.from_args(args).problems(check_adapter=True)
    except LLMConfigError as exc:
        problems = [(exc.field, exc.text)]
    if not problems:
        return ""
    name, text = problems[0]
    return f"saycan {command}: {LLMConfig.flag(name)} {text}"


def write_json(path: str, data) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
