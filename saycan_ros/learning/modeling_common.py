"""What the pick policy and its value function share: the FiLM-conditioned CNN encoder
(BC-Z), the trunk that joins its features with the arm state and the skill text, input
preprocessing and augmentation, checkpoints, and the learning-rate schedule.
"""
from __future__ import annotations

import dataclasses
import math
import platform
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from saycan_ros.learning.configuration_common import AugmentConfig, FiLMNetConfig
from saycan_ros.learning.text_encoder import EmbeddingTable

IMAGE_MEAN, IMAGE_STD = 0.5, 0.25
#: Normalisation of the state vector [ee x, y, z, opening, holding] (roughly zero-mean, unit).
STATE_MEAN = torch.tensor([0.6, 0.0, 1.0, 0.5, 0.5])
STATE_SCALE = torch.tensor([0.3, 0.3, 0.2, 0.5, 0.5])


class FiLMBlock(nn.Module):
    """conv-GN-ReLU-conv-GN, FiLM (x * (1 + gamma) + beta), residual, ReLU."""

    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm1 = nn.GroupNorm(groups, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm2 = nn.GroupNorm(groups, channels)

    def forward(self, x, gamma, beta):
        h = F.relu(self.norm1(self.conv1(x)))
        h = self.norm2(self.conv2(h))
        h = h * (1.0 + gamma[:, :, None, None]) + beta[:, :, None, None]
        return F.relu(x + h)


class SpatialSoftmax(nn.Module):
    """Expected (x, y) in [-1, 1] of each channel's softmax over the image: keypoints.

    The first ``queries`` keypoints are text-queried: their heat map is the dot product of the
    features with a query vector computed from the skill text (attention: "where is the thing
    the instruction names"); the rest come from a 1x1 convolution. With ``fine_channels`` the
    text-queried maps are refined to the resolution of the ``fine`` features passed in."""

    def __init__(self, channels: int, keypoints: int, queries: int = 0, text_dim: int = 384,
                 fine_channels: int = 0):
        super().__init__()
        self.queries = queries
        self.proj = nn.Conv2d(channels, keypoints - queries, 1) if keypoints > queries else None
        self.query = nn.Linear(text_dim, queries * channels) if queries else None
        self.fine_query = None
        if queries and fine_channels:
            # Zero-initialised: the finer map starts as the upsampled coarse one.
            self.fine_query = nn.Linear(text_dim, queries * fine_channels)
            nn.init.zeros_(self.fine_query.weight)
            nn.init.zeros_(self.fine_query.bias)
        self.channels, self.fine_channels = channels, fine_channels
        self.log_temperature = nn.Parameter(torch.zeros(()))

    def forward(self, x, text=None, fine=None):
        """``fine``: (B, fine_channels, 2h, 2w) features that refine the text-queried maps to
        twice the resolution of ``x``."""
        # Float32 even under bfloat16 autocast: keypoints are expectations over the map, and
        # 8 mantissa bits are a sizeable fraction of a pixel.
        with torch.autocast(x.device.type, enabled=False):
            return self._forward(x.float(), None if text is None else text.float(),
                                 None if fine is None else fine.float())

    def _forward(self, x, text, fine):
        logits = []
        if self.query is not None:
            q = self.query(text).view(x.shape[0], self.queries, self.channels)
            maps = torch.einsum("bqc,bchw->bqhw", q, x) / math.sqrt(self.channels)
            if fine is not None and self.fine_query is not None:
                q = self.fine_query(text).view(x.shape[0], self.queries, self.fine_channels)
                maps = (F.interpolate(maps, size=fine.shape[-2:], mode="bilinear", align_corners=False)
                        + torch.einsum("bqc,bchw->bqhw", q, fine) / math.sqrt(self.fine_channels))
            logits.append(maps)
            # How well the best image location matches the text: high when the named object
            # is in view (used by the value network, see FiLMNetConfig.match_score).
            m = maps.flatten(2)
            self.match = torch.cat([m.amax(-1), m.logsumexp(-1) - math.log(m.shape[-1])], dim=1)
        if self.proj is not None:
            logits.append(self.proj(x))
        temperature = self.log_temperature.exp()
        kx, ky, widths, probs = [], [], [], []
        for maps in logits:
            n, k, height, width = maps.shape
            p = F.softmax(maps.flatten(2) / temperature, dim=-1).view(n, k, height, width)
            xs = torch.linspace(-1.0, 1.0, width, device=x.device, dtype=x.dtype)
            ys = torch.linspace(-1.0, 1.0, height, device=x.device, dtype=x.dtype)
            kx.append((p.sum(2) * xs).sum(-1))
            ky.append((p.sum(3) * ys).sum(-1))
            widths += [width] * k
            probs.append((p, xs, ys))
        if self.queries:
            # ... what the text-queried keypoints landed on, and how spread their maps are.
            pq, xs, ys = probs[0]
            mass = pq if pq.shape[-1] == x.shape[-1] else F.adaptive_avg_pool2d(pq, x.shape[-2:]) * (
                pq.shape[-1] * pq.shape[-2] / (x.shape[-1] * x.shape[-2]))      # per coarse cell
            attended = torch.einsum("bqhw,bchw->bqc", mass, x).flatten(1)
            # Clamped above 0, not at 0: a one-hot map's variance rounds to <= 0, and sqrt's gradient
            # there is inf (times clamp's 0: NaN), which ended training the encoder by TD.
            sx = ((pq.sum(2) * xs ** 2).sum(-1) - kx[0] ** 2).clamp_min(1e-12).sqrt()
            sy = ((pq.sum(3) * ys ** 2).sum(-1) - ky[0] ** 2).clamp_min(1e-12).sqrt()
            self.match = torch.cat([self.match, attended, sx, sy], dim=1)
        kx, ky = torch.cat(kx, dim=1), torch.cat(ky, dim=1)
        self.last = (kx, ky, torch.as_tensor(widths, dtype=x.dtype))
        return torch.cat([kx, ky], dim=1)

    def pixels(self, count: int, image_width: int) -> torch.Tensor:
        """(B, 2 * count): (u, v) in input-image pixels of the first ``count`` keypoints of the
        last forward pass (cell centres of their feature map, continuous pixel coordinates)."""
        kx, ky, widths = self.last
        width = widths[:count]
        stride = image_width / width
        to_px = lambda k: ((k + 1) / 2 * (width - 1) + 0.5) * stride  # noqa: E731
        return torch.stack([to_px(kx[:, :count]), to_px(ky[:, :count])], dim=2).flatten(1)


class FiLMEncoder(nn.Module):
    """Image + text embedding -> feature vector (keypoints, pooled features)."""

    def __init__(self, cfg: FiLMNetConfig):
        super().__init__()
        size = cfg.image_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 16:
            raise ValueError(f"image_size: expected an integer side of at least 16 px, "
                             f"got {size!r}")
        ch = tuple(cfg.channels)
        self.coord_conv = bool(cfg.coord_conv)
        self.in_channels = 3 * (1 + bool(cfg.start_frame))     # + the skill's start frame
        self.stem = nn.Sequential(nn.Conv2d(self.in_channels + 2 * self.coord_conv, ch[0], 5,
                                            stride=2, padding=2, bias=False),
                                  nn.GroupNorm(cfg.groups, ch[0]), nn.ReLU())
        self.downs = nn.ModuleList(
            nn.Sequential(nn.Conv2d(ch[i - 1], ch[i], 3, stride=2, padding=1, bias=False),
                          nn.GroupNorm(cfg.groups, ch[i]), nn.ReLU())
            for i in range(1, len(ch)))
        per_stage = cfg.blocks_per_stage
        per_stage = (tuple(per_stage) if isinstance(per_stage, (tuple, list))
                     else (int(per_stage),) * len(ch))
        if len(per_stage) != len(ch) or sum(per_stage) == 0:
            raise ValueError(f"blocks_per_stage {per_stage} does not fit channels {ch}")
        self.blocks = nn.ModuleList(
            nn.ModuleList(FiLMBlock(c, cfg.groups) for _ in range(n)) for c, n in zip(ch, per_stage))
        self.film_sizes = [c for c, n in zip(ch, per_stage) for _ in range(n)]
        self.film = nn.Linear(cfg.text_dim, 2 * sum(self.film_sizes))
        nn.init.zeros_(self.film.weight)      # start as the identity modulation
        nn.init.zeros_(self.film.bias)
        self.refine = None
        fine = cfg.fine_keypoints
        if isinstance(fine, bool) or not isinstance(fine, int) or fine < 0:
            raise ValueError(f"fine_keypoints: expected a channel count >= 0, got {cfg.fine_keypoints!r}")
        if cfg.fine_keypoints:
            if len(ch) < 3 or not cfg.keypoints or not cfg.text_queries:
                raise ValueError("fine_keypoints needs text-queried keypoints and three stages")
            self.refine = nn.Conv2d(ch[-3], cfg.fine_keypoints, 3, padding=1)
        self.keypoints = (SpatialSoftmax(ch[-2] if len(ch) > 1 else ch[-1], cfg.keypoints,
                                         cfg.text_queries, cfg.text_dim, cfg.fine_keypoints)
                          if cfg.keypoints else None)
        self.flatten = None
        flat_dim = 0
        if cfg.flatten:
            side = cfg.image_size // (2 ** len(ch))     # the last stage's resolution
            self.flatten = nn.Sequential(nn.Conv2d(ch[-1], cfg.flatten, 1), nn.ReLU(), nn.Flatten(),
                                         nn.Linear(cfg.flatten * side * side, cfg.hidden), nn.ReLU())
            flat_dim = cfg.hidden
        self.match_score = bool(cfg.match_score and cfg.keypoints and cfg.text_queries)
        keyed_channels = ch[-2] if len(ch) > 1 else ch[-1]
        self.out_dim = (2 * cfg.keypoints * (cfg.keypoints > 0) + ch[-1] + flat_dim
                        + (4 + keyed_channels) * cfg.text_queries * self.match_score)

    def forward(self, image, text):
        film = self.film(text).split([s for c in self.film_sizes for s in (c, c)], dim=1)
        if self.coord_conv:
            n, _, h, w = image.shape
            ys = torch.linspace(-1.0, 1.0, h, dtype=image.dtype).view(1, 1, h, 1).expand(n, 1, h, w)
            xs = torch.linspace(-1.0, 1.0, w, dtype=image.dtype).view(1, 1, 1, w).expand(n, 1, h, w)
            image = torch.cat([image, xs, ys], dim=1)
        x = self.stem(image)
        k = 0
        keyed = finer = None
        for stage, blocks in enumerate(self.blocks):
            if stage > 0:
                x = self.downs[stage - 1](x)
            for block in blocks:
                x = block(x, film[2 * k], film[2 * k + 1])
                k += 1
            if stage == len(self.blocks) - 3:
                finer = x
            if stage == len(self.blocks) - 2:
                keyed = x
        keyed = x if keyed is None else keyed
        fine = self.refine(finer) if self.refine is not None else None
        parts = [x.mean(dim=(2, 3))]
        if self.keypoints is not None:
            parts.append(self.keypoints(keyed, text, fine))
            if self.match_score:
                parts.append(self.keypoints.match)
        if self.flatten is not None:
            parts.append(self.flatten(x))
        return torch.cat(parts, dim=1)


def resize_images(images: np.ndarray, size: int) -> np.ndarray:
    """(B,H,W,3) uint8 -> (B,size,size,3): area interpolation, a no-op at the right size."""
    images = np.asarray(images)
    if images.shape[1:3] == (size, size):
        return images
    import cv2
    return np.stack([cv2.resize(np.ascontiguousarray(im), (size, size),
                                interpolation=cv2.INTER_AREA) for im in images])


def with_start_frames(images, start_images):
    """(B,H,W,3) current and start frames -> (B,H,W,6), the input of a ``start_frame`` encoder
    (numpy or torch, uint8); augmenting the stack shifts both frames alike, as a camera would."""
    if tuple(start_images.shape) != tuple(images.shape):
        raise ValueError(f"start_images: expected the shape of the images {tuple(images.shape)}, "
                         f"got {tuple(start_images.shape)}")
    if isinstance(images, torch.Tensor):
        return torch.cat([images, start_images], dim=3)
    return np.concatenate([images, start_images], axis=3)


def start_rows(step) -> np.ndarray:
    """For frames sorted by (episode, step): the row of each frame's episode start (step 0)."""
    step = np.asarray(step)
    rows = np.where(step == 0, np.arange(len(step)), 0)
    if len(step) and step[0] != 0:
        raise ValueError("frames must be sorted by (episode, step), each episode from step 0")
    return np.maximum.accumulate(rows) if len(step) else rows


def preprocess_images(images: torch.Tensor) -> torch.Tensor:
    """uint8 (B,H,W,C) or float (B,C,H,W) in [0,1] -> normalised float (B,C,H,W)."""
    if images.dtype == torch.uint8:
        images = images.permute(0, 3, 1, 2).float() / 255.0
    return (images - IMAGE_MEAN) / IMAGE_STD


def normalise_state(state: torch.Tensor) -> torch.Tensor:
    return (state - STATE_MEAN.to(state)) / STATE_SCALE.to(state)


def augment(images: torch.Tensor, cfg: AugmentConfig, generator: torch.Generator | None = None,
            return_shift: bool = False):
    """uint8 (B,H,W,3) -> augmented float (B,3,H,W) in [0,1]: pad-and-crop shift (the field of
    view is kept), brightness and contrast, per image. With ``return_shift`` also the (B, 2)
    pixel shift (du, dv) of the image content."""
    x = images.permute(0, 3, 1, 2).float() / 255.0
    n, _, h, w = x.shape
    shift = torch.zeros(n, 2)
    if cfg.shift > 0:
        s = int(cfg.shift)
        padded = F.pad(x, (s, s, s, s), mode="replicate")
        offsets = torch.randint(0, 2 * s + 1, (n, 2), generator=generator)
        x = torch.stack([padded[i, :, r:r + h, c:c + w] for i, (r, c) in enumerate(offsets.tolist())])
        shift = (s - offsets).flip(1).float()          # content moves by (s - col, s - row)
    if cfg.contrast > 0:
        c = 1.0 + (torch.rand(n, 1, 1, 1, generator=generator) * 2 - 1) * cfg.contrast
        mean = x.mean(dim=(1, 2, 3), keepdim=True)
        x = (x - mean) * c + mean
    if cfg.brightness > 0:
        x = x + (torch.rand(n, 1, 1, 1, generator=generator) * 2 - 1) * cfg.brightness
    x = x.clamp(0.0, 1.0)
    return (x, shift) if return_shift else x


class TextNorm(nn.Module):
    """Centre and scale the sentence embeddings with statistics of the training skills, so the
    small differences between "pick up the coke can" and "pick up the pepsi can" (cosine ~0.9)
    are what the FiLM generator sees. Buffers: saved with the weights."""

    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("scale", torch.ones(()))

    def fit(self, embeddings: torch.Tensor) -> None:
        mean = embeddings.mean(0)
        rms = (embeddings - mean).pow(2).sum(1).mean().sqrt().clamp_min(1e-6)
        self.mean.copy_(mean)
        self.scale.copy_(1.0 / rms)

    def forward(self, text):
        return (text - self.mean) * self.scale


class FiLMNet(nn.Module):
    """The shared trunk: FiLM encoder of the image (conditioned on the normalised skill text),
    the normalised arm state and a projection of the text, concatenated (``trunk_dim`` wide).
    Subclasses add their MLP and heads."""

    def __init__(self, cfg: FiLMNetConfig):
        super().__init__()
        self.cfg = cfg
        self.text_norm = TextNorm(cfg.text_dim)
        self.encoder = FiLMEncoder(cfg)
        # The end-effector view: an encoder of the same kind, its own weights.
        self.ee_encoder = (FiLMEncoder(dataclasses.replace(cfg, image_size=cfg.ee_view, ee_view=0,
                                                           start_frame=False))
                           if cfg.ee_view else None)
        self.text_proj = nn.Linear(cfg.text_dim, cfg.text_proj)
        self.trunk_dim = (self.encoder.out_dim + cfg.state_dim + cfg.text_proj
                          + (self.ee_encoder.out_dim if self.ee_encoder is not None else 0))

    def features(self, images, text, ee_images=None):
        """The FiLM-conditioned visual features (raw text embedding in); ``ee_images``: the
        end-effector views, required when the network has an ``ee_view``."""
        text = self.text_norm(text)
        features = self.encoder(images, text)
        if self.ee_encoder is None:
            return features
        if ee_images is None:
            raise ValueError("this network also needs the end-effector view (ee_images)")
        return torch.cat([features, self.ee_encoder(ee_images, text)], dim=1)

    def trunk(self, features, states, text):
        """features from :meth:`features`, states (B,5) raw, text (B,384) raw -> (B, trunk_dim)."""
        parts = [features]
        if self.cfg.state_dim:
            parts.append(normalise_state(states[:, :self.cfg.state_dim]))
        parts.append(F.relu(self.text_proj(self.text_norm(text))))
        return torch.cat(parts, dim=1)


class LoadedModel:
    """Run-time wrapper of a trained network and the text embeddings of its skills."""

    def __init__(self, net: nn.Module, embeddings: EmbeddingTable, meta: dict | None = None):
        self.net = net.eval()
        self.embeddings = embeddings
        self.meta = meta or {}

    @property
    def image_size(self) -> int:
        """The input side the network was trained at; other images are resized to it."""
        return int(self.net.cfg.image_size)

    @property
    def ee_view(self) -> int:
        """The side of the end-effector view the network takes (0: none)."""
        return int(getattr(self.net.cfg, "ee_view", 0) or 0)

    @property
    def ee_view_zoom(self) -> float:
        return float(self.net.cfg.ee_view_zoom)

    @property
    def ee_camera(self) -> str:
        """The end-effector view's camera ("crop" of the head camera or "wrist")."""
        return str(getattr(self.net.cfg, "ee_camera", "crop"))

    @property
    def start_frame(self) -> bool:
        """Whether the network also takes the head camera frame from the skill's start."""
        return bool(getattr(self.net.cfg, "start_frame", False))

    def tensors(self, images: np.ndarray, states: np.ndarray, skills: Sequence[str],
                ee_images: np.ndarray | None = None, start_images: np.ndarray | None = None):
        """(B,H,W,3) uint8 of any size, (B,5), B skill texts [, (B,S,S,3) end-effector views]
        [, (B,H,W,3) head frames from the skill's start] -> the network's input tensors (the
        views' tensor is None without ``ee_view``; with ``start_frame`` the image tensor has
        the start frame's 3 channels after the current frame's)."""
        images = resize_images(images, self.image_size)
        if self.start_frame:
            if start_images is None:
                raise ValueError(f"{type(self).__name__}: this model also needs the head camera "
                                 f"frame from the skill's start (start_images)")
            images = with_start_frames(images, resize_images(start_images, self.image_size))
        # Copies: camera and state buffers may be read-only (ROS messages, cached frames).
        img = preprocess_images(torch.as_tensor(np.array(images)))
        st = torch.as_tensor(np.array(states, np.float32))
        txt = torch.as_tensor(self.embeddings(list(skills)))
        ee = None
        if self.ee_view:
            if ee_images is None:
                raise ValueError(f"{type(self).__name__}: this model also needs the "
                                 f"{self.ee_view}x{self.ee_view} end-effector view (ee_images)")
            ee = preprocess_images(torch.as_tensor(np.array(resize_images(ee_images, self.ee_view))))
        return img, st, txt, ee

    @staticmethod
    def load_net(path, kind: str, net_class) -> tuple[nn.Module, EmbeddingTable, dict]:
        ckpt = load_checkpoint(path, kind)
        # Checkpoints from before the input size was recorded were trained on 96x96 frames.
        net = net_class(FiLMNetConfig(**{"image_size": 96, **_tuples(ckpt["model_config"])}))
        net.load_state_dict({k: v.float() for k, v in ckpt["state_dict"].items()})
        embeddings = EmbeddingTable(ckpt["texts"], ckpt["embeddings"].float().numpy())
        return net, embeddings, ckpt.get("meta", {})


# -- checkpoints -----------------------------------------------------------------------------------
def _tuples(d: dict) -> dict:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}


def save_checkpoint(path, kind: str, net: nn.Module, embeddings: EmbeddingTable,
                    extra: dict | None = None) -> None:
    """Weights in float16 (a few hundred kB), the model config, the text embeddings of every
    trained skill, and ``extra`` (JSON-able) — loadable with ``torch.load(weights_only=True)``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: (v.half() if v.is_floating_point() else v) for k, v in net.state_dict().items()}
    torch.save({"kind": kind, "model_config": dataclasses.asdict(net.cfg), "state_dict": state,
                "texts": embeddings.texts, "embeddings": torch.as_tensor(embeddings.matrix()).half(),
                "meta": dict(extra or {})}, path)


def load_checkpoint(path, kind: str) -> dict:
    ckpt = torch.load(Path(path), map_location="cpu", weights_only=True)
    if ckpt.get("kind") != kind:
        raise ValueError(f"{path}: not a {kind} checkpoint (kind {ckpt.get('kind')!r})")
    return ckpt


PRECISIONS = ("fp32", "bf16", "auto")


def native_bf16() -> bool:
    """Whether this CPU runs bfloat16 convolutions natively (oneDNN: AVX-512 or AMX). Without
    it, PyTorch emulates them: a training step took 12x as long as in float32 (AVX2 only)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows: part of a
    training record, because float results (and so the weights) differ between CPU kinds."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def training_host(threads: int, device: str = "cpu") -> dict:
    """Where a model was trained, for its record: what a bit-equal reproduction must match
    (``cpu_capability``: the instruction set torch's kernels were picked for, e.g. AVX2;
    ``accelerator``: the GPU, where one did the arithmetic)."""
    host = {"threads": threads, "native_bf16": native_bf16(), "torch": torch.__version__,
            "machine": platform.machine(), "cpu": cpu_model(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    if device == "cuda":
        host["accelerator"] = torch.cuda.get_device_name()
        host["cuda"] = torch.version.cuda
    return host


DEVICES = ("cpu", "cuda", "auto")


def resolve_device(device: str) -> str:
    """``cpu`` or ``cuda``: ``auto`` is cuda where a GPU is visible, else cpu; ``cuda`` without
    one is refused up front (not after minutes of data generation)."""
    from saycan_ros.core.config import ConfigError         # a ValueError
    if device not in DEVICES:
        raise ConfigError(f"device: expected one of {DEVICES}, got {device!r}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device: cuda asked for, but torch sees no GPU "
                          f"(torch {torch.__version__}); use cpu or auto")
    return device


def resolve_precision(precision: str, device: str = "cpu") -> str:
    """``fp32`` or ``bf16``: ``auto`` is bf16 where the device has it natively, else fp32."""
    if precision not in PRECISIONS:
        from saycan_ros.core.config import ConfigError     # a ValueError
        raise ConfigError(f"precision: expected one of {PRECISIONS}, got {precision!r}")
    if precision == "auto":
        native = torch.cuda.is_bf16_supported() if device == "cuda" else native_bf16()
        return "bf16" if native else "fp32"
    return precision


def autocast(precision: str, device: str = "cpu"):
    """The forward-pass context of a training ``precision`` (``TrainConfig.precision``) on
    ``device`` (``cpu`` or ``cuda``)."""
    return torch.autocast(device, dtype=torch.bfloat16,
                          enabled=resolve_precision(precision, device) == "bf16")


def count_parameters(net: nn.Module) -> int:
    return sum(p.numel() for p in net.parameters())


def cosine_lr(step: int, total: int, warmup: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))
