"""setup.py of saycan_ros: a thin shim, not a setuptools build.

saycan_ros is an ament_cmake package: its custom interfaces (msg/, srv/) are
generated and compiled by rosidl from CMakeLists.txt, which setuptools cannot do.
The build is defined in two places, both using that one CMakeLists.txt:

* pip (no ROS installation): pyproject.toml, through scikit-build-core.
  ``pip install .`` ignores this file.
* a ROS 2 workspace: package.xml (build type ament_cmake); ``colcon build``
  ignores this file too.

For those who type ``python setup.py ...`` out of habit, this shim runs the pip
equivalent of the few commands that have one, and says so; anything else exits
with a pointer to the right tool.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PIP = [sys.executable, "-m", "pip"]

COMMANDS = {
    "install": PIP + ["install", HERE],
    "develop": PIP + ["install", "--no-build-isolation", "-e", HERE],
    "bdist_wheel": PIP + ["wheel", "--no-deps", "-w", os.path.join(HERE, "dist"), HERE],
}

USAGE = """\
saycan_ros is built by scikit-build-core (pyproject.toml) or by colcon (package.xml),
not by setuptools. Use one of:

  pip install .                          # build the interfaces and install
  pip install --no-build-isolation -e .  # editable, for development (needs requirements/build.txt)
  make venv                              # .venv with everything, package editable
  colcon build --packages-select saycan_ros   # inside a ROS 2 workspace

This shim maps: {commands}.
""".format(commands=", ".join("setup.py " + c for c in COMMANDS))


def _version():
    import re

    with open(os.path.join(HERE, "package.xml"), encoding="utf-8") as handle:
        return re.search(r"<version>([^<]+)</version>", handle.read()).group(1).strip()


def main(argv):
    if not argv or argv[0] in ("-h", "--help", "--help-commands"):
        print(USAGE)
        return 0
    if argv[0] == "--name":
        print("saycan_ros")
        return 0
    if argv[0] == "--version":
        print(_version())
        return 0
    command = COMMANDS.get(argv[0])
    if command is None:
        sys.stderr.write("setup.py %s: not supported.\n\n%s" % (argv[0], USAGE))
        return 2
    if len(argv) > 1:
        sys.stderr.write("setup.py: ignoring options %s\n" % " ".join(argv[1:]))
    print("setup.py %s -> %s" % (argv[0], " ".join(command)), flush=True)
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
