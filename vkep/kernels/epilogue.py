"""A Conv, MatMul or Gemm with the elementwise nodes after it applied in its own last dispatch (a fused epilogue).

vkep/ort/fusion.py picks the groups at GetCapability (a producer whose output feeds only a tree of fusable
elementwise nodes) and hands each to ORT to fuse; Compile builds `FusedProducer`: the producer's own kernel, run
through `EpilogueCall`, which sends its dispatch that writes the output to the shader's EPILOGUE variant
(shaders/epilogue.glsl) with the steps as specialization constants. The steps are fused.comp's (`fused.Step`,
registers allocated by `fused.Program`), so a group computes what its nodes compute, bit for bit.

Registers: 0 the producer's value, 1 the operand (one tensor from outside: FULL, the output's shape; ROW, one
value per output channel (Conv) or row (MatMul, Gemm); COLUMN, one per column (MatMul, Gemm); SCALAR), 2 and 3
two scalar constants baked into the constants; the steps' results after them.
"""

from __future__ import annotations

import math
import struct

from vkep.kernels import manifest
from vkep.kernels.base import EPILOGUE_SUFFIX, Kernel, Tensor, UnsupportedError, implementation
from vkep.kernels.elementwise import OP_ADD
from vkep.kernels.fused import KIND_BINARY, KIND_UNARY, Program, Step

MAX_STEPS = 8
INPUTS = 4  # registers 0..3: value, operand, two constants
VALUE, OPERAND, CONSTANT_0, CONSTANT_1 = 0, 1, 2, 3
MODE_NONE, MODE_FULL, MODE_ROW, MODE_COLUMN, MODE_SCALAR = 0, 1, 2, 3, 4
SUFFIX = EPILOGUE_SUFFIX  # a dispatch's dtype with it: the shader's EPILOGUE variant (base.variant)
# the producers and the axis of their output a ROW operand runs along (COLUMN: the last one, MatMul and Gemm)
PRODUCERS = {"Conv": 1, "MatMul": -2, "Gemm": -2}



def operand_mode(out: tuple[int, ...] | list[int], operand: tuple[int, ...] | list[int], op: str) -> int | None:
    """How the epilogue reads an operand of this shape for a producer `op` whose output has shape `out` (None:
    it cannot: the operand would broadcast the output, or runs along an axis the producer's stores do not
    index)."""
    if math.prod(operand) == 1 and len(operand) <= len(out):
        return MODE_SCALAR
    if len(operand) > len(out) or len(out) < 2:
        return None
    padded = [1] * (len(out) - len(operand)) + list(operand)
    if padded == list(out):
        return MODE_FULL
    row_axis = PRODUCERS[op] % len(out)
    if all(d == 1 for k, d in enumerate(padded) if k != row_axis) and padded[row_axis] == out[row_axis]:
        return MODE_ROW
    if op != "Conv" and all(d == 1 for d in padded[:-1]) and padded[-1] == out[-1]:
        return MODE_COLUMN
    return None


class Epilogue:
    """The steps after a producer as epilogue.glsl's specialization constants (EPI_*)."""

    def __init__(self, steps: list[Step], mode: int, constants: tuple[float, float] = (0.0, 0.0)):
        if len(steps) > MAX_STEPS:
            raise UnsupportedError(f"an epilogue of {len(steps)} steps (epilogue.glsl takes {MAX_STEPS})")
        program = Program(INPUTS, steps, [INPUTS + len(steps) - 1])
        self.mode = mode
        self.constants = {"EPI_STEPS": len(steps), "EPI_MODE": mode, "EPI_OUT": program.output_registers,
                          "EPI_K0": _bits(constants[0]), "EPI_K1": _bits(constants[1]),
                          **program.step_constants("EPI_")}


def _bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


class EpilogueCall:
    """The Call a producer sees: its dispatch that writes output 0 runs the EPILOGUE variant with the operand's
    address first in its push constants; everything else passes through."""

    def __init__(self, call, inputs: list, op: str, epilogue: Epilogue, operand: Tensor | None, dtype: str):
        self._call, self.inputs, self._op, self._epilogue = call, inputs, op, epilogue
        self._operand, self._dtype = operand, dtype
        self.output_tensor: Tensor | None = None
        self.applied = False

    def __getattr__(self, name):
        return getattr(self._call, name)

    def output(self, index: int, shape: tuple[int, ...], dtype: str | None = None) -> Tensor:
        y = self._call.output(index, shape, dtype or self._dtype)
        if index == 0:
            self.output_tensor = y
        return y

    def dispatch(self, shader, dtype, constants, push, groups, reads, writes) -> None:
        if self.output_tensor is None or not writes or writes[0] is not self.output_tensor:
            return self._call.dispatch(shader, dtype, constants, push, groups, reads, writes)
        operand = self._operand
        if operand is not None and operand_mode(writes[0].shape, operand.shape, self._op) != self._epilogue.mode:
            # (fusion.py groups only shapes the graph declares in full, so this is another run's shapes)
            raise UnsupportedError(f"{self._op}'s epilogue reads an operand of shape {list(operand.shape)} as it "
                                   f"did not at Compile, for an output of shape {list(writes[0].shape)}")
        self.applied = True
        self._call.dispatch(shader, dtype + SUFFIX, {**constants, **self._epilogue.constants},
                            {"epilogue_operand": operand, **push}, groups, [*reads, *([operand] if operand else [])],
                            writes)


class FusedProducer(Kernel):
    """The kernel of a producer-rooted group (made by vkep/ort/fusion.py at Compile): the producer's kernel over
    its inputs, each the fused node's input k (an int) or a constant (a Tensor, uploaded once), with the
    epilogue in its last dispatch."""

    def __init__(self, spec, producer: Kernel, sources: list, epilogue: Epilogue, operand, dtype: str):
        super().__init__(spec, {}, 1, [])
        self.producer, self.sources, self.epilogue, self.operand, self.dtype = (producer, sources, epilogue,
                                                                                 operand, dtype)

    def _tensor(self, call, source) -> Tensor | None:
        if source is None or isinstance(source, Tensor):
            return source
        return call.inputs[source] if source < len(call.inputs) else None

    def compute(self, call) -> None:
        if not self.output_count:  # (a group whose value no one reads: ORT gives the fused node no output)
            return
        inputs = [self._tensor(call, s) for s in self.sources]
        operand = self._tensor(call, self.operand)
        wrapped = EpilogueCall(call, inputs, self.producer.spec.op, self.epilogue, operand, self.dtype)
        self.producer.compute(wrapped)
        y = wrapped.output_tensor
        if y is not None and y.size and not wrapped.applied:  # (every producer path ends in such a dispatch)
            raise RuntimeError(f"vkep: {self.producer.spec.op}'s last dispatch did not write its output: "
                               "the epilogue was not applied")


# the activations ORT's optimizer fuses into a Conv or a Gemm: the ONNX op whose unary.comp code computes each,
# and how many parameters (the step's alpha and beta) it takes
ACTIVATIONS = {"Relu": ("Relu", 0), "Tanh": ("Tanh", 0), "Sigmoid": ("Sigmoid", 0), "LeakyRelu": ("LeakyRelu", 1),
               "Clip": ("Clip", 2), "HardSigmoid": ("HardSigmoid", 2)}


class WithActivation(FusedProducer):
    """A com.microsoft node ORT's optimizer saves for a producer with its activation (FusedConv, FusedGemm): the
    producer's vkep kernel with the activation, and for FusedConv an Add of Z before it (MODE_FULL), as its
    epilogue. ORT's CPU EP computes Sigmoid and Tanh with MLAS's approximations, so results agree within float
    tolerance, not bit for bit."""

    PRODUCER: tuple[str, int, frozenset[str]]  # (ONNX op, the version it is, the attributes it takes)
    TAKES_Z = False

    @classmethod
    def activation_params(cls, attrs: dict) -> list[float]:
        raise NotImplementedError

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        activation = attrs.get("activation")
        if activation and activation not in ACTIVATIONS:
            return f"{spec.op} with activation {activation!r}"
        if activation and len(cls.activation_params(attrs)) < ACTIVATIONS[activation][1]:
            return f"{spec.op}'s {activation} takes {ACTIVATIONS[activation][1]} parameters"
        producer = cls._producer_spec()
        return implementation(producer).declines(producer, attrs, cls.PRODUCER[1], input_ranks[:3], input_types[:3])

    @classmethod
    def _producer_spec(cls):
        op, version, _ = cls.PRODUCER
        return next(s for s in manifest.registered() if s.op == op and s.domain == "" and version in s.since)

    def __init__(self, spec, attrs: dict, since_version: int, input_types: list[str]):
        producer_spec = self._producer_spec()
        producer = implementation(producer_spec)(producer_spec, {k: v for k, v in attrs.items()
                                                                 if k in self.PRODUCER[2]},
                                                 self.PRODUCER[1], input_types[:3])
        steps, value = [], VALUE
        has_z = self.TAKES_Z and len(input_types) > 3 and bool(input_types[3])
        if has_z:  # Y = activation(conv + Z)
            steps.append(Step(KIND_BINARY, OP_ADD, (value, OPERAND)))
            value = INPUTS
        activation = attrs.get("activation")
        if activation:
            op, count = ACTIVATIONS[activation]
            params = [float(p) for p in self.activation_params(attrs)[:count]] + [0.0, 0.0]
            code = next(s.constants["op"] for s in manifest.registered() if s.op == op and s.domain == "")
            steps.append(Step(KIND_UNARY, code, (value,), params[0], params[1]))
        producer.output_count = 1
        super().__init__(spec, producer, [0, 1, 2], Epilogue(steps, MODE_FULL if has_z else MODE_NONE) if steps
                         else None, 3 if has_z else None, input_types[0])

    def compute(self, call) -> None:
        if self.epilogue is None:  # (neither Z nor an activation: the producer itself)
            return self.producer.compute(call)
        return super().compute(call)

    # what the runtime sets on a kernel, the producer inside needs too
    device_info = property(lambda self: self.producer.device_info,
                           lambda self, value: setattr(self.producer, "device_info", value))
    declared_inputs = property(lambda self: self.producer.declared_inputs,
                               lambda self, value: setattr(self.producer, "declared_inputs",
                                                           None if value is None else value[:3]))

    def pack(self, index: int, weight):
        return self.producer.pack(index, weight)


class FusedConv(WithActivation):
    """com.microsoft FusedConv: activation(Conv(X, W, B) + Z), the activation's parameters in activation_params."""

    PRODUCER = ("Conv", 11, frozenset({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}))
    TAKES_Z = True

    @classmethod
    def activation_params(cls, attrs: dict) -> list[float]:
        return list(attrs.get("activation_params") or [])


class FusedGemm(WithActivation):
    """com.microsoft FusedGemm: activation(Gemm(A, B, C)), the activation's parameters activation_alpha and
    activation_beta."""

    PRODUCER = ("Gemm", 13, frozenset({"alpha", "beta", "transA", "transB"}))

    @classmethod
    def activation_params(cls, attrs: dict) -> list[float]:
        return [attrs.get("activation_alpha", 0.0), attrs.get("activation_beta", 0.0)]
