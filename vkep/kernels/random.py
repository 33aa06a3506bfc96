"""RandomUniform, RandomNormal, RandomUniformLike and RandomNormalLike (and Bernoulli, which ORT expands into
RandomUniformLike, Greater and Cast), and Multinomial, drawn on the device as ORT's CPU EP draws them
(shaders/random.comp).

The CPU EP's kernel holds a std::default_random_engine (libstdc++'s minstd_rand0) seeded once, at session
creation, with the `seed` attribute cast to uint32 as x86-64 casts a float (through int64: out of range gives
0); each run draws from where the last one stopped. With a seed, vkep's values are the CPU EP's: uniform ones to the
bit, normal ones within an ulp (its log is glibc's logf, vkep's a double log rounded once). Without one, the CPU EP
seeds from a per-process value vkep cannot read (onnxruntime.set_seed sets it): vkep seeds every unseeded node of
the process from one random value of its own, so its draws are as random, but not the CPU EP's.
"""

from __future__ import annotations

import itertools
import math
import os

import numpy as np

from vkep.kernels.base import (
    FLOAT64_SUFFIX,
    ITEMSIZE,
    LOOP_BUDGET,
    Kernel,
    UnsupportedError,
    declines_float64,
    grid_1d,
    has_float64,
)
from vkep.kernels.elementwise import Float32Outputs

MODULUS = 2**31 - 1  # minstd_rand0's
SHADER = "random.comp"  # (every op here: the manifest's Like entries name none, see kernels.yaml)
WG = 64  # (random.comp)
ROUND_PAIRS = 64 * 16  # pairs random.comp's normal mode takes a round (WG x CHUNK)
ROUND_STEPS = 2 * 16 + 2 * 6  # loop steps a round may count against lavapipe's budget (its loops, if not unrolled)
UNIFORM, NORMAL, ADVANCE, MULTINOMIAL, DROPOUT = 0, 1, 2, 3, 4  # random.comp's MODE
# (random.comp's members of the other modes)
NO_ROWS = {"x": None, "cdf": None, "classes": 0, "samples": 0, "y64": 0, "mask": None, "seed": (0, 0)}
# normal values a dispatch draws (even: no pair is split): 2^19 pairs take ~730 rounds (78.5% of pairs are kept, the
# mean of pi / 4; 70%, more than 6 deviations below, still leaves them under the budget)
NORMAL_PER_DISPATCH = 1 << 20
assert (NORMAL_PER_DISPATCH // 2) // (ROUND_PAIRS * 7 // 10) * ROUND_STEPS < LOOP_BUDGET
FLOAT, FLOAT16, INT32, INT64, DOUBLE = 1, 10, 6, 7, 11  # ONNX's element types (vkep draws those of the CPU EP)
PROCESS_SEED = int.from_bytes(os.urandom(4), "little")  # (the unseeded nodes': the first's, then one more each)
_unseeded = itertools.count()


def engine_state(seed: float | None) -> int:
    """std::default_random_engine{static_cast<uint32_t>(seed)}'s state on x86-64: the float truncated to int64 (NaN
    and values out of range give its minimum), its low 32 bits, mod 2^31 - 1, and 0 made 1."""
    if seed is None:  # (the CPU EP gives its unseeded nodes its process seed plus the node's index: they differ)
        word = PROCESS_SEED + next(_unseeded)
    else:
        f = float(np.float32(seed))
        word = int(f) if math.isfinite(f) and abs(f) < 2.0**63 else -(2**63)
    return (word & 0xFFFFFFFF) % MODULUS or 1


def output_type(like: bool, attrs: dict, input_types) -> int | None:
    """The ONNX element type a random op draws: its dtype, or a Like form's input's (None: one the CPU EP cannot infer
    from a type other than float32, float64 and float16)."""
    dtype = attrs.get("dtype")
    if like and dtype is None:  # (the CPU EP takes the input's type: float, double or float16)
        given = input_types[0] if input_types else None
        return {None: FLOAT, "float32": FLOAT, "float64": DOUBLE, "float16": FLOAT16}.get(given)
    return FLOAT if dtype is None else dtype


class Random(Kernel):
    """One of the four ops: `normal` by name; the shape from the `shape` attribute or (Like) the input's. float64
    values as the CPU EP's distributions of double draw them, two draws a value (random.comp's y64; declined
    without shaderFloat64); a float16 input's Like as float32's values rounded to float16, as the CPU EP."""

    draws_on = True

    def __init__(self, *args):
        super().__init__(*args)
        self.normal = "Normal" in self.spec.op
        self.seeded = engine_state(self.attrs.get("seed"))
        self.like = self.spec.op.endswith("Like")
        drawn = output_type(self.like, self.attrs, self.input_types)
        self.doubles, self.halves = drawn == DOUBLE, drawn == FLOAT16

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        dtype = output_type(spec.op.endswith("Like"), attrs, input_types)
        if dtype is None:
            return f"{spec.op} of a {input_types[0]} input without dtype (the CPU EP cannot infer the output's type)"
        if dtype not in (FLOAT, DOUBLE) and not (dtype == FLOAT16 and attrs.get("dtype") is None):
            return f"{spec.op} of dtype {dtype}: the CPU EP draws float32 and float64 (and float16 as a float16 " \
                "input's Like)"
        return None

    @classmethod
    def declines_on(cls, info, attrs: dict, input_types) -> str | None:
        # (RandomUniform and RandomNormal have no input: their dtype decides, as the Like forms' does where given)
        return declines_float64(info, [], "float64") if output_type(True, attrs, input_types) == DOUBLE else None

    def compute(self, call) -> None:
        if self.halves:  # (the CPU EP's float16 Like: its float32 values rounded to float16)
            wide = Float32Outputs(call)
            self.draw(wide)
            wide.finish()
        else:
            self.draw(call)

    def draw(self, call) -> None:
        shape = tuple(call.inputs[0].shape) if self.like else tuple(self.attrs["shape"])
        y = call.output(0, shape, "float64" if self.doubles else "float32")
        n = y.size
        if n == 0:
            return
        state = call.state(8)
        wide = self.doubles or self.device_info is None or has_float64(self.device_info)
        dtype = "float32" + FLOAT64_SUFFIX if wide else "float32"  # (double values, or normal's log in double)
        if self.normal:
            # one workgroup draws in order, within lavapipe's loop budget: an even count a dispatch, so that no pair
            # is split, the next dispatch going on from the engine's state on the device
            for first in range(0, n, NORMAL_PER_DISPATCH):
                part = y.view(ITEMSIZE[y.dtype] * first, (min(NORMAL_PER_DISPATCH, n - first),))
                push = {**NO_ROWS, "y": part, "state": state, "seeded": self.seeded, "n": part.size,
                        "a": float(self.attrs.get("mean", 0.0)), "b": float(self.attrs.get("scale", 1.0)),
                        "y64": int(self.doubles)}
                call.dispatch(SHADER, dtype, {"mode": NORMAL}, push, (1, 1, 1), [state], [part, state])
            return
        low, high = np.float32(self.attrs.get("low", 0.0)), np.float32(self.attrs.get("high", 1.0))
        # (the distribution's b - a: in float, or for doubles in double in the shader)
        push = {**NO_ROWS, "y": y, "state": state, "seeded": self.seeded, "n": n, "a": float(low),
                "b": float(high) if self.doubles else float(high - low), "y64": int(self.doubles)}
        call.dispatch(SHADER, dtype if self.doubles else "float32", {"mode": UNIFORM}, push, grid_1d(n, WG), [state],
                      [y])
        call.dispatch(SHADER, "float32", {"mode": ADVANCE}, {**push, "n": n * (2 if self.doubles else 1)}, (1, 1, 1),
                      [], [state])


class Multinomial(Random):
    """Multinomial: `sample_size` classes a row of logits [batch, classes], drawn as the CPU EP draws them (its cdf and
    comparisons in double: declined on a device without shaderFloat64), int32 or int64."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if attrs.get("dtype", INT32) not in (INT32, INT64):
            return f"Multinomial of dtype {attrs.get('dtype')}"
        return None

    @classmethod
    def declines_on(cls, info, attrs: dict, input_types) -> str | None:
        return None if has_float64(info) else "Multinomial: its cdf is in double (the device has no shaderFloat64)"

    def compute(self, call) -> None:
        x = call.inputs[0]
        samples = int(self.attrs.get("sample_size", 1))
        if len(x.shape) != 2:
            raise UnsupportedError(f"Multinomial: input {x.shape} (the CPU EP takes [batch, classes])")
        batch, classes = x.shape
        for what, value in (("batch_size", batch), ("num_classes", classes), ("num_samples", samples)):
            if value < 1:
                raise UnsupportedError(f"Multinomial: {what} is < 1")
        # (lavapipe's count: each loop's leaving pass too; a sample its loop's step, its search and the search's
        # leaving: 2 classes and 16,382 samples were the most one invocation ran right)
        if 2 * (classes + 1) + samples * (classes.bit_length() + 2) > LOOP_BUDGET:
            raise UnsupportedError(f"Multinomial: {classes} classes and {samples} samples take one invocation too "
                                   "many loop steps")
        y64 = self.attrs.get("dtype", INT32) == INT64
        y = call.output(0, (batch, samples), "int64" if y64 else "int32")
        state, cdf = call.state(8), call.scratch((batch * classes,), "float64")
        push = {**NO_ROWS, "y": y, "state": state, "seeded": self.seeded, "n": batch, "a": 0.0, "b": 0.0, "x": x,
                "cdf": cdf, "classes": classes, "samples": samples, "y64": int(y64)}
        call.dispatch(SHADER, "float32" + FLOAT64_SUFFIX, {"mode": MULTINOMIAL}, push, grid_1d(batch, WG),
                      [x, state], [y, cdf])
        call.dispatch(SHADER, "float32", {"mode": ADVANCE}, {**push, "n": 2 * batch * samples}, (1, 1, 1),
                      [], [state])


def dropout_seed(seed: int | None) -> int:
    """The uint64 a training-mode Dropout's engine is seeded from, plus its runs before (the CPU EP's RandomGenerator
    of the `seed` attribute); unseeded nodes as the random ops' (engine_state)."""
    if seed is None:
        return PROCESS_SEED + next(_unseeded)
    return int(seed) & (2**64 - 1)


def draw_dropout(call, seed: int, ratio: float, x, y, mask) -> None:
    """Dropout in training mode, as the CPU EP draws it (random.comp MODE 4): a new engine each run seeded with `seed`
    plus the node's runs before (its state), element i kept where draw i + 1's uniform float is >= ratio: `mask`
    (scratch where the node has none), y = kept * x / (1 - ratio) in float."""
    state = call.state(8)
    if mask is None:
        mask = call.scratch(x.shape, "bool")
    push = {**NO_ROWS, "y": y, "state": state, "seeded": 1, "n": x.size, "x": x, "mask": mask,
            "seed": (seed & 0xFFFFFFFF, seed >> 32),
            "a": float(np.float32(ratio)), "b": float(np.float32(1) - np.float32(ratio))}
    call.dispatch(SHADER, (x.dtype, "bool"), {"mode": DROPOUT}, push, grid_1d(x.size, WG), [x, state], [y, mask])
    call.dispatch(SHADER, "float32", {"mode": ADVANCE}, {**push, "n": 1}, (1, 1, 1), [], [state])
