"""The nodes' parameters as declared in their code, and docs/parameters.md made from them: each
node, its parameter file, and per parameter its default and what it does (the node's
description, else the comment beside it in the parameter file). A test checks that every
declared parameter is in its node's parameter file and that the page is current.

    python -m saycan_ros.ros.parameters_doc docs/parameters.md
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from saycan_ros.core.config import config_dir

#: node -> (its module under saycan_ros.ros.nodes, its parameter file in config/)
NODES = {
    "llm_scorer": ("llm_scorer_node", "saycan.yaml"),
    "affordance": ("affordance_node", "saycan.yaml"),
    "skill_executor": ("skill_executor_node", "saycan.yaml"),
    "planner": ("planner_node", "saycan.yaml"),
    "speech_to_text": ("speech_to_text_node", "saycan.yaml"),
    "navigate_skill": ("navigate_skill_node", "skill_executors.yaml"),
    "pick_skill": ("pick_skill_node", "skill_executors.yaml"),
    "place_skill": ("place_skill_node", "skill_executors.yaml"),
    "kitchen_sim": ("kitchen_sim_node", "kitchen_sim.yaml"),
    "ee_view": ("ee_view_node", "ee_view.yaml"),
}


#: What a parameter several nodes share does, where neither the node nor the file says.
COMMON = {
    "kitchen_file": "your kitchen description (docs/your_robot.md); '' = config/kitchen.yaml",
    "skills_file": "the skills' texts; '' = config/skills.yaml",
    "registry_file": "which executor runs which skill; '' = config/skill_registry.yaml",
    "prompt_file": "the language model's prompt; '' = config/prompt.yaml (an adapter's own "
                   "where it has one)",
    "max_candidates": "the most skills one request may hold",
    "default_timeout_s": "s: a request's time limit when its timeout_s is 0",
    "control_rate_hz": "Hz: the skill's control loop",
    "stop_grace_s": "s: how long a cancelled skill may take to wind down",
    "world_state_topic": "where the world state's revision is reported ('' = not reported)",
    "settle_s": "s: wait after a skill for the world state to catch up",
    "state_timeout_s": "s: the longest wait for the world state service",
    "sensor_timeout_s": "s: a sensor message older than this counts as none",
    "joint_names": "the arm's joints in joint_states (lift, yaw, extend, gripper)",
    "trajectory_time_s": "s: time_from_start of the arm_controller/joint_trajectory points",
    "tuck_timeout_s": "s: the longest wait for the arm to fold home",
    "frame_id": "the tf frame of the poses it publishes",
    "fault_seed": "the seed of the injected faults",
}


def declared(node: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The parameters ``node`` declares, with their defaults, and its descriptions of them."""
    module = importlib.import_module(f"saycan_ros.ros.nodes.{NODES[node][0]}")
    defaults = dict(getattr(module, "DEFAULTS", None) or module.PARAMETERS)
    if node.endswith("_skill"):          # SkillServerNode adds the common ones
        from saycan_ros.ros.nodes.skill_server import BASE_DEFAULTS
        defaults = {**BASE_DEFAULTS, **defaults}
    descriptions = dict(getattr(module, "DESCRIPTIONS", {}))
    if node == "llm_scorer":             # the language model's settings describe themselves
        from saycan_ros.llm.config import LLMConfig
        descriptions.update({f.name: f.metadata["help"] for f in dataclasses.fields(LLMConfig)})
    return defaults, descriptions


def file_section(node: str) -> tuple[dict[str, Any], dict[str, str]]:
    """``node``'s ros__parameters in its parameter file and the comment of each line."""
    path = config_dir() / NODES[node][1]
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    section = data.get(f"/**/{node}", data.get(node)) or {}
    comments, inside = {}, False
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith(" "):
            inside = line.split(":")[0] in (node, f"/**/{node}")
            continue
        match = re.match(r"^\s{4}(\w+):[^#]*#\s*(.+)$", line)
        if inside and match:
            comments[match.group(1)] = match.group(2).strip()
    return dict(section.get("ros__parameters") or {}), comments


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    out = ["# Node parameters", "",
           "Every parameter each node declares, with its default in the code and what it does.",
           "All are read once at start (declared read-only: `ros2 param set` is refused).",
           "Generated from the code by `python -m saycan_ros.ros.parameters_doc "
           "docs/parameters.md`; a test checks it is current.", ""]
    for node, (_module, config) in NODES.items():
        defaults, descriptions = declared(node)
        _values, comments = file_section(node)
        out += [f"## {node}", "", f"Parameter file: `config/{config}`.", "",
                "| parameter | default | what it does |", "|---|---|---|"]
        for name, default in defaults.items():
            what = descriptions.get(name) or comments.get(name) or COMMON.get(name, "")
            if name.endswith("_frame") and not what:
                what = "tf frame id"
            out.append(f"| `{name}` | `{_cell(json.dumps(default))}` | {_cell(what)} |")
        out.append("")
    return "\n".join(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if argv:
        Path(argv[0]).write_text(text, encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
