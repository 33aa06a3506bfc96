"""A shader's push-constant block, read from its SPIR-V by name: the one declaration of a kernel's parameters.

A kernel fills the block by member name (`PushLayout.encode`): each member's offset, type and array length come
from the compiled shader (glslang keeps OpMemberName), so Python and GLSL cannot drift apart, and a name the block
lacks, a member left out or a value that does not fit is an error naming the shader and the member.

The block's leading `uint64_t` members (and arrays of them) are the tensors' buffer device addresses: they take
a tensor or None (address 0) and are returned apart from the packed rest, because a plan patches them on replay
(vkep.ort.kernel, design.md "The replay contract"). Members the recorder fills itself (common.glsl GROUP_BASE) and
the EPILOGUE variant's operand (epilogue.glsl, given by vkep.kernels.epilogue) are members like the others.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from operator import itemgetter
from typing import NamedTuple

from vkep.gpu.shaders import _instructions, _string, _words

PUSH_CONSTANT_BYTES = 128  # the pipeline layout's range (Vulkan's minimum maxPushConstantsSize)
GROUP_BASE_NAME = "vkep_group_base"  # (common.glsl GROUP_BASE: written by the recorder, recorder.c)
GROUP_BASE_OFFSET = 116  # (recorder.c VKEP_GROUP_BASE_OFFSET, common.glsl GROUP_BASE)

# struct format of a scalar member: (OpTypeInt / OpTypeFloat, width, signed) → format character
_FORMATS = {("int", 8, 0): "B", ("int", 8, 1): "b", ("int", 16, 0): "H", ("int", 16, 1): "h",
            ("int", 32, 0): "I", ("int", 32, 1): "i", ("int", 64, 0): "Q", ("int", 64, 1): "q",
            ("float", 16, 0): "e", ("float", 32, 0): "f", ("float", 64, 0): "d", ("pointer", 64, 0): "Q"}


class PushError(ValueError):
    """Push-constant values that do not match the shader's block: a member it lacks, or one left out."""


class PushRangeError(PushError):
    """A push-constant value that does not fit its member's type (a size or attribute too large for the shader)."""


class PushMember(NamedTuple):
    """One member of a push-constant block: name, byte offset, struct format of one element, and how many
    elements (a vector's components times an array's length; 1 for a scalar)."""

    name: str
    offset: int
    format: str
    count: int

    @property
    def size(self) -> int:
        return struct.calcsize("<" + self.format) * self.count


def push_block(spirv: bytes) -> list[PushMember]:
    """The members of a SPIR-V module's push-constant block in offset order (empty without one). A member
    without a name (SPIR-V stripped of debug names) is called `member_N`."""
    types: dict[int, tuple] = {}  # id → (opcode, operands)
    offsets: dict[tuple[int, int], int] = {}  # (struct, member) → Offset
    member_names: dict[tuple[int, int], str] = {}
    strides: dict[int, int] = {}  # array type → ArrayStride
    constants: dict[int, int] = {}
    block = None
    for opcode, ops in _instructions(_words(spirv)):
        if opcode in (21, 22, 23, 28, 30, 32):  # OpTypeInt, Float, Vector, Array, Struct, Pointer
            types[ops[0]] = (opcode, ops[1:])
        elif opcode == 6:  # OpMemberName <struct> <member> "name"
            member_names[(ops[0], ops[1])] = _string(ops[2:])
        elif opcode == 43:  # OpConstant <type> <id> <value>
            constants[ops[1]] = ops[2]
        elif opcode == 71 and ops[1] == 6:  # OpDecorate <id> ArrayStride <n>
            strides[ops[0]] = ops[2]
        elif opcode == 72 and ops[2] == 35:  # OpMemberDecorate <struct> <member> Offset <n>
            offsets[(ops[0], ops[1])] = ops[3]
        elif opcode == 59 and ops[2] == 9:  # OpVariable <pointer type> <id> PushConstant
            block = ops[0]
    if block is None:
        return []

    def element(type_id: int) -> tuple[str, int]:
        """(format of the scalar, how many of them) of a member's type."""
        opcode, rest = types[type_id]
        if opcode == 21:
            return _FORMATS[("int", rest[0], rest[1])], 1
        if opcode == 22:
            return _FORMATS[("float", rest[0], 0)], 1
        if opcode == 32:  # a buffer reference (PhysicalStorageBuffer pointer)
            return "Q", 1
        if opcode in (23, 28):  # a vector, an array (each tightly packed in vkep's scalar blocks)
            fmt, n = element(rest[0])
            length = rest[1] if opcode == 23 else constants[rest[1]]
            if opcode == 28 and strides.get(type_id, struct.calcsize(fmt) * n) != struct.calcsize(fmt) * n:
                raise PushError("a push-constant array with padding between its elements (declare the block "
                                "`scalar`)")
            return fmt, n * length
        raise PushError("a push-constant member that is a struct (vkep's blocks hold scalars, vectors and arrays)")

    _, (_, struct_id) = types[block]
    members = []
    for m, t in enumerate(types[struct_id][1]):
        fmt, count = element(t)
        members.append(PushMember(member_names.get((struct_id, m), f"member_{m}"), offsets.get((struct_id, m), 0),
                                  fmt, count))
    return sorted(members, key=lambda member: member.offset)


def _getter(names: list[str]):
    if len(names) == 1:
        name = names[0]
        return lambda values: (values[name],)
    return itemgetter(*names) if names else (lambda values: ())


class PushLayout:
    """How a dispatch of one shader variant fills its push constants, from `push_block`: `encode` takes the
    members' values by name."""

    def __init__(self, shader: str, members: list[PushMember]):
        self.shader = shader
        self.members = [m for m in members if m.name != GROUP_BASE_NAME]
        self.names = frozenset(m.name for m in self.members)
        lead = 0  # the leading 64-bit unsigned members: tensor addresses
        while lead < len(self.members) and self.members[lead].format == "Q":
            lead += 1
        self.addresses = self.members[:lead]
        self.scalars = self.members[lead:]
        self.address_slots = sum(m.count for m in self.addresses)
        start = self.address_slots * 8
        fmt, at = "<", start
        for m in self.scalars:
            fmt += "x" * (m.offset - at) + f"{m.count}{m.format}"
            at = m.offset + m.size
        self._struct = struct.Struct(fmt)
        # each a function of the values giving a tuple of the members' (itemgetter: one value is not a tuple)
        self._get_addresses = _getter([m.name for m in self.addresses])
        self._get_scalars = _getter([m.name for m in self.scalars])
        self._plain_addresses = all(m.count == 1 for m in self.addresses)
        self._plain_scalars = all(m.count == 1 for m in self.scalars)
        self.bytes = at  # what a dispatch records (the group base, past it, is the recorder's)

    def encode(self, values: Mapping[str, object]) -> tuple[list, bytes]:
        """(the address members' values in order: a tensor or None each, arrays padded with None; the other
        members packed at their offsets from the end of the addresses). Every member must be given (an
        array may be given fewer elements: the rest are 0)."""
        # (every call not replayed encodes here: as many values as members, each found, is the same set)
        if len(values) != len(self.names):
            self._mismatch(values)
        try:
            addresses = list(self._get_addresses(values)) if self._plain_addresses else \
                self._flat(values, self.addresses, None)
            flat = self._get_scalars(values) if self._plain_scalars else self._flat(values, self.scalars, 0)
        except KeyError:
            self._mismatch(values)
        try:
            return addresses, self._struct.pack(*flat)
        except struct.error as exc:
            raise PushRangeError(self._out_of_range(values, exc)) from None

    def _flat(self, values: Mapping[str, object], members: list[PushMember], pad) -> list:
        """The members' values in order, each array's elements in its place (padded with `pad`)."""
        flat = []
        for m in members:
            value = values[m.name]
            if m.count == 1:
                flat.append(value)
                continue
            value = list(value)
            if len(value) > m.count:
                raise PushRangeError(f"{self.shader}: push constant {m.name} holds {m.count} values, given "
                                     f"{len(value)}")
            flat += value + [pad] * (m.count - len(value))
        return flat

    def pack(self, values: Mapping[str, object]) -> bytes:
        """The whole block's bytes where the addresses are given as numbers (device addresses; None: 0): for
        callers below the kernels, which hold raw addresses rather than tensors."""
        addresses, tail = self.encode(values)
        return struct.pack(f"<{len(addresses)}Q", *[a or 0 for a in addresses]) + tail

    def _mismatch(self, values: Mapping[str, object]):
        unknown = sorted(set(values) - self.names)
        missing = [m.name for m in self.members if m.name not in values]
        parts = ([f"no member {', '.join(unknown)}"] if unknown else []) + (
            [f"{', '.join(missing)} not given"] if missing else [])
        raise PushError(f"{self.shader}'s push constants: {'; '.join(parts)} (its block: "
                        f"{', '.join(m.name for m in self.members)})")

    def _out_of_range(self, values: Mapping[str, object], exc: struct.error) -> str:
        for m in self.scalars:
            one = struct.Struct("<" + m.format)
            value = values[m.name]
            for v in (list(value) if m.count > 1 else [value]):
                try:
                    one.pack(v)
                except struct.error:
                    return f"{self.shader}: push constant {m.name} = {v!r} does not fit its type ({m.format})"
        return f"{self.shader}: {exc}"
