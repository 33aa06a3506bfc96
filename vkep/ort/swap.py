"""Swapping a shader into live sessions (`vkep dev`): the nodes that run it take its current SPIR-V without the
session being recreated.

A node holds VkPipeline handles in three places: the device's PipelineCache, the node's own cache
(KernelInstance.pipelines) and its native replay plan (docs/design.md, "The replay contract"). A swap takes the
shader's pipelines out of the first two, invalidates the plans of the nodes that used them (the next execution
goes through Python, builds the new pipelines and records a new plan), and destroys the old pipelines once the
device is idle. Call it between runs: a run recording at the same time may still take an old pipeline.
"""

from __future__ import annotations

from vkep.gpu.device import opened_devices
from vkep.kernels import interface
from vkep.ort.ep import EPS
from vkep.ort.kernel import KERNELS


class SwapRefused(RuntimeError):
    """A live session replays recorded command buffers (graph capture) that hold the old pipelines."""


def swap_shader(shader: str) -> int:
    """Make every live session run the current source of `shader` (a file name in the shader directory);
    returns how many nodes will rebuild their pipelines."""
    if any(ep.graphs for ep in list(EPS.values())):
        raise SwapRefused("vkep: a session with a captured graph (enable_graph_capture=1) replays command "
                          "buffers that hold the old pipelines; run vkep dev on a session without graph capture")
    old = {device: device.pipelines.forget_shader(shader) for device in opened_devices()}
    interface.forget(shader)  # (dry runs from now on read its push block afresh)
    nodes = forget_pipelines(shader)
    for device, objects in old.items():
        device.pipelines.retire(objects)
    return nodes


def forget_pipelines(shader: str) -> int:
    """Drop every node's pipelines of `shader` and invalidate its replay plan, so its next execution goes
    through Python and takes the new pipelines. Returns how many nodes."""
    nodes = 0
    for kernel in list(KERNELS.values()):
        stale = [key for key in kernel.pipelines if key[0] == shader]
        if not stale:
            continue
        for key in stale:
            del kernel.pipelines[key]
        kernel.invalidate_plan()
        kernel.last_ops = []
        nodes += 1
    return nodes
