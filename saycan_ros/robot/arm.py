"""The arm: a cylindrical arm (lift, yaw, telescoping extension) on a mast, with a parallel
gripper. Joint positions are: lift (fingertip height above the floor, m), yaw (rad), extend
(horizontal reach from the mast, m), gripper (finger opening, m). The end effector in base_link
is ``(mast_x + extend cos yaw, mast_y + extend sin yaw, lift)``.
"""
from __future__ import annotations

from dataclasses import dataclass

#: The joints, in the order of every joint vector here (and of ``joint_states``).
JOINT_NAMES = ("arm_lift_joint", "arm_yaw_joint", "arm_extend_joint", "gripper_joint")
#: Where the mast stands in the base frame (x forward, y left), m.
MAST = (0.0, 0.0)


@dataclass(frozen=True)
class ArmLimits:
    lift: tuple[float, float] = (0.35, 1.25)      # fingertip height above the floor
    yaw: tuple[float, float] = (-0.7, 0.7)
    extend: tuple[float, float] = (0.3, 0.95)     # horizontal reach from the mast
    gripper: tuple[float, float] = (0.0, 0.10)    # finger opening
    max_speed: float = 0.3                        # Cartesian end-effector speed, m/s
    joint_speed: tuple[float, float, float, float] = (0.3, 1.0, 0.3, 0.2)

    @property
    def bounds(self):
        return (self.lift, self.yaw, self.extend, self.gripper)


#: Where the arm stands when idle: high above every surface, close to the body (joint order).
HOME = (1.15, 0.0, 0.4, 0.10)
