"""Start the SayCan graph on a ROS 2 install: language scorer, affordances, skill executor,
planner.

    ros2 launch saycan_ros saycan.launch.py
    ros2 launch saycan_ros saycan.launch.py params_file:=/path/to/saycan.yaml strategy:=no_vf
    ros2 topic pub --once /saycan/instruction std_msgs/String "{data: 'Bring me a coke.'}"
    ros2 launch saycan_ros saycan.launch.py namespace:=robot1   # /robot1/saycan/instruction ...
    ros2 launch saycan_ros saycan.launch.py kitchen_file:=/path/to/my_kitchen.yaml
    ros2 launch saycan_ros saycan.launch.py voice:=true microphone:=true rviz:=true
"""
import os
import uuid

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import (DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction,
                            SetEnvironmentVariable)
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


#: launch arguments that set a node parameter only when given: '' leaves params_file's value
OVERRIDES = {"llm_scorer": ("model", "kitchen_file"), "affordance": ("kitchen_file",),
             "skill_executor": ("kitchen_file",),
             "planner": ("strategy", "ask_epsilon", "kitchen_file")}


def given(context, names) -> dict:
    """The launch arguments among ``names`` that were given a value, as parameters (typed from
    their text as ROS does); the others leave the parameter file's values alone."""
    return {name: LaunchConfiguration(name) for name in names
            if LaunchConfiguration(name).perform(context) != ""}


def graph_nodes(context, session: str) -> list:
    from saycan_ros.planning.asking import calibration_params
    params_file = LaunchConfiguration("params_file")
    namespace = LaunchConfiguration("namespace")
    sim_time = {"use_sim_time": LaunchConfiguration("use_sim_time")}

    def node(name, extra=(), **kwargs):
        return Node(package="saycan_ros", executable=name, name=name, namespace=namespace,
                    parameters=[params_file, sim_time, *extra, given(context, OVERRIDES[name])],
                    output="screen", **kwargs)
    return [
        node("llm_scorer"),
        node("affordance"),
        # respawned after a crash; the session (one per launch) lets it restore its world
        node("skill_executor", [{"session": session}], respawn=True, respawn_delay=1.0),
        # model:= is the scorer's: the planner asks with that model's calibration
        node("planner", [calibration_params(LaunchConfiguration("model").perform(context))]),
    ]


def generate_launch_description():
    share = get_package_share_directory("saycan_ros")
    session = uuid.uuid4().hex          # this launch: a respawned executor restores its world
    from_file = " ('' = params_file's)"
    return LaunchDescription([
        # DDS stays on this machine unless asked: SUBNET (or SYSTEM_DEFAULT) to reach a robot's
        # other computers, with SROS2 enclaves (docs/install.md: "On a real robot").
        DeclareLaunchArgument("discovery_range", default_value="LOCALHOST",
                              description="ROS_AUTOMATIC_DISCOVERY_RANGE of every node: "
                                          "LOCALHOST | SUBNET | SYSTEM_DEFAULT | OFF"),
        SetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE",
                               LaunchConfiguration("discovery_range")),
        DeclareLaunchArgument("namespace", default_value="",
                              description="the robot's namespace: every saycan/* name under it"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="true with a simulator that publishes /clock"),
        DeclareLaunchArgument("params_file",
                              default_value=os.path.join(share, "config", "saycan.yaml"),
                              description="ros__parameters for every node"),
        DeclareLaunchArgument("strategy", default_value="",
                              description="the planner's strategy: saycan | no_vf" + from_file),
        DeclareLaunchArgument("ask_epsilon", default_value="",
                              description="> 0 (e.g. 0.1): the planner asks on saycan/question "
                                          "when it does not know (answers on saycan/answer); "
                                          "0: never" + from_file),
        DeclareLaunchArgument("model", default_value="",
                              description="language model of the scorer" + from_file),
        DeclareLaunchArgument("kitchen_file", default_value="",
                              description="your kitchen description (docs/your_robot.md) for "
                                          "every node" + from_file),
        OpaqueFunction(function=graph_nodes, args=[session]),
        # voice:=true, audio_file:=..., microphone:=true, rviz:=true (the arguments pass through)
        IncludeLaunchDescription(PythonLaunchDescriptionSource(
            os.path.join(share, "launch", "saycan_frontends.launch.py"))),
    ])
