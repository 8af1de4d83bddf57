"""The launch files' descriptions, built against stand-ins of ``launch`` / ``launch_ros``, for what
the real runs (test/launch, launch.LaunchService) cannot reach: the default discovery range (they
run with LOCALHOST in the environment, so a file that forgot it would pass), a fresh session per
launch, and rviz:=true (no rviz2 here)."""
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

    class LaunchConfiguration(Recorded):
        def perform(self, context):         # a context here: {argument: value}
            return context.get(self.args[0], "")
    modules["launch.substitutions"].LaunchConfiguration = LaunchConfiguration
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return modules


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem.replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _description(path: Path):
    return _module(path).generate_launch_description().args[0]


def _nodes(path: Path, given: dict) -> dict:
    """The Node actions of a launch file's OpaqueFunction, with the launch arguments ``given``."""
    opaque = [a for a in _description(path) if type(a).__name__ == "OpaqueFunction"]
    assert len(opaque) == 1
    function, args = opaque[0].kwargs["function"], opaque[0].kwargs.get("args", [])
    return {a.kwargs["name"]: a for a in function(given, *args)}


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
    assert kinds.index("SetEnvironmentVariable") < kinds.index("OpaqueFunction")


def test_the_skill_executor_is_respawned_with_its_launch_session(launch_stubs):
    nodes = _nodes(ROOT / "launch" / "saycan.launch.py", {})
    executor = nodes["skill_executor"]
    assert executor.kwargs["respawn"] is True
    session = [p for p in executor.kwargs["parameters"] if isinstance(p, dict) and "session" in p]
    assert session and len(session[0]["session"]) == 32           # a fresh uuid per launch
    other = _nodes(ROOT / "launch" / "saycan.launch.py", {})["skill_executor"]
    assert [p for p in other.kwargs["parameters"] if isinstance(p, dict) and "session" in p] \
        != session                                                  # another launch, another one


@pytest.mark.parametrize("name", GRAPHS)
def test_a_launch_argument_overrides_the_parameter_file_only_when_given(launch_stubs, name):
    """strategy, model, kitchen_file ... left empty keep what params_file says (a launch
    default must not silently replace a value the user's file sets)."""
    def overrides(nodes):
        return {n: {k for p in a.kwargs["parameters"] if isinstance(p, dict) for k in p
                    if k in ("strategy", "model", "ask_epsilon", "kitchen_file")}
                for n, a in nodes.items()}
    path = ROOT / "launch" / name
    assert not any(overrides(_nodes(path, {})).values())
    given = overrides(_nodes(path, {"strategy": "no_vf", "model": "gemma3-270m",
                                    "kitchen_file": "/k.yaml", "ask_epsilon": "0.1"}))
    assert given["planner"] >= {"strategy", "kitchen_file"}
    assert given["llm_scorer"] == {"model", "kitchen_file"}
    assert ("ask_epsilon" in given["planner"]) == (name == "saycan.launch.py")


@pytest.mark.parametrize("name", GRAPHS)
def test_the_planner_asks_with_the_calibration_of_the_scorer_s_model(launch_stubs, name):
    """model:= reaches the scorer only; the planner gets that model's shipped calibration (its
    own '' would mean the default model's), and nothing for a model that ships none."""
    def calibration(arguments):
        planner = _nodes(ROOT / "launch" / name, arguments)["planner"]
        return [p["ask_calibration_file"] for p in planner.kwargs["parameters"]
                if isinstance(p, dict) and "ask_calibration_file" in p]
    assert calibration({}) == [] and calibration({"model": "gemma3-270m"}) == []
    small = calibration({"model": "smollm2-135m"})
    assert len(small) == 1 and small[0].endswith("ask_calibration_smollm2.json")


@pytest.mark.parametrize("name", ["saycan.launch.py", "saycan_sim.launch.py"])
def test_rviz_is_included_with_the_shipped_config(launch_stubs, name):
    actions = _description(ROOT / "launch" / name)
    includes = [a for a in actions if type(a).__name__ == "IncludeLaunchDescription"]
    assert [Path(i.args[0].args[0]).name for i in includes] == ["saycan_frontends.launch.py"]
    frontends = _description(ROOT / "launch" / "saycan_frontends.launch.py")
    rviz = [a for a in frontends if type(a).__name__ == "Node" and a.kwargs["package"] == "rviz2"]
    assert len(rviz) == 1 and rviz[0].kwargs["executable"] == "rviz2"
    assert rviz[0].kwargs["condition"].args[0].args == ("rviz",)
    config = Path(rviz[0].kwargs["arguments"][1])
    assert rviz[0].kwargs["arguments"][0] == "-d" and config.is_file(), config
