"""The optional front ends of a SayCan graph, included by saycan.launch.py and
saycan_sim.launch.py: the voice (speech_to_text) and RViz with config/saycan.rviz.

    ros2 launch saycan_ros saycan.launch.py voice:=true microphone:=true rviz:=true
    ros2 launch saycan_ros saycan_frontends.launch.py voice:=true audio_file:=/tmp/say.wav
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    config = os.path.join(get_package_share_directory("saycan_ros"), "config")
    namespace = LaunchConfiguration("namespace")
    return LaunchDescription([
        DeclareLaunchArgument("namespace", default_value="",
                              description="the robot's namespace: every saycan/* name under it"),
        DeclareLaunchArgument("use_sim_time", default_value="false",
                              description="true with a simulator that publishes /clock"),
        DeclareLaunchArgument("params_file", default_value=os.path.join(config, "saycan.yaml"),
                              description="ros__parameters (speech_to_text's section)"),
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
             parameters=[LaunchConfiguration("params_file"),
                         {"use_sim_time": LaunchConfiguration("use_sim_time"),
                          "audio_file": LaunchConfiguration("audio_file"),
                          "microphone": LaunchConfiguration("microphone")}],
             condition=IfCondition(LaunchConfiguration("voice")), output="screen"),
        Node(package="rviz2", executable="rviz2", name="rviz2", namespace=namespace,
             arguments=["-d", os.path.join(config, "saycan.rviz")],
             condition=IfCondition(LaunchConfiguration("rviz")), output="screen"),
    ])
