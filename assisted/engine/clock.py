"""The engine's clock: the device synchronised before the host reads the time.

Work on a GPU is queued: a clock read right after a call measures its launch, not its
work. Every timing the engine makes (a run's, the calibration's, the hindsight's) waits
for the device first.
"""

from __future__ import annotations

import torch


def synchronize(device: torch.device) -> None:
    """Wait until `device` has done the work queued on it, before reading the clock."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
