"""``saycan launch``'s argument handling (the real runs of the launch files are in test/launch)."""
import pytest

from saycan_ros.cli.launching import ament_prefix_with_package, launch_arguments, launch_file


def test_launch_arguments_are_name_value_pairs():
    assert launch_arguments(["namespace:=robot1", "audio_file:=/tmp/a b.wav", "x:="]) == [
        ("namespace", "robot1"), ("audio_file", "/tmp/a b.wav"), ("x", "")]
    for bad in ("namespace=robot1", ":=1", "1x:=2", "name"):
        with pytest.raises(ValueError, match="is not a launch argument"):
            launch_arguments([bad])


def _prefix(tmp_path, name):
    prefix = tmp_path / name
    marker = prefix / "share" / "ament_index" / "resource_index" / "packages"
    marker.mkdir(parents=True)
    (marker / "saycan_ros").write_text("")
    return str(prefix)


def test_the_python_prefix_is_added_only_where_pip_installed_the_package(tmp_path):
    venv = _prefix(tmp_path, "venv")
    empty = str(tmp_path / "empty")
    assert ament_prefix_with_package({}, venv) == venv
    assert ament_prefix_with_package({"AMENT_PREFIX_PATH": "/opt/ros/kilted"}, venv) \
        == f"/opt/ros/kilted:{venv}"
    colcon = _prefix(tmp_path, "install")
    assert ament_prefix_with_package({"AMENT_PREFIX_PATH": colcon}, venv) == colcon
    assert ament_prefix_with_package({}, empty) == ""


def test_a_launch_file_is_a_path_or_a_name_in_the_share_folder(tmp_path, monkeypatch):
    mine = tmp_path / "my.launch.py"
    mine.write_text("")
    assert launch_file(str(mine)) == mine
    with pytest.raises(FileNotFoundError, match="no launch file"):
        launch_file(str(tmp_path / "missing.launch.py"))
    monkeypatch.setenv("AMENT_PREFIX_PATH", _prefix(tmp_path, "prefix"))
    (tmp_path / "prefix" / "share" / "saycan_ros" / "launch").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"no launch file 'x.launch.py' in .*\(there: \)"):
        launch_file("x.launch.py")


def test_an_install_space_finds_its_models_and_config_through_the_ament_index(
        tmp_path, monkeypatch):
    """A colcon install: the package sits in lib/python3.X/site-packages (no models/ beside
    it), the weights and config in share/saycan_ros of a prefix on AMENT_PREFIX_PATH."""
    from saycan_ros.core import config, paths
    prefix = _prefix(tmp_path, "install")
    for folder in ("models", "config"):
        (tmp_path / "install" / "share" / "saycan_ros" / folder).mkdir(parents=True)
    (tmp_path / "install" / "share" / "saycan_ros" / "config" / "kitchen.yaml").write_text("")
    monkeypatch.setattr(paths, "repo_root", lambda: tmp_path / "site-packages")
    monkeypatch.setattr(paths.sys, "prefix", str(tmp_path / "env"))
    monkeypatch.delenv(paths.MODELS_ENV, raising=False)
    monkeypatch.delenv("SAYCAN_CONFIG_DIR", raising=False)
    monkeypatch.setenv("AMENT_PREFIX_PATH", prefix)
    share = tmp_path / "install" / "share" / "saycan_ros"
    assert paths.models_dir() == share / "models"
    assert config.config_dir() == share / "config"
