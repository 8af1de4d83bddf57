"""The robot, described once: the arm's joints, limits and home pose (:mod:`.arm`), and its
cameras' mounts and image sizes (:mod:`.cameras`).

The simulator builds its robot from this description, and the skill controllers, the learning
code and the nodes read it from here: none of them restates a joint name, a limit or a camera
mount. A real robot with another arm or camera is described by changing these values (and
remapping topics), not by editing the simulator.
"""
