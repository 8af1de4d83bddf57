"""Start the SayCan graph with the real skill executors on the simulated robot: kitchen_sim
(the robot's standard topics), navigate_skill / pick_skill (learned BC policy) / place_skill
routed through config/skill_registry.yaml, the affordance node with the pick value function
(config/affordance_sim.yaml: camera + joint_states), the language scorer and the planner.

    ros2 launch saycan_ros saycan_sim.launch.py
    ros2 launch saycan_ros saycan_sim.launch.py strategy:=no_vf affordance_file:=affordance.yaml
    ros2 launch saycan_ros saycan_sim.launch.py rviz:=true voice:=true audio_file:=/tmp/say.wav
    ros2 launch saycan_ros saycan_sim.launch.py kitchen_file:=/path/to/my_kitchen.yaml
    ros2 topic pub --once /saycan/instruction std_msgs/String "{data: 'Bring me a coke.'}"

For another robot (Gazebo, Isaac Sim, a real one) leave out kitchen_sim, remap its wrist camera
to camera/ee_view/image_raw (the pick policy's end-effector view; for a policy trained on the
head-camera crop, add the ee_view node instead) and remap the skill nodes' and the affordance
node's topics (docs/simulator.md).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import (DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction,
                            SetEnvironmentVariable)
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


#: launch arguments that set a node parameter only when given: '' leaves the files' values
OVERRIDES = {"llm_scorer": ("model", "kitchen_file"), "affordance": ("kitchen_file",),
             "planner": ("strategy", "kitchen_file"), "navigate_skill": ("kitchen_file",),
             "pick_skill": ("kitchen_file",), "place_skill": ("kitchen_file",)}


def given(context, names) -> dict:
    """The launch arguments among ``names`` that were given a value, as parameters (typed from
    their text as ROS does); the others leave the parameter files' values alone."""
    return {name: LaunchConfiguration(name) for name in names
            if LaunchConfiguration(name).perform(context) != ""}


def graph_nodes(context, config: str) -> list:
    from saycan_ros.planning.asking import calibration_params
    params_file = LaunchConfiguration("params_file")
    executors_file = LaunchConfiguration("executors_file")

    def node(name, params, extra=()):
        return Node(package="saycan_ros", executable=name, name=name, output="screen",
                    parameters=[params, *extra, given(context, OVERRIDES[name])])
    kitchen = LaunchConfiguration("kitchen_file").perform(context)
    return [
        Node(package="saycan_ros", executable="kitchen_sim", name="kitchen_sim", output="screen",
             parameters=[os.path.join(config, "kitchen_sim.yaml")]
             + ([{"kitchen": kitchen}] if kitchen else [])),
        node("navigate_skill", executors_file),
        node("pick_skill", executors_file),
        node("place_skill", executors_file),
        node("llm_scorer", params_file),
        node("affordance", params_file,
             [{"affordance_file": LaunchConfiguration("affordance_file")}]),
        # model:= is the scorer's: the planner asks with that model's calibration
        node("planner", params_file, [{"registry_file": "skill_registry.yaml"},
                                      calibration_params(LaunchConfiguration("model")
                                                         .perform(context))]),
    ]


def generate_launch_description():
    share = get_package_share_directory("saycan_ros")
    config = os.path.join(share, "config")
    from_file = " ('' = params_file's)"
    return LaunchDescription([
        # DDS stays on this machine unless asked: SUBNET (or SYSTEM_DEFAULT) to reach a robot's
        # other computers, with SROS2 enclaves (docs/install.md: "On a real robot").
        DeclareLaunchArgument("discovery_range", default_value="LOCALHOST",
                              description="ROS_AUTOMATIC_DISCOVERY_RANGE of every node: "
                                          "LOCALHOST | SUBNET | SYSTEM_DEFAULT | OFF"),
        SetEnvironmentVariable("ROS_AUTOMATIC_DISCOVERY_RANGE",
                               LaunchConfiguration("discovery_range")),
        DeclareLaunchArgument("params_file", default_value=os.path.join(config, "saycan.yaml"),
                              description="ros__parameters of the planning nodes"),
        DeclareLaunchArgument("executors_file",
                              default_value=os.path.join(config, "skill_executors.yaml"),
                              description="ros__parameters of the skill executor nodes"),
        DeclareLaunchArgument("strategy", default_value="",
                              description="the planner's strategy: saycan | no_vf" + from_file),
        DeclareLaunchArgument("model", default_value="",
                              description="language model of the scorer" + from_file),
        DeclareLaunchArgument("affordance_file", default_value="affordance_sim.yaml",
                              description="affordance models (learned pick value function)"),
        DeclareLaunchArgument("kitchen_file", default_value="",
                              description="your kitchen description (docs/your_robot.md) for "
                                          "every node and the simulator ('' = the files')"),
        OpaqueFunction(function=graph_nodes, args=[config]),
        # voice:=true, audio_file:=..., microphone:=true, rviz:=true (the arguments pass through)
        IncludeLaunchDescription(PythonLaunchDescriptionSource(
            os.path.join(share, "launch", "saycan_frontends.launch.py"))),
    ])
