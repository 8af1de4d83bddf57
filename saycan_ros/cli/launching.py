"""``saycan launch FILE [name:=value ...]``: run one of saycan_ros's launch files with
``launch.LaunchService``, as ``ros2 launch saycan_ros FILE`` does where the ros2 CLI is
installed. For installs without it: the ROS 2 wheels from PyPI plus the ``launch`` /
``launch_ros`` wheels (``make launch-wheels``).

    saycan launch saycan_sim.launch.py
    saycan launch saycan.launch.py namespace:=robot1 ask_epsilon:=0.1
    saycan launch saycan.launch.py --show-args
"""
from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

PACKAGE = "saycan_ros"
_ARGUMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):=(.*)$", re.DOTALL)


def launch_arguments(items) -> list[tuple[str, str]]:
    """``name:=value`` items as pairs; anything else is a ValueError naming it."""
    pairs = []
    for item in items:
        match = _ARGUMENT.match(item)
        if not match:
            raise ValueError(f"{item!r} is not a launch argument (name:=value)")
        pairs.append((match.group(1), match.group(2)))
    return pairs


def ament_prefix_with_package(environ=os.environ, prefix: str = sys.prefix) -> str:
    """AMENT_PREFIX_PATH that finds saycan_ros: as it is when it does, else with this Python's
    prefix appended where pip installed the package there (its ament index entry), as sourcing
    an install space's setup.bash would."""
    current = environ.get("AMENT_PREFIX_PATH", "")
    marker = Path("share", "ament_index", "resource_index", "packages", PACKAGE)
    if any((Path(p) / marker).is_file() for p in current.split(os.pathsep) if p):
        return current
    if (Path(prefix) / marker).is_file():
        return os.pathsep.join(p for p in (current, prefix) if p)
    return current


def launch_file(name: str) -> Path:
    """A path to a launch file as given, or a file name in saycan_ros's share/launch."""
    path = Path(name)
    if path.is_file():
        return path
    if path.name != name:
        raise FileNotFoundError(f"no launch file {name}")
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
    try:
        share = Path(get_package_share_directory(PACKAGE)) / "launch"
    except (PackageNotFoundError, OSError) as exc:
        raise FileNotFoundError(f"{PACKAGE} is not in an install space on AMENT_PREFIX_PATH "
                                f"({exc})") from None
    if not (share / name).is_file():
        known = sorted(p.name for p in share.glob("*.launch.py"))
        raise FileNotFoundError(f"no launch file {name!r} in {share} (there: {', '.join(known)})")
    return share / name


def _describe(substitutions) -> str:
    return "".join(s.describe().strip("'") for s in substitutions or ())


def cmd_launch(args) -> int:
    os.environ["AMENT_PREFIX_PATH"] = ament_prefix_with_package()
    try:
        import launch
        from launch.launch_description_sources import (AnyLaunchDescriptionSource,
                                                       get_launch_description_from_any_launch_file)
        import launch_ros  # noqa: F401  (the launch files' Node actions)
    except ImportError as exc:
        print(f"saycan launch: the ROS 2 launch packages are not installed ({exc}): source a "
              f"ROS 2 installation, or `make launch-wheels`", file=sys.stderr)
        return 2
    try:
        path = launch_file(args.file)
        arguments = launch_arguments(args.arguments)
    except (FileNotFoundError, ValueError) as exc:
        print(f"saycan launch: {exc}", file=sys.stderr)
        return 2
    if args.show_args:
        description = get_launch_description_from_any_launch_file(str(path))
        for argument in description.get_launch_arguments():
            print(f"    '{argument.name}':\n        {argument.description}\n"
                  f"        (default: '{_describe(argument.default_value)}')")
        return 0
    # Started by a script in the background (no job control), a process inherits SIGINT
    # ignored, and so would every node: Ctrl-C / SIGINT must stop them all, as in a terminal.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    service = launch.LaunchService(argv=[f"{k}:={v}" for k, v in arguments],
                                   noninteractive=True, debug=args.debug)
    service.include_launch_description(launch.actions.IncludeLaunchDescription(
        AnyLaunchDescriptionSource(str(path)), launch_arguments=arguments))
    return service.run()


def register(sub) -> None:
    p = sub.add_parser("launch", help="run a launch file of saycan_ros (ros2 launch without "
                                      "the ros2 CLI)")
    p.add_argument("file", help="saycan.launch.py, saycan_sim.launch.py, ... or a path")
    p.add_argument("arguments", nargs="*", help="launch arguments, name:=value")
    p.add_argument("--show-args", "-s", action="store_true",
                   help="list the file's arguments with their defaults, start nothing")
    p.add_argument("--debug", "-d", action="store_true", help="launch's debug output")
    p.set_defaults(func=cmd_launch)
