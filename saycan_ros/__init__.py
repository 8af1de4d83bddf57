"""saycan_ros: SayCan task planning for a mobile manipulator, as a ROS 2 stack."""
import os as _os

# Everything runs offline: the model libraries must never try to reach a hub. Set before any of
# them is imported (they read these once); an explicit value in the environment is respected.
for _switch in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    _os.environ.setdefault(_switch, "1")
_os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
