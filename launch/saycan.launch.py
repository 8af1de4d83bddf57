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
from launch.actions import (DeclareLaunchArgument, IncludeLaunchDescription,
                            SetEnvironmentVariable)
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    share = get_package_share_directory("saycan_ros")
    params_file = LaunchConfiguration("params_file")
    strategy = LaunchConfiguration("strategy")
    ask_epsilon = LaunchConfiguration("ask_epsilon")
    model = LaunchConfiguration("model")
    namespace = LaunchConfiguration("namespace")
    sim_time = {"use_sim_time": LaunchConfiguration("use_sim_time")}
    kitchen = {"kitchen_file": LaunchConfiguration("kitchen_file")}
    session = uuid.uuid4().hex          # this launch: a respawned executor restores its world
    return LaunchDescription([
        # DDS stays on this machine unless asked: SUBNET (or SYSTEM_DEFAULT) to reach a robot's
        # other computers, with SROS2 enclaves (README: "On a real robot").
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
        DeclareLaunchArgument("strategy", default_value="saycan",
                              description="saycan | no_vf"),
        DeclareLaunchArgument("ask_epsilon", default_value="0.0",
                              description="> 0 (e.g. 0.1): the planner asks on saycan/question "
                                          "when it does not know (answers on saycan/answer)"),
        DeclareLaunchArgument("model", default_value="smollm2-135m",
                              description="language model of the scorer"),
        DeclareLaunchArgument("kitchen_file", default_value="",
                              description="your kitchen description (docs/your_robot.md) for "
                                          "every node; '' = the built-in kitchen"),
        Node(package="saycan_ros", executable="llm_scorer", name="llm_scorer", namespace=namespace,
             parameters=[params_file, sim_time, kitchen, {"model": model}], output="screen"),
        Node(package="saycan_ros", executable="affordance", name="affordance", namespace=namespace,
             parameters=[params_file, sim_time, kitchen], output="screen"),
        # respawned after a crash; the session (one per launch) lets it restore its world
        Node(package="saycan_ros", executable="skill_executor", name="skill_executor", namespace=namespace,
             parameters=[params_file, sim_time, kitchen, {"session": session}], output="screen",
             respawn=True, respawn_delay=1.0),
        Node(package="saycan_ros", executable="planner", name="planner", namespace=namespace,
             parameters=[params_file, sim_time, kitchen,
                         {"strategy": strategy, "ask_epsilon": ask_epsilon}], output="screen"),
        # voice:=true, audio_file:=..., microphone:=true, rviz:=true (the arguments pass through)
        IncludeLaunchDescription(PythonLaunchDescriptionSource(
            os.path.join(share, "launch", "saycan_frontends.launch.py"))),
    ])
