"""What the ``saycan`` verbs share: the language-model and planner flags, and the one-line
check of them that runs before any model loads."""
from __future__ import annotations

import gzip
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
    """``data`` as JSON at ``path``, gzip-compressed where the name ends in ``.gz``."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)


def add_kitchen_argument(parser) -> None:
    """--kitchen FILE: the user's kitchen description instead of the built-in one."""
    parser.add_argument("--kitchen", default="", metavar="FILE",
                        help="your kitchen description (YAML: objects and places, see "
                             "docs/your_robot.md); default: the built-in config/kitchen.yaml")


def kitchen_option(args, command: str) -> tuple[str, str]:
    """(the --kitchen file as an absolute path or "", one error line or ""): the file is read
    and checked here, before any model loads or node starts."""
    from pathlib import Path

    from saycan_ros.core.config import ConfigError
    from saycan_ros.core.kitchen import KitchenError
    from saycan_ros.planning.vocabulary import load_vocabulary
    name = getattr(args, "kitchen", "") or ""
    if not name:
        return "", ""
    path = Path(name).expanduser()
    if not path.is_file():
        return "", f"saycan {command}: --kitchen {name}: no such file"
    path = str(path.resolve())
    try:
        load_vocabulary(path)
    except (ConfigError, KitchenError) as exc:
        return "", f"saycan {command}: --kitchen: {exc}"
    return path, ""
