"""Where a rank's checkpoint state lives: the device a point asks for, refused in one line when absent."""

from __future__ import annotations

import socket

import torch


class EngineConfigError(Exception):
    """The point asks for what this machine cannot give (a GPU where none is): one line, nothing written."""


def resolve_device(name: str) -> torch.device:
    """The torch device a point asks for, or EngineConfigError in one line when this machine has none."""
    if name == "cuda":
        if not torch.cuda.is_available():
            raise EngineConfigError(f"checkpoint.device cuda: no CUDA device on {socket.gethostname()} "
                                    f"(torch {torch.__version__}); use device: cpu")
        return torch.device("cuda", torch.cuda.current_device())
    if name != "cpu":
        raise EngineConfigError(f"checkpoint.device {name!r}: not one of cpu, cuda")
    return torch.device("cpu")


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so a clock read after it includes that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
