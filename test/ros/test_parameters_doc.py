"""Every parameter a node declares is in its parameter file (and the file names none that the
node does not declare: ROS would ignore such a typo), and docs/parameters.md is current."""
from pathlib import Path

import pytest

from saycan_ros.ros.parameters_doc import NODES, declared, file_section, render

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("node", sorted(NODES))
def test_the_parameter_file_holds_exactly_what_the_node_declares(node):
    defaults, _ = declared(node)
    in_file, _ = file_section(node)
    in_file.pop("use_sim_time", None)            # every node has it (rclpy)
    assert sorted(set(defaults) - set(in_file)) == [], f"declared by {node}, not in its file"
    assert sorted(set(in_file) - set(defaults)) == [], f"in {node}'s file, not declared"


@pytest.mark.parametrize("node", sorted(NODES))
def test_every_parameter_says_what_it_does(node):
    table = render().split(f"## {node}\n", 1)[1].split("\n## ", 1)[0]
    empty = [line for line in table.splitlines() if line.startswith("| `")
             and line.rstrip().endswith("|  |")]
    assert not empty, empty


def test_the_parameter_page_is_current():
    page = (ROOT / "docs" / "parameters.md").read_text(encoding="utf-8")
    assert page == render(), \
        "docs/parameters.md is stale: python -m saycan_ros.ros.parameters_doc docs/parameters.md"
