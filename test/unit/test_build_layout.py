"""Static checks of the package layout: package.xml, CMakeLists.txt, pyproject.toml, launch/.

No ROS and no build needed: these read the files in the source tree.
"""

import ast
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = "saycan_ros"
CMAKE = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
MSG_FILES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "msg").glob("*.msg"))
SRV_FILES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "srv").glob("*.srv"))
ACTION_FILES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "action").glob("*.action"))

EXECUTABLES = {
    "llm_scorer": "saycan_ros.ros.nodes.llm_scorer_node",
    "affordance": "saycan_ros.ros.nodes.affordance_node",
    "skill_executor": "saycan_ros.ros.nodes.skill_executor_node",
    "planner": "saycan_ros.ros.nodes.planner_node",
    "kitchen_sim": "saycan_ros.ros.nodes.kitchen_sim_node",
    "navigate_skill": "saycan_ros.ros.nodes.navigate_skill_node",
    "place_skill": "saycan_ros.ros.nodes.place_skill_node",
    "pick_skill": "saycan_ros.ros.nodes.pick_skill_node",
    "ee_view": "saycan_ros.ros.nodes.ee_view_node",
    "speech_to_text": "saycan_ros.ros.nodes.speech_to_text_node",
}


def _cmake_code():
    """CMakeLists.txt without comments."""
    return "\n".join(line.split("#", 1)[0] for line in CMAKE.splitlines())


def cmake_nodes():
    """name -> module from the SAYCAN_NODES list in CMakeLists.txt."""
    block = re.search(r"set\(SAYCAN_NODES(.*?)\)", _cmake_code(), re.S)
    assert block, "CMakeLists.txt has no set(SAYCAN_NODES ...)"
    return dict(re.findall(r'"(\w+)=([\w.]+)"', block.group(1)))


@pytest.fixture(scope="module")
def package():
    catkin_pkg = pytest.importorskip("catkin_pkg.package", reason="catkin-pkg not installed")
    pkg = catkin_pkg.parse_package(str(ROOT / "package.xml"))
    pkg.validate()
    return pkg


def _names(deps):
    return {d.name for d in deps}


def test_package_xml(package):
    assert package.name == PKG
    assert package.package_format == 3
    assert package.get_build_type() == "ament_cmake"
    assert {g.name for g in package.member_of_groups} == {"rosidl_interface_packages"}
    assert {"ament_cmake", "ament_cmake_python", "rosidl_default_generators"} <= _names(
        package.buildtool_depends)
    build = _names(package.build_depends)
    run = _names(package.exec_depends)
    assert {"std_msgs", "geometry_msgs"} <= build & run
    assert {
        "rosidl_default_runtime", "rclpy", "std_msgs", "std_srvs", "geometry_msgs", "nav_msgs",
        "sensor_msgs", "visualization_msgs", "trajectory_msgs", "launch", "launch_ros",
        "python3-numpy", "python3-yaml",
    } <= run
    assert {"python3-pytest"} <= _names(package.test_depends)


#: ROS packages needed at run time without being imported by name.
RUNTIME_ONLY = {"rosidl_default_runtime", "action_msgs",   # generated code; rclpy.action
                "rviz2"}                                    # the launch files' rviz:=true
OPTIONAL = {"nav2_msgs"}        # navigate_skill backend:=nav2 only, imported in a try


def _ros_imports() -> set[str]:
    """The ROS packages the code and the launch files import (first dotted name)."""
    ros = set()
    for path in list((ROOT / PKG).rglob("*.py")) + list((ROOT / "launch").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                     and node.level == 0 else
                     [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for name in names:
                top = name.split(".")[0]
                if top.endswith(("_msgs", "_srvs", "_interfaces")) or top in (
                        "rclpy", "launch", "launch_ros", "ament_index_python"):
                    ros.add(top)
    return ros


def test_package_xml_declares_exactly_what_the_code_imports(package):
    """Every ROS package imported is an exec_depend (or build+exec depend), and every ROS
    exec_depend is imported (or needed at run time by name only)."""
    declared = {n for n in _names(package.exec_depends) | _names(package.build_depends)
                if not n.startswith("python3-")}
    imported = _ros_imports()
    assert imported - OPTIONAL <= declared, sorted(imported - OPTIONAL - declared)
    unused = declared - imported - RUNTIME_ONLY
    assert not unused, sorted(unused)


def test_version_single_source(package):
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'input = "package.xml"' in pyproject, "pip version must come from package.xml"
    assert re.fullmatch(r"\d+\.\d+\.\d+", package.version)


def test_cmake_generates_every_interface():
    code = _cmake_code()
    assert MSG_FILES and SRV_FILES and ACTION_FILES
    for path in MSG_FILES + SRV_FILES + ACTION_FILES:
        assert re.search(r"(^|\s)%s(\s|$)" % re.escape(path), code), (
            "%s is not listed in CMakeLists.txt" % path)
    assert "rosidl_generate_interfaces(${PROJECT_NAME}" in code
    for listed in re.findall(r"\b(?:msg|srv|action)/\w+\.(?:msg|srv|action)\b", code):
        assert (ROOT / listed).is_file(), "CMakeLists.txt lists missing %s" % listed


def test_interface_dependencies_declared(package):
    """Every pkg/Type used in msg/ srv/ action/ is a DEPENDENCY of the generation and a
    package.xml depend; an action needs action_msgs declared (rosidl adds it to the generation)."""
    used = set()
    for path in MSG_FILES + SRV_FILES + ACTION_FILES:
        for line in (ROOT / path).read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if not line or line == "---":
                continue
            match = re.match(r"([A-Za-z_]\w*)/\w+", line.split()[0])
            if match and match.group(1) != PKG:
                used.add(match.group(1))
    block = re.search(r"rosidl_generate_interfaces\((.*?)\)", _cmake_code(), re.S).group(1)
    deps = set(block.split("DEPENDENCIES", 1)[1].split()) if "DEPENDENCIES" in block else set()
    assert used <= deps, "missing from rosidl_generate_interfaces DEPENDENCIES: %s" % (used - deps)
    assert used <= _names(package.build_depends) & _names(package.exec_depends)
    for dep in used:
        assert "find_package(%s REQUIRED)" % dep in _cmake_code()
    if ACTION_FILES:
        assert "action_msgs" in _names(package.build_depends) & _names(package.exec_depends)


# ros2/geometry2 tf2_msgs/msg/TFMessage.msg, and the RIHS01 hash real tf2 nodes announce for it.
TF_MESSAGE_UPSTREAM = "geometry_msgs/TransformStamped[] transforms\n"
TF_MESSAGE_HASH = "RIHS01_e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087"
VENDOR = ROOT / "vendor"
# package -> (its interface files, the packages they use): upstream's files only
VENDORED = {"tf2_msgs": (["msg/TFMessage.msg"], "geometry_msgs"),
            "composition_interfaces": (["srv/ListNodes.srv", "srv/LoadNode.srv",
                                        "srv/UnloadNode.srv"], "rcl_interfaces")}


@pytest.mark.parametrize("name", sorted(VENDORED))
def test_vendored_interfaces_are_upstream_files_built_only_where_missing(package, name):
    """vendor/<name>: upstream's interface files, built only when find_package(<name>) fails."""
    files, dependency = VENDORED[name]
    root = VENDOR / name
    interfaces = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                        if p.suffix in (".msg", ".srv", ".action"))
    assert interfaces == files
    catkin_pkg = pytest.importorskip("catkin_pkg.package")
    vendored = catkin_pkg.parse_package(str(root / "package.xml"))
    vendored.validate()
    assert vendored.name == name
    assert {g.name for g in vendored.member_of_groups} == {"rosidl_interface_packages"}
    assert dependency in _names(vendored.build_depends) & _names(vendored.exec_depends)
    vendor_cmake = "\n".join(line.split("#", 1)[0] for line in
                             (root / "CMakeLists.txt").read_text(encoding="utf-8").splitlines())
    assert f"project({name})" in vendor_cmake
    quoted = r"\s+".join(f'"?{re.escape(f)}"?' for f in files)
    assert re.search(r"rosidl_generate_interfaces\(\$\{PROJECT_NAME\}\s+" + quoted +
                     rf"\s+DEPENDENCIES {dependency}\s*\)", vendor_cmake)
    # the marker of an installed vendored copy, written by the shared end macro
    assert "saycan_vendored_end()" in vendor_cmake
    assert "vendored_by_saycan_ros" in (VENDOR / "vendored_interfaces.cmake").read_text()
    # The parent build: only when find_package fails (or finds the copy it installed itself).
    code = _cmake_code()
    assert f"saycan_vendor_interfaces({name})" in code
    assert "find_package(${_pkg} QUIET)" in code
    assert '"${CMAKE_CURRENT_SOURCE_DIR}/vendor/${_pkg}"' in code
    assert "${${_pkg}_DIR}/../vendored_by_saycan_ros" in code


def test_vendored_tf2_message_is_upstreams():
    assert (VENDOR / "tf2_msgs" / "msg" / "TFMessage.msg").read_text(encoding="utf-8") \
        == TF_MESSAGE_UPSTREAM
    # A ROS 2 workspace builds against, and runs with, the real tf2_msgs.
    from catkin_pkg.package import parse_package
    package = parse_package(str(ROOT / "package.xml"))
    assert "tf2_msgs" in _names(package.build_depends) & _names(package.exec_depends)


def test_installed_composition_interfaces_are_upstreams_types():
    """launch_ros imports these three at load time; their fields are upstream's."""
    try:
        from composition_interfaces.srv import ListNodes, LoadNode, UnloadNode
    except ImportError:
        pytest.skip("composition_interfaces not installed (package not built)")
    assert LoadNode.Request.get_fields_and_field_types() == {
        "package_name": "string", "plugin_name": "string", "node_name": "string",
        "node_namespace": "string", "log_level": "uint8", "remap_rules": "sequence<string>",
        "parameters": "sequence<rcl_interfaces/Parameter>",
        "extra_arguments": "sequence<rcl_interfaces/Parameter>"}
    assert LoadNode.Response.get_fields_and_field_types() == {
        "success": "boolean", "error_messsage": "string", "full_node_name": "string",
        "unique_id": "uint64"}
    assert UnloadNode.Request.get_fields_and_field_types() == {"unique_id": "uint64"}
    assert ListNodes.Response.get_fields_and_field_types() == {
        "full_node_names": "sequence<string>", "unique_ids": "sequence<uint64>"}


def test_installed_tf2_msgs_matches_upstream():
    """Whichever tf2_msgs is installed (vendored or ROS), TFMessage is upstream's type."""
    try:
        from tf2_msgs.msg import TFMessage
    except ImportError:
        pytest.skip("tf2_msgs not installed (package not built)")
    assert TFMessage.get_fields_and_field_types() == {
        "transforms": "sequence<geometry_msgs/TransformStamped>"}
    import tf2_msgs
    # <prefix>/lib/python3.X/site-packages/tf2_msgs/__init__.py -> <prefix>/share/tf2_msgs
    share = Path(tf2_msgs.__file__).resolve().parents[4] / "share" / "tf2_msgs"
    if not (share / "msg" / "TFMessage.json").is_file():
        pytest.skip("no share/tf2_msgs/msg/TFMessage.json next to %s" % tf2_msgs.__file__)
    description = json.loads((share / "msg" / "TFMessage.json").read_text(encoding="utf-8"))
    hashes = {h["type_name"]: h["hash_string"] for h in description["type_hashes"]}
    assert hashes["tf2_msgs/msg/TFMessage"] == TF_MESSAGE_HASH


def test_cmake_installs_executables_data_and_python():
    assert cmake_nodes() == EXECUTABLES
    code = _cmake_code()
    assert "DESTINATION lib/${PROJECT_NAME}" in code
    assert "foreach(_dir config launch models)" in code and "share/${PROJECT_NAME}" in code
    assert "ament_package()" in code


@pytest.mark.parametrize("name", sorted(EXECUTABLES))
def test_node_modules_have_main(name):
    module = EXECUTABLES[name]
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    assert path.is_file(), "%s (executable %s) does not exist" % (path.relative_to(ROOT), name)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assert any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body), (
        "%s has no top-level main()" % path.relative_to(ROOT))


def test_pyproject_scripts_match_cmake():
    tomllib = pytest.importorskip("tomllib", reason="Python < 3.11")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    scripts = data["project"]["scripts"]
    expected = {name: module + ":main" for name, module in EXECUTABLES.items()}
    expected["saycan"] = "saycan_ros.cli.main:main"
    assert scripts == expected
    assert data["project"]["name"].replace("-", "_") != PKG, (
        "the distribution must not be named like the interface package (rosidl egg-info)")


def test_build_requirements_in_sync():
    """--no-build-isolation installs need requirements/build.txt to hold the build requires."""
    tomllib = pytest.importorskip("tomllib", reason="Python < 3.11")
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "build-system"]["requires"]

    def name(req):
        return re.split(r"[<>=!~;\[ ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")

    lines = (ROOT / "requirements" / "build.txt").read_text(encoding="utf-8").splitlines()
    build_txt = {name(line) for line in lines if line.strip() and not line.startswith("#")}
    missing = {name(r) for r in requires} - build_txt
    assert not missing, "in pyproject build-system.requires but not requirements/build.txt: %s" % missing


def test_setup_py_is_a_shim():
    source = (ROOT / "setup.py").read_text(encoding="utf-8")
    ast.parse(source)
    assert "setuptools" not in re.sub(r'""".*?"""', "", source, flags=re.S)


def _launch_files():
    return sorted((ROOT / "launch").glob("*.py")) if (ROOT / "launch").is_dir() else []


def _launch_executables(tree):
    """(package, executable) of every Node(...) / *.Node(...) call with literal arguments."""
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if fname not in ("Node", "LifecycleNode", "ComposableNode"):
            continue
        kwargs = {k.arg: k.value for k in call.keywords if k.arg}
        exe = kwargs.get("executable") or kwargs.get("node_executable")
        pkg = kwargs.get("package")
        if isinstance(exe, ast.Constant) and isinstance(exe.value, str):
            pkg_name = pkg.value if isinstance(pkg, ast.Constant) else None
            found.append((pkg_name, exe.value))
    return found


def test_launch_files_reference_installed_executables():
    files = _launch_files()
    if not files:
        pytest.skip("no launch/*.py file yet")
    installed = set(cmake_nodes())
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        assert any(isinstance(n, ast.FunctionDef) and n.name == "generate_launch_description"
                   for n in tree.body), "%s has no generate_launch_description()" % path.name
        for pkg, exe in _launch_executables(tree):
            if pkg in (PKG, None):
                assert exe in installed, "%s starts %r, which CMakeLists.txt does not install" % (
                    path.name, exe)


#: The layers of saycan_ros, lowest first (docs/architecture.md): a module may import only its
#: own layer and the ones below it. ``stack`` is the one top-level module: the composition root.
LAYERS = ("core", "robot", "llm", "speech", "planning", "sim", "learning", "skills", "strategies",
          "worlds", "stack", "evaluation", "ros", "cli")
GENERATED = ("msg", "srv", "action")   # the rosidl interfaces, installed beside the package


def _module_name(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return name[:-len(".__init__")] if name.endswith(".__init__") else name


def _saycan_imports(path: Path, top_level_only: bool = False) -> set[str]:
    """The saycan_ros modules a file imports (anywhere in it, or only at module level)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == PKG:            # from saycan_ros import graph
                found.update(f"{PKG}.{a.name}" for a in node.names)
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m.startswith(PKG + ".")}


def _layer(module: str) -> str:
    return module.split(".")[1]


def _modules():
    return {_module_name(p): p for p in sorted((ROOT / PKG).rglob("*.py"))}


def test_every_module_is_in_a_layer():
    """No module outside the layers: a new folder is added to LAYERS (and the doc) on purpose."""
    stray = [m for m in _modules() if m != PKG and _layer(m) not in LAYERS]
    assert not stray, stray


def test_no_module_imports_a_higher_layer():
    """Imports point down (function-level ones too, since they run as well): like an
    import-linter layers contract."""
    upward = []
    for module, path in _modules().items():
        if module == PKG:
            continue
        mine = LAYERS.index(_layer(module))
        for imported in _saycan_imports(path):
            if _layer(imported) in GENERATED:
                continue
            if LAYERS.index(_layer(imported)) > mine:
                upward.append(f"{module} -> {imported}")
    assert not upward, upward


def test_no_import_cycle_at_module_level():
    """Top-level imports between saycan_ros modules form no cycle (one would break whichever
    module is imported first)."""
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        targets = set()
        for imported in _saycan_imports(path, top_level_only=True):
            # "from saycan_ros.x import y" may name a submodule y or an attribute of x
            targets.add(imported if imported in modules else imported.rsplit(".", 1)[0])
        graph[module] = {t for t in targets if t in modules and t != module}
    state, cycles = {}, []

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(trail[trail.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, cycles


def test_rclpy_only_at_the_edge():
    """ROS at the edge: rclpy is imported in ros/ (the nodes, the graph runtime, the commander)
    and by the CLI that starts them, nowhere else."""
    for module, path in _modules().items():
        if module == PKG or _layer(module) in ("ros", "cli"):
            continue
        text = path.read_text(encoding="utf-8")
        assert "import rclpy" not in text and "from rclpy" not in text, module


def _all_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_tests_are_split_into_unit_and_ros():
    """test/unit is ROS-free (no rclpy, no node module: plain pytest covers the core);
    everything over DDS is in test/ros, and the real runs of the launch files in test/launch;
    no test file sits anywhere else."""
    tests = ROOT / "test"
    stray = [p.name for p in tests.glob("*.py") if p.name != "conftest.py"]
    assert not stray, stray
    assert sorted(p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__") \
        == ["launch", "ros", "unit"]
    ros_in_unit = {p.name: sorted(m for m in _all_imports(p)
                                  if m.split(".")[0] == "rclpy" or m.startswith(PKG + ".ros"))
                   for p in sorted((tests / "unit").glob("*.py"))}
    assert not {k: v for k, v in ros_in_unit.items() if v}

    def over_dds(path: Path) -> bool:
        return any(m.split(".")[0] == "rclpy" or m.startswith(PKG + ".ros")
                   for m in _all_imports(path))
    through_the_cli = {"test_cli.py"}       # runs `saycan run`, which starts the node graph
    assert [p.name for p in sorted((tests / "ros").glob("test_*.py"))
            if not over_dds(p) and p.name not in through_the_cli] == []


def test_rviz_config_shows_topics_the_graph_publishes():
    """config/saycan.rviz (installed with config/) parses, and every topic it displays is one a
    node of the graph publishes (no display left waiting on a topic that does not exist)."""
    import yaml
    config = yaml.safe_load((ROOT / "config" / "saycan.rviz").read_text(encoding="utf-8"))
    displays = config["Visualization Manager"]["Displays"]
    topics = {d["Topic"]["Value"] for d in displays if "Topic" in d}
    assert {"/map", "/saycan/sim/markers", "/saycan/skill_markers",
            "/camera/image_raw"} <= topics
    assert config["Visualization Manager"]["Global Options"]["Fixed Frame"] == "map"
    published = set()
    for path in (ROOT / PKG / "ros").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        published.update(re.findall(r'create_publisher\(\s*\w+,\s*"([^"]+)"', text))
        published.update(f"saycan/{name}" for name in re.findall(
            r'^\w+_TOPIC = "saycan/([^"]+)"', text, re.M))
    assert {t.lstrip("/") for t in topics} <= {t.lstrip("/") for t in published}, \
        sorted(topics)


def test_the_layer_test_sees_an_upward_import(tmp_path):
    """The contract test can fail: a core module importing the planner is caught."""
    fake = tmp_path / "fake.py"
    fake.write_text("def f():\n    from saycan_ros.planning.planner import Planner\n")
    assert _saycan_imports(fake) == {"saycan_ros.planning.planner"}
    assert LAYERS.index(_layer("saycan_ros.planning.planner")) > LAYERS.index("core")


def test_the_robot_is_described_once():
    """Joint names, the home pose and the arm limits are written in saycan_ros/robot only."""
    literals = ('"arm_lift_joint"', "(1.15, 0.0, 0.4", "(0.35, 1.25)", "(0.3, 0.95)")
    for path in sorted((ROOT / "saycan_ros").rglob("*.py")):
        if path.parent.name == "robot":
            continue
        text = path.read_text(encoding="utf-8")
        assert not [lit for lit in literals if lit in text], path


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
