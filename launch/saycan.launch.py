"""Start the SayCan graph on a ROS 2 install: language scorer, affordances, skill executor,
planner.

    ros2 launch saycan_ros saycan.launch.py
    ros2 launch saycan_ros saycan.launch.py params_file:=/path/to/saycan.yaml strategy:=no_vf
    ros2 topic pub --once /saycan/instruction std_msgs/String "{data: 'Bring me a coke.'}"
    ros2 launch saycan_ros saycan.launch.py namespace:=robot1   # /robot1/saycan/instruction ...
    ros2 launch saycan_ros saycan.launch.py voice:=true microphone:=true rviz:=true
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    share = get_package_share_directory("saycan_ros")
    params_file = LaunchConfiguration("params_file")
    strategy = LaunchConfiguration("strategy")
    model = LaunchConfiguration("model")
    namespace = LaunchConfiguration("namespace")
    sim_time = {"use_sim_time": LaunchConfiguration("use_sim_time")}
    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value="",
                              description="the robot's namespace: every saycan/* name under it"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="true with a simulator that publishes /clock"),
        DeclareLaunchArgument("params_file",
                              default_value=os.path.join(share, "config", "saycan.yaml"),
                              description="ros__parameters for every node"),
        DeclareLaunchArgument("strategy", default_value="saycan",
                              description="saycan | no_vf"),
        DeclareLaunchArgument("model", default_value="smollm2-135m",
                              description="language model of the scorer"),
        Node(package="saycan_ros", executable="llm_scorer", name="llm_scorer", namespace=namespace,
             parameters=[params_file, sim_time, {"model": model}], output="screen"),
        Node(package="saycan_ros", executable="affordance", name="affordance", namespace=namespace,
             parameters=[params_file, sim_time], output="screen"),
        Node(package="saycan_ros", executable="skill_executor", name="skill_executor", namespace=namespace,
             parameters=[params_file, sim_time], output="screen"),
        Node(package="saycan_ros", executable="planner", name="planner", namespace=namespace,
             parameters=[params_file, sim_time, {"strategy": strategy}], output="screen"),
        DeclareLaunchArgument("voice", default_value="false",
                              description="start speech_to_text (Whisper base, offline)"),
        DeclareLaunchArgument("audio_file", default_value="",
                              description="voice: a WAV file to transcribe once at start"),
        DeclareLaunchArgument("microphone", default_value="false",
                              description="voice: listen on the default input device"),
        DeclareLaunchArgument("rviz", default_value="false",
                              description="start rviz2 with config/saycan.rviz"),
        Node(package="saycan_ros", executable="speech_to_text", name="speech_to_text",
             namespace=namespace,
             parameters=[params_file, sim_time,
                         {"audio_file": LaunchConfiguration("audio_file"),
                          "microphone": LaunchConfiguration("microphone")}],
             condition=IfCondition(LaunchConfiguration("voice")), output="screen"),
        Node(package="rviz2", executable="rviz2", name="rviz2", namespace=namespace,
             arguments=["-d", os.path.join(get_package_share_directory("saycan_ros"), "config",
                                           "saycan.rviz")],
             condition=IfCondition(LaunchConfiguration("rviz")), output="screen"),
    ])
