"""The simulator as the world of ``saycan run`` / ``saycan eval``: skills executed by the skill
controllers on the simulated robot, behind the same interface as the symbolic world
(:class:`saycan_ros.core.world.SymbolicWorld`: ``reset``, ``snapshot``, ``execute``).

Navigation and place run the controllers the ``navigate_skill`` and ``place_skill`` nodes run
(:mod:`saycan_ros.worlds.closed_loop`: the Navigator on the occupancy grid, odometry and laser
scan; the PlaceController on the joints and the head camera); pick runs either the scripted
expert (``pick="expert"``, privileged state) or the learned BC policy on the head camera image
and arm state, as the ``pick_skill`` node does (``pick="learned"``; ``"auto"``: learned when its
weights are there). :meth:`SimulatedKitchen.observation` is what the robot senses (camera frame
and arm state), for learned affordances. Outcomes come from the simulated physics, so a skill
can fail here where the symbolic world would let it succeed (that is the point of simulating).
"""
from __future__ import annotations

from typing import Callable


from saycan_ros.core.kitchen import GRIPPER, Kitchen, load_kitchen
from saycan_ros.skills.pick.policy import learned_pick_available, load_pick_policy, policy_state
from saycan_ros.robot.arm import HOME, JOINT_NAMES
from saycan_ros.sim.control import apply_action
from saycan_ros.sim.expert import PickExpert, lifted
from saycan_ros.sim.floorplan import MAP_RESOLUTION
from saycan_ros.sim.scan import LaserScanner
from saycan_ros.sim.world import KitchenWorld
from saycan_ros.skills.navigation import GridMap, Navigator
from saycan_ros.skills.place.controller import PlaceController
from saycan_ros.worlds.closed_loop import drive, place_in_sim
from saycan_ros.core.skills import NAVIGATIONS, Skill
from saycan_ros.core.world import SkillOutcome, WorldSnapshot, target_location

MAX_ACTIONS = 50          # per manipulation skill, as in the gym environments
DRIVE_TIMEOUT_S = 120.0
PICK_MODES = ("expert", "learned", "auto")


class SimulatedKitchen:
    def __init__(self, kitchen: Kitchen | None = None, init=None, seed: int = 0,
                 on_step: Callable[[KitchenWorld], None] | None = None, pick: str = "expert",
                 pick_weights: str = ""):
        if pick not in PICK_MODES:
            raise ValueError(f"pick must be one of {', '.join(PICK_MODES)}, got {pick!r}")
        if pick == "auto":
            pick = "learned" if learned_pick_available(pick_weights) else "expert"
        self.pick_mode = pick
        self.policy = load_pick_policy("bc_pick", pick_weights) if pick == "learned" else None
        self._camera = None
        self._ee_camera = None
        self.kitchen = kitchen or load_kitchen()
        self.world = KitchenWorld(self.kitchen, cmd_timeout=None, seed=seed)
        plan = self.world.plan
        self.navigator = Navigator(GridMap(plan.occupancy_grid(MAP_RESOLUTION), MAP_RESOLUTION))
        self.scanner = LaserScanner(plan)
        self.placer = PlaceController(self.kitchen)
        self.on_step = on_step               # called after every simulator step (videos)
        self.reset(init)

    # -- the SymbolicWorld interface ---------------------------------------------------------------
    def reset(self, init=None, seed: int | None = None) -> None:
        self.world.reset(init, seed=seed)

    @property
    def revision(self) -> int:
        return self.world.revision

    @property
    def robot_at(self) -> str | None:
        return self.world.robot_location or None

    @property
    def holding(self) -> str | None:
        return self.world.held

    @property
    def objects(self) -> dict[str, str]:
        return self.world.scene()

    def object_location(self, name: str) -> str | None:
        return self.objects.get(name)

    def snapshot(self) -> WorldSnapshot:
        return WorldSnapshot(self.revision, self.robot_at, self.world.base.pose, self.holding,
                             self.objects)

    def execute(self, skill: Skill) -> SkillOutcome:
        if skill.kind in NAVIGATIONS:
            target = target_location(self, skill)
            if target is None:
                return SkillOutcome(False, f"cannot {skill.text}: the "
                                           f"{skill.object} is not on any surface")
            return self.drive_to(target)
        if skill.kind == "pick":
            return self.pick(skill.object)
        if skill.kind == "place":
            return self.place(skill.object)
        if skill.kind == "terminate":
            return SkillOutcome(True, "done")
        return SkillOutcome(False, f"the simulator cannot execute skill kind {skill.kind!r}")

    # -- skills ------------------------------------------------------------------------------------
    def _step(self) -> None:
        self.world.step()
        if self.on_step is not None:
            self.on_step(self.world)

    def tuck_arm(self) -> None:
        """Bring the arm home (keeping the gripper as it is) before driving."""
        arm = self.world.arm
        home = dict(zip(JOINT_NAMES, (*HOME[:3], arm.gripper_target)))
        self.world.command_arm_trajectory([home])
        for _ in range(500):
            if not arm.waypoints:
                break
            self._step()

    def drive_to(self, location: str) -> SkillOutcome:
        loc = self.kitchen.location(location)
        self.tuck_arm()
        result = drive(self.world, self.navigator, (*loc.approach, loc.yaw), self.scanner,
                       timeout_s=DRIVE_TIMEOUT_S, on_step=self.on_step)
        if not result.success:
            return SkillOutcome(False, f"did not reach the {location}: "
                                       f"{result.error_msg or result.status.value}")
        if self.world.robot_location != location:
            return SkillOutcome(False, f"did not reach the {location}")
        return SkillOutcome(True, f"at the {location}")

    def _run_expert(self, expert) -> None:
        for _ in range(MAX_ACTIONS):
            if apply_action(self.world, expert.act(), self.on_step):
                break

    # -- sensing (what a real robot has: no privileged state) ------------------------------------
    @property
    def camera(self):
        if self._camera is None:
            from saycan_ros.sim.camera import Camera
            self._camera = Camera(self.world)              # kitchen_sim's default size
        return self._camera

    def observation(self) -> dict:
        """The pick env's observation of now: head camera frame and arm state, and the
        end-effector view when the learned policy takes one."""
        arm = self.world.arm
        obs = {"image": self.camera.render().copy(),
               "state": policy_state(arm.joint_positions, self.world.held is not None,
                                     arm.limits.gripper)}
        from saycan_ros.learning.data import ee_view_of
        size, zoom, kind = ee_view_of(self.policy)
        if size:
            if self._ee_camera is None:
                from saycan_ros.sim.camera import make_ee_camera
                self._ee_camera = make_ee_camera(self.world, kind, size, zoom)
            obs["ee_image"] = self._ee_camera.render().copy()
        return obs

    def pick(self, name: str) -> SkillOutcome:
        if self.policy is not None:
            return self.pick_learned(name)
        expert = PickExpert(self.world, name)
        if not expert.feasible() or self.world.held is not None:
            return SkillOutcome(False, f"cannot pick up the {name}: {self._why_not_pick(name)}")
        self._run_expert(expert)
        ok = lifted(self.world, name)
        self.tuck_arm()
        return SkillOutcome(ok, f"holding the {name}" if ok else f"failed to grasp the {name}")

    def pick_learned(self, name: str) -> SkillOutcome:
        """The BC policy in closed loop on the camera and arm state, at most MAX_ACTIONS steps."""
        w = self.world
        if w.held is not None:          # the gripper tells: no privileged knowledge needed
            return SkillOutcome(False, f"cannot pick up the {name}: already holding the {w.held}")
        skill = f"pick up the {name}"
        actions, start = 0, None
        for actions in range(1, MAX_ACTIONS + 1):
            obs = self.observation()
            start = obs["image"] if start is None else start
            obs.update(skill=skill, start_image=start)     # what the skill saw when it began
            if apply_action(w, self.policy.act(obs), self.on_step):
                break
        self.tuck_arm()                 # a grasp the policy did not lift far counts once tucked
        if lifted(w, name):
            return SkillOutcome(True, f"holding the {name}")
        failed = f"failed to pick up the {name} after {actions} actions"
        if w.held is None:
            return SkillOutcome(False, f"{failed}: nothing in the gripper")
        # A wrong grasp is undone here, as a robot's pick would: the plan never asked for that
        # object, and a planner that finds the hand full cannot try the right one again.
        other, where = w.held, w.robot_location
        command = place_in_sim(w, self.placer, camera=self.camera, on_step=self.on_step)
        if command.success and w.held is None and w.objects[other].location == where:
            return SkillOutcome(False, f"{failed}: it took the {other} and put it back")
        return SkillOutcome(False, f"{failed}: holding the {other} instead")

    def _why_not_pick(self, name: str) -> str:
        w = self.world
        if w.held is not None:
            return f"already holding the {w.held}"
        if name not in w.present:
            return "it is not in the kitchen"
        where = w.objects[name].location
        if where != w.robot_location:
            return f"it is at the {where}, the robot is at the {w.robot_location or 'no location'}"
        return "it is out of the arm's reach"

    def place(self, name: str) -> SkillOutcome:
        w = self.world
        if w.held != name:
            return SkillOutcome(False, f"cannot put down the {name}: holding {w.held or 'nothing'}")
        command = place_in_sim(w, self.placer, camera=self.camera, on_step=self.on_step)
        where = w.objects[name].location
        if command.success and where == w.robot_location:
            return SkillOutcome(True, f"the {name} is at the {where}")
        if not command.success:
            return SkillOutcome(False, f"cannot put down the {name}: {command.message}")
        ended = "in the gripper" if where == GRIPPER else f"on the {where}"
        return SkillOutcome(False, f"the {name} ended up {ended}")
