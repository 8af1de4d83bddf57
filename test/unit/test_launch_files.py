"""The launch files' descriptions, built against stand-ins of ``launch`` / ``launch_ros`` (not on
PyPI): what each starts, and that DDS stays on loopback unless an argument widens it."""
from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


class Recorded:
    """Any launch action or substitution: its class name and arguments."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    def __repr__(self):
        return f"{type(self).__name__}{self.args}"


def _stub(name: str, **classes) -> types.ModuleType:
    module = types.ModuleType(name)
    for cls_name in classes.get("names", ()):
        setattr(module, cls_name, type(cls_name, (Recorded,), {}))
    return module


@pytest.fixture()
def launch_stubs(monkeypatch, tmp_path):
    modules = {
        "launch": _stub("launch", names=["LaunchDescription"]),
        "launch.actions": _stub("launch.actions", names=[
            "DeclareLaunchArgument", "IncludeLaunchDescription", "SetEnvironmentVariable",
            "ExecuteProcess", "GroupAction", "OpaqueFunction"]),
        "launch.conditions": _stub("launch.conditions", names=["IfCondition", "UnlessCondition"]),
        "launch.launch_description_sources": _stub("launch.launch_description_sources",
                                                   names=["PythonLaunchDescriptionSource"]),
        "launch.substitutions": _stub("launch.substitutions", names=[
            "LaunchConfiguration", "PythonExpression", "PathJoinSubstitution",
            "EnvironmentVariable"]),
        "launch_ros": _stub("launch_ros"),
        "launch_ros.actions": _stub("launch_ros.actions", names=["Node", "PushRosNamespace"]),
        "ament_index_python": _stub("ament_index_python"),
        "ament_index_python.packages": _stub("ament_index_python.packages"),
    }
    modules["ament_index_python.packages"].get_package_share_directory = lambda _pkg: str(ROOT)
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return modules


def _description(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.generate_launch_description().args[0]


GRAPHS = ["saycan.launch.py", "saycan_sim.launch.py"]


@pytest.mark.parametrize("name", GRAPHS)
def test_the_graph_launch_files_keep_dds_on_loopback_by_default(launch_stubs, name):
    actions = _description(ROOT / "launch" / name)
    kinds = [type(a).__name__ for a in actions]
    declared = {a.args[0]: a.kwargs.get("default_value") for a in actions
                if type(a).__name__ == "DeclareLaunchArgument"}
    assert declared["discovery_range"] == "LOCALHOST"
    setenv = [a for a in actions if type(a).__name__ == "SetEnvironmentVariable"]
    assert [s.args[0] for s in setenv] == ["ROS_AUTOMATIC_DISCOVERY_RANGE"]
    value = setenv[0].args[1]
    assert type(value).__name__ == "LaunchConfiguration" and value.args == ("discovery_range",)
    # set before any node starts (launch applies actions in order)
    assert kinds.index("SetEnvironmentVariable") < kinds.index("Node")


def test_the_skill_executor_is_respawned_with_its_launch_session(launch_stubs):
    actions = _description(ROOT / "launch" / "saycan.launch.py")
    nodes = {a.kwargs["name"]: a for a in actions if type(a).__name__ == "Node"}
    executor = nodes["skill_executor"]
    assert executor.kwargs["respawn"] is True
    session = [p for p in executor.kwargs["parameters"] if isinstance(p, dict) and "session" in p]
    assert session and len(session[0]["session"]) == 32           # a fresh uuid per launch
    again = _description(ROOT / "launch" / "saycan.launch.py")
    other = [a for a in again if type(a).__name__ == "Node" and a.kwargs["name"] ==
             "skill_executor"][0]
    assert [p for p in other.kwargs["parameters"] if isinstance(p, dict) and "session" in p] \
        != session                                                  # another launch, another one
