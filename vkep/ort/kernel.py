"""OrtKernelImpl: one per node. Compute enters Python once per node (see the C trampoline)."""

from __future__ import annotations

import itertools
import math
import struct
import threading
from collections.abc import Mapping

import numpy as np

from vkep.gpu import hazards, transfer
from vkep.gpu.external import InPlace
from vkep.gpu.stream import BATCH_COMMANDS, WaitLimitExceeded, waiting
from vkep.kernels.base import (
    MAX_ELEMENTS,
    Tensor,
    UnsupportedError,
    encode_dispatch,
    implementation,
    tensor_bytes,
    variant,
)
from vkep.kernels.control_flow import ControlFlow
from vkep.ort import abi, api, declared, warmup
from vkep.ort.api import callback, status_callback
from vkep.ort.control_flow import control_flow_kernel
from vkep.ort.ep import EPS, KERNEL_STATES
from vkep.ort.memory import Allocator, allocators_of, default_allocator, stream_of

KERNELS: dict[int, KernelInstance] = {}
PYTHON_COMPUTES = [0]  # node executions that entered Python (the rest replayed natively): vkep.stats()
SCRATCH_COMPUTES = [0]  # of those, the ones that took scratch memory
PYTHON_FINISHES = [0]  # replayed nodes whose wait for their work went on in Python (_kernel_finish)
_ids = itertools.count(1)
_states = itertools.count(1)  # (each kernel state's tag in the weight cache)
_ids_lock = threading.Lock()
RANK = 8  # VKEP_MAX_RANK of the trampoline's io struct


class KernelInstance:
    """The ORT-facing half of a node's kernel: its C struct, its device, its pipelines."""

    def __init__(self, device, spec, impl, node_name: str):
        lib, ffi = api.lib, api.ffi
        self.device = device
        self.gpu = device.gpu
        self.spec = spec
        self.impl = impl
        self.node_name = node_name
        self.label = f"{spec.op} node {node_name!r}"  # (how waits, errors and logs name it)
        self.reports_errors = False  # its shaders may set the device's error word (an index out of range)
        self.cpu_inputs = frozenset(spec.cpu_inputs)
        self.cpu_outputs = frozenset(spec.cpu_outputs)
        self.pipelines: dict[tuple, object] = {}
        self.planned: set | None = None  # its pipelines as run dry once its plan was final (warmup.start_ahead)
        self.plan_lock = threading.Lock()
        self.allocator = None  # the vkep allocator ORT takes this node's outputs from, once seen
        self.packed: dict[int, tuple] = {}  # input index → (PackedWeight, Tensor)
        # bytes a shader reads (Call.persistent), or a fused group's constant k → their PackedWeight
        self.persistent: dict[object, object] = {}
        self.weight_shapes: dict[int, tuple] = {}  # input index → the shape of the weight it packed (profiles)
        # outputs the host reads in place (another EP's node, a graph output): the node's GPU work is
        # complete when its Compute returns (see ep._note_host_readers); but the main graph's outputs that only
        # the application reads, complete when the run ends (ep.on_run_end waits)
        self.host_read_outputs: frozenset[int] = frozenset()
        self.run_end_outputs: frozenset[int] = frozenset()
        self.subgraph_outputs = None  # the SubgraphOutputs it makes some of (subgraph_waits.py)
        self.prepack_cache = "vkep"  # or "ort": ORT's shared pre-packed weight cache, where it offers one
        self.wait_limit: float | None = None  # the EP option wait_limit_s: seconds a wait may take
        self.shared_layouts: dict[int, tuple] = {}  # input index → (shape, dtype) of a weight ORT shares
        self.held_imports: list = []  # host memory ORT's cache shares that the device reads in place
        self.capture = None  # the CapturedGraph its session is capturing, if any (capture.py)
        self.ep = None  # its session's Ep (whose `profilers` say whether ORT profiles it now)
        # the dispatches of its latest Python execution (KernelCall.ops), when they read no staged host input and
        # no scratch memory: they can be recorded again while its inputs and outputs stay allocated (`vkep dev`
        # binds them, and times the dispatches)
        self.last_ops: list[tuple] = []
        with _ids_lock:
            self.id = next(_ids)
        self.struct = api.new_struct("vkep_kernel")
        s = self.struct
        s.base.ort_version_supported = lib.vkep_api_version()
        s.base.flags = 0
        s.base.Compute = ffi.cast("OrtStatus*(*)(OrtKernelImpl*, OrtKernelContext*)", lib.vkep_compute_fn)
        s.base.Release = lib.py_kernel_release
        s.base.PrePackWeight = lib.py_kernel_prepack
        s.base.SetSharedPrePackedWeight = lib.py_kernel_set_shared
        s.id = self.id
        # ORT gives no stream where vkep memory is host memory to it (see factory.memory_device_type)
        s.recorder = ffi.cast("void*", self.gpu.default_stream().recorder_address)
        KERNELS[self.id] = self

    @property
    def import_host(self) -> bool:
        """Whether host memory ORT hands over is read in place (VK_EXT_external_memory_host), as its session sees
        the device: the EP option host_import=0 reads it as absent (PhysicalDeviceInfo.restricted)."""
        info = self.impl.device_info
        return info is None or info.features.get("hostMemoryImport", False)

    def hold_constant(self, k: int, array: np.ndarray, tag: str = "as-is", dtype: str | None = None) -> Tensor:
        """Constant k of a fused node (ORT passes the node none: drop_constant_initializers), uploaded once into
        the device's content-keyed weight cache, keyed as PrePackWeight keys a weight (tag, element type, shape),
        and held for this kernel's life; the tensor the kernel reads it as (`dtype`: the array's type if None)."""
        shape, dtype = tuple(array.shape), dtype or str(array.dtype)
        weight = self.persistent[("constant", k)] = self.gpu.weights.acquire(array.tobytes(), f"{tag}:{dtype}:{shape}")
        return Tensor(weight.address, shape, dtype, Tensor.PERSISTENT)

    def states(self) -> list[tuple[int, int]]:
        """(device address, bytes) of the memory its shaders keep from run to run (Call.state), made so far."""
        return [(weight.address, weight.nbytes) for key, weight in self.persistent.items()
                if isinstance(key, tuple) and key[0] == "state"]

    def invalidate_plan(self) -> None:
        """Its next execution goes through Python (which may record a new plan)."""
        with self.plan_lock:
            s = self.struct
            s.plan_seq += 1  # odd: being written (the trampoline does not replay it)
            s.plan.valid = 0
            s.plan_seq += 1

    def pipeline(self, shader: str, dtype: str, constants: Mapping[str, int | float]):
        key = (shader, dtype, tuple(constants.items()))
        found = self.pipelines.get(key)
        if found is None:
            found = self.pipelines[key] = self.gpu.pipelines.get(shader, variant(dtype), constants)
        return found


class KernelCall:
    """One execution of a node: what `vkep.kernels` sees as `Call`.

    It also writes down what the kernel did (outputs, dispatches, aliases). When that is expressible
    in terms of the node's inputs and outputs, it becomes the node's plan, which the C trampoline
    replays for later calls with the same input shapes without entering Python.
    """

    __slots__ = ("kernel", "ctx", "inputs", "stream", "outputs", "output_addresses", "ops", "aliases", "replayable",
                 "foreign_outputs", "host", "cpu_values", "took_scratch", "scratch_chunks", "device_scratch", "bases",
                 "loop_first", "loop")

    def __init__(self, kernel: KernelInstance, ctx, inputs, stream, replayable: bool):
        self.kernel = kernel
        self.ctx = ctx
        self.inputs = inputs
        self.stream = stream
        self.outputs: list[tuple[tuple[int, ...], int]] = []  # (shape, bytes) per output, in creation order
        self.output_addresses: list[int] = []  # the pointers ORT gave them
        self.ops: list[tuple] = []
        self.aliases: list[tuple[int, int]] = []
        self.replayable = replayable
        self.foreign_outputs: list[tuple[int, int, int]] = []  # (staging address, host pointer, bytes)
        self.host: InPlace | None = None  # host memory the device uses in place (made on first use)
        self.cpu_values: dict[int, bytes] = {}  # CPU input index → the bytes the kernel read (the plan's key)
        self.took_scratch = False
        self.scratch_chunks: list[tuple[Allocator, int, int]] = []  # (allocator, pointer, bytes) of scratch k
        self.device_scratch: list[int] = []  # device_pool chunks of scratch taken before the node had outputs
        # the address each io code stands for in this call: a plan stores tensors as (code, offset from it)
        self.bases = {t.io: t.addr for t in inputs if t is not None and t.io is not None and t.io >= 0}
        self.loop_first = 0
        self.loop: tuple[int, int, int, str] | None = None  # (first op, ops a step, steps, counter): end_loop

    def output(self, index: int, shape: tuple[int, ...], dtype: str | None = None) -> Tensor:
        dtype = dtype or self.inputs[0].dtype
        nbytes = tensor_bytes(math.prod(shape), dtype)
        kernel = self.kernel
        if index not in kernel.cpu_outputs:
            _reserve(kernel, nbytes)
        ptr = api.ffi.new("uint64_t*")
        dims = struct.pack(f"<{len(shape)}q", *shape)
        api.check(api.lib.vkep_output(self.ctx, index, dims, len(shape), ptr))
        if index != len(self.outputs):
            self.replayable = False  # plans create outputs in index order
        self.outputs.append((tuple(shape), nbytes))
        self.output_addresses.append(ptr[0])
        if ptr[0] and index not in kernel.cpu_outputs and kernel.allocator is None:
            kernel.allocator = _owner(kernel, ptr[0])
        addr = ptr[0]
        if addr and index not in kernel.cpu_outputs:
            found = kernel.gpu.memory.spans.find(addr)
            if found:
                addr = found[0].device_address + found[1]
            else:  # host memory ORT handed over as it is: written in place, or computed into staging
                self.replayable = False
                if kernel.import_host and kernel.gpu.host_import_alignment:
                    return Tensor(self.in_place(addr, nbytes), tuple(shape), dtype, None)
                pool = kernel.gpu.memory.host_pool
                staging = pool.alloc(max(nbytes, 1))
                self.foreign_outputs.append((staging, addr, nbytes))
                return Tensor(kernel.gpu.memory.device_address(staging), tuple(shape), dtype, None)
        self.bases[-1 - index] = addr
        return Tensor(addr, tuple(shape), dtype, -1 - index)

    def in_place(self, pointer: int, nbytes: int, stream=None) -> int:
        """The device address of host memory ORT handed over as it is (see gpu.external.InPlace)."""
        if self.host is None:
            self.host = InPlace(self.kernel.gpu, self.kernel.import_host)
        return self.host.address(pointer, nbytes, stream)

    def finish_host_work(self) -> None:
        """Before Compute returns: host memory used in place is released, staged host outputs are
        copied back, and outputs the host reads are complete; so the node's work must be done."""
        kernel = self.kernel
        if self.host is not None:
            self.host.recorded(self.stream)
        for index in kernel.host_read_outputs | kernel.run_end_outputs:
            if index < len(self.outputs):
                transfer.count_elided(kernel.gpu, self.outputs[index][1])
        if kernel.capture is not None and ((self.host and (self.host.imports or self.host.staged))
                                           or self.foreign_outputs):
            kernel.capture.host_memory_used(kernel.label)
        if not ((self.host and self.host.imports) or self.foreign_outputs or kernel.host_read_outputs):
            return
        try:
            self.stream.finish()
        except WaitLimitExceeded:
            if (self.host and self.host.imports) or self.foreign_outputs:
                # host memory ORT owns is still in the device's hands: the error waits for it
                waiting.limit = None
                self.stream.finish()
            raise
        finally:
            if self.host is not None:
                self.host.done(self.stream)
        if hazards.ENABLED:  # the wait above must have covered every output the host reads
            for index in kernel.host_read_outputs:
                if index < len(self.outputs) and self.output_addresses[index]:
                    hazards.check_host_access(kernel.gpu, self.output_addresses[index], self.outputs[index][1],
                                              False, f"output {index} of {kernel.node_name}, read on the host")
        gpu = kernel.gpu
        for staging, host, nbytes in self.foreign_outputs:
            if nbytes:
                api.ffi.memmove(api.ffi.cast("void*", host), api.ffi.cast("void*", gpu.memory.host_pointer(staging)),
                                nbytes)
            gpu.memory.host_pool.free(staging)

    def error_word(self) -> Tensor:
        self.kernel.reports_errors = True  # (an error the run's end finds names the nodes that may have set it)
        return Tensor(self.kernel.gpu.error_word, (1,), "int32", Tensor.PERSISTENT)

    def dispatch(self, shader, dtype, constants, push, groups, reads, writes) -> None:
        for t in (*reads, *writes):
            if t.size > MAX_ELEMENTS:
                raise UnsupportedError(f"a tensor of {t.size:,} elements {list(t.shape)}: vkep's shaders index "
                                       f"tensors with 32-bit signed indices (at most {MAX_ELEMENTS:,} elements)")
        pipeline = self.kernel.pipeline(shader, dtype, constants)
        addresses, push, spans = encode_dispatch(self.kernel.gpu.pipelines.push_layout(pipeline), push, reads, writes)
        self.stream.dispatch(pipeline, push, groups, spans, len(reads), len(writes))
        self.ops.append((pipeline, addresses, push, groups, reads, writes))

    def begin_loop(self) -> None:
        self.loop_first = len(self.ops)

    def end_loop(self, times: int, counter: str) -> None:
        body, rest = divmod(len(self.ops) - self.loop_first, times) if times > 1 else (0, 1)
        self.loop = (self.loop_first, body, times, counter) if body and not rest else None

    def _plan_loop(self) -> tuple[int, int, int, list[int]] | None:
        """(first op, ops a step, steps, each step op's counter offset or -1) where the dispatches end_loop named
        are one step repeated, equal but for the counter (one more each step), else None."""
        if self.loop is None:
            return None
        first, body, times, counter = self.loop
        offsets = []
        for pipeline, *_ in self.ops[first:first + body]:
            member = next((m for m in self.kernel.gpu.pipelines.push_layout(pipeline).members if m.name == counter),
                          None)
            offsets.append(member.offset if member is not None and member.format == "I" and member.count == 1
                           else -1)

        def tensors(ts) -> list:
            return [(t.addr, t.io, t.nbytes) if t is not None else None for t in ts]

        for step in range(1, times):
            for b, at in enumerate(offsets):
                pipeline, addresses, push, groups, reads, writes = self.ops[first + b]
                other = self.ops[first + step * body + b]
                if (other[0] != pipeline or other[3] != groups or tensors(other[1]) != tensors(addresses)
                        or tensors(other[4] + other[5]) != tensors(reads + writes) or len(other[2]) != len(push)):
                    return None
                if at < 0:
                    if other[2] != push:
                        return None
                elif (other[2][:at] != push[:at] or other[2][at + 4:] != push[at + 4:]
                      or struct.unpack_from("<I", other[2], at)[0] != struct.unpack_from("<I", push, at)[0] + step):
                    return None
        return first, body, times, offsets

    def scratch(self, shape: tuple[int, ...], dtype: str) -> Tensor:
        """A chunk of the allocator the node's outputs come from, freed once the call is recorded (as a plan
        does on replay: VKEP_IO_SCRATCH); before the node has outputs, device memory freed after the work."""
        if not self.took_scratch:
            self.took_scratch = True
            SCRATCH_COMPUTES[0] += 1
        nbytes = max(tensor_bytes(math.prod(shape), dtype), 1)
        memory = self.kernel.gpu.memory
        allocator, k = self.kernel.allocator, len(self.scratch_chunks)
        pointer = allocator.take(nbytes, f"scratch memory of {self.kernel.node_name!r}") if allocator else 0
        if not pointer:
            self.replayable = False  # a plan would keep this call's address
            address = memory.device_pool.alloc(nbytes)
            self.device_scratch.append(address)  # (given back once the call is recorded: free_scratch)
            return Tensor(memory.device_address(address), tuple(shape), dtype, None)
        self.scratch_chunks.append((allocator, pointer, nbytes))
        span, offset = memory.spans.find(pointer)
        addr = self.bases[Tensor.SCRATCH + k] = span.device_address + offset
        if k >= lib_const("VKEP_PLAN_SCRATCH"):
            self.replayable = False
        return Tensor(addr, tuple(shape), dtype, Tensor.SCRATCH + k)

    def free_scratch(self) -> None:
        """Scratch chunks back to their allocator once the work using them is recorded: the device's one
        stream puts a barrier before any later command that touches them (the replay contract)."""
        for allocator, pointer, _ in self.scratch_chunks:
            allocator.free(pointer)
        self.scratch_chunks.clear()
        for address in self.device_scratch:  # (device memory: back once the recorded work completed)
            self.stream.release_after(self.kernel.gpu.memory.device_pool, address)
        self.device_scratch.clear()

    def copy(self, src: Tensor, dst: Tensor) -> None:
        if src.addr == dst.addr:
            if src.io is not None and dst.io is not None and src.io >= 0 > dst.io:
                self.aliases.append((-1 - dst.io, src.io))
            return
        self.replayable = False
        transfer.device_copy(self.kernel.gpu, src.addr, dst.addr, src.nbytes, self.stream)

    def read_host(self, tensor: Tensor) -> bytes:
        """The bytes of a CPU input (declared in `cpu_inputs`)."""
        if self.kernel.gpu.memory.spans.find(tensor.addr):
            # vkep memory ORT handed over as host memory (a unified device): its producer finished its
            # work before returning (ep._note_host_readers); the wait covers producers outside that rule
            hazards.check_host_access(self.kernel.gpu, tensor.addr, tensor.nbytes, False,
                                      f"{self.kernel.node_name} reads a CPU input")
            self.kernel.gpu.synchronize()
        data = api.ffi.buffer(api.ffi.cast("char*", tensor.addr), tensor.nbytes)[:]
        if tensor.io is not None and tensor.io >= 0:
            self.cpu_values[tensor.io] = data
        return data

    def write_host(self, tensor: Tensor, data: bytes) -> None:
        """Fill a CPU output (declared in `cpu_outputs`)."""
        self.replayable = False
        if len(data) > tensor.nbytes:
            raise ValueError(f"{len(data)} bytes into a {tensor.nbytes}-byte tensor")
        if data and self.kernel.gpu.memory.spans.find(tensor.addr):
            # reused vkep memory: recorded work may still read what was there before
            self.kernel.gpu.synchronize()
        if data:
            api.ffi.memmove(api.ffi.cast("void*", tensor.addr), data, len(data))

    def persistent(self, data: bytes) -> Tensor:
        kernel = self.kernel
        weight = kernel.persistent.get(data)
        if weight is None:
            weight = kernel.persistent[data] = kernel.gpu.weights.acquire(data, "persistent")
        return Tensor(weight.address, (len(data),), "uint8", Tensor.PERSISTENT)

    def state(self, nbytes: int) -> Tensor:
        kernel = self.kernel
        weight = kernel.persistent.get(("state", nbytes))
        if weight is None:  # (zeroed, under a tag of its own: never shared)
            weight = kernel.gpu.weights.acquire(bytes(nbytes), f"state:{next(_states)}")
            kernel.persistent[("state", nbytes)] = weight
        return Tensor(weight.address, (nbytes,), "uint8", Tensor.PERSISTENT)

    def fills_state(self) -> bool:
        self.replayable = False
        return True

    def upload(self, host: Tensor, dst: Tensor) -> None:
        self.replayable = False
        transfer.upload(self.kernel.gpu, host.addr, dst.addr, host.nbytes)

    def download(self, src: Tensor, host: Tensor) -> None:
        self.replayable = False
        transfer.download(self.kernel.gpu, src.addr, host.addr, src.nbytes)

    def read_device(self, tensor: Tensor) -> bytes:
        self.replayable = False  # (the values decide what the call records)
        return transfer.read(self.kernel.gpu, tensor.addr, tensor.nbytes)

    def _slot(self, t: Tensor) -> tuple[int, int] | None:
        """(io code, offset) of a tensor in the plan: io tensors (views included) are re-addressed on replay
        from their code's address, persistent ones are absolute; None for an address outside its code's."""
        if t.io == Tensor.PERSISTENT:
            return t.io, t.addr
        base = self.bases.get(t.io)
        return (t.io, t.addr - base) if base is not None and t.addr >= base else None

    def save_plan(self, io) -> None:
        """Write what this call did into the kernel's C plan (see vkep_replay in the trampoline)."""
        ffi = api.ffi
        kernel = self.kernel
        loop = self._plan_loop()  # (a recurrence's steps: the plan holds one and repeats it)
        ops = self.ops if loop is None else self.ops[:loop[0] + loop[1]] + self.ops[loop[0] + loop[1] * loop[2]:]
        if (not self.replayable or len(ops) > lib_const("VKEP_PLAN_OPS") or len(self.ops) > BATCH_COMMANDS
                or len(self.outputs) > lib_const("VKEP_PLAN_OUTPUTS") or len(self.aliases) > len(self.outputs)):
            return  # (a replay records all its dispatches into one batch: vkep_ready)
        slots = lib_const("VKEP_PLAN_SLOTS")
        slots_of = {}  # tensor → (io code, offset) in the plan
        for _, addresses, push, _, reads, writes in ops:
            tensors = [t for t in addresses + reads + writes if t is not None]
            if (len(addresses) > slots or len(reads) + len(writes) > slots or len(push) > 128
                    or any(t.io is None or t.io in kernel.cpu_inputs for t in tensors)):
                return
            for t in tensors:
                slot = slots_of[id(t)] = self._slot(t)
                if slot is None:
                    return
        if self.scratch_chunks and any(a is not kernel.allocator for a, _, _ in self.scratch_chunks):
            return
        if io.n_inputs > lib_const("VKEP_PLAN_IO"):  # (a plan keys on at most that many inputs)
            return
        # every CPU input present was read through read_host, and its bytes fit the plan: they key it
        present = [i for i in kernel.cpu_inputs if i < io.n_inputs and io.types[i]]
        if (any(i not in self.cpu_values for i in present)
                or sum(len(self.cpu_values[i]) for i in present) > lib_const("VKEP_PLAN_CPU_BYTES")):
            return
        with kernel.plan_lock:
            s = kernel.struct
            s.plan_seq += 1  # odd: being written
            plan = s.plan
            plan.valid = 0
            plan.n_inputs = io.n_inputs
            ffi.memmove(plan.types, io.types, 4 * io.n_inputs)
            ffi.memmove(plan.ranks, io.ranks, 4 * io.n_inputs)
            ffi.memmove(plan.dims, io.dims, ffi.sizeof(plan.dims))
            plan.n_outputs = len(self.outputs)
            plan.out_cache = kernel.allocator.struct.cache if kernel.allocator is not None else ffi.NULL
            plan.finish = 1 if kernel.host_read_outputs else 0
            plan.error_word = ffi.cast("uint32_t**", kernel.gpu.error_word_slot)
            plan.elided = ffi.cast("uint64_t*", kernel.gpu.native_elided_address)  # (as finish_host_work counts)
            read = [nbytes for j, (_, nbytes) in enumerate(self.outputs)
                    if j in kernel.host_read_outputs or j in kernel.run_end_outputs]  # (elided copies, counted)
            plan.finish_count, plan.finish_bytes = len(read), sum(read)
            plan.cpu_mask, offset = 0, 0
            for i in present:
                data = self.cpu_values[i]
                plan.cpu_mask |= 1 << i
                plan.cpu_offset[i], plan.cpu_len[i] = offset, len(data)
                ffi.memmove(plan.cpu_values + offset, data, len(data))
                offset += len(data)
            for j, (shape, nbytes) in enumerate(self.outputs):
                plan.out_bytes[j] = nbytes
                plan.out_rank[j] = len(shape)
                for d, size in enumerate(shape):
                    plan.out_dims[j * RANK + d] = size
            plan.n_scratch = len(self.scratch_chunks)
            for k, (_, _, nbytes) in enumerate(self.scratch_chunks):
                plan.scratch_bytes[k] = nbytes
            plan.n_alias = len(self.aliases)
            for a, (out, inp) in enumerate(self.aliases):
                plan.alias_out[a] = out
                plan.alias_in[a] = inp
            plan.n_ops = len(ops)
            plan.loop_first, plan.loop_ops, plan.loop_times = loop[:3] if loop else (0, 0, 1)
            for o in range(len(ops)):
                in_step = loop is not None and loop[0] <= o < loop[0] + loop[1]
                plan.loop_counter[o] = loop[3][o - loop[0]] if in_step else -1
            for o, (pipeline, addresses, push, groups, reads, writes) in enumerate(ops):
                op = plan.ops[o]
                op.pipeline = int(ffi.cast("uintptr_t", pipeline))
                op.push_size = len(push)
                ffi.memmove(op.push, push, len(push))
                op.n_addr = len(addresses)
                op.n_reads, op.n_writes = len(reads), len(writes)
                op.groups = list(groups)
                for k, t in enumerate(addresses):
                    op.addr_io[k], op.addr_offset[k] = slots_of[id(t)] if t is not None else (Tensor.PERSISTENT, 0)
                for k, t in enumerate(reads + writes):
                    op.span_io[k], op.span_offset[k] = slots_of[id(t)]
                    op.span_len[k] = t.nbytes
            plan.valid = 1
            s.plan_seq += 1


def _reserve(kernel: KernelInstance, nbytes: int) -> None:
    """Allocate an output's memory before ORT asks for it: ORT does not check an allocator's result,
    so running out of memory must surface here, as an error status, not as a NULL."""
    allocator = kernel.allocator or default_allocator(kernel.device)
    if allocator is not None and nbytes:
        allocator.reserve(nbytes, f"an output of {kernel.node_name!r}")


def _owner(kernel: KernelInstance, ptr: int):
    return next((a for a in allocators_of(kernel.device) if a.owns(ptr)), None)




def lib_const(name: str) -> int:
    return getattr(api.lib, name)


def _read_attributes(info, spec, strings: dict | None) -> dict:
    """The node's attributes the manifest names; STRINGS ones come from `strings`, read by GetCapability
    (ORT's kernel info has no reader for them): without it the node cannot be built."""
    lib, ffi = api.lib, api.ffi
    attrs = {}
    for attr in spec.attributes:
        name = attr.name.encode()
        if attr.kind == "strings":
            if strings is None or attr.name not in strings:
                raise api.OrtError(f"{spec.op}: attribute {attr.name!r} was not read when the graph was "
                                   "partitioned", api.ORT_FAIL)
            attrs[attr.name] = attr.default if strings[attr.name] is None else strings[attr.name]
            continue
        try:
            if attr.kind == "int":
                out = ffi.new("int64_t*")
                api.check(lib.ort_KernelInfoGetAttribute_int64(info, name, out))
                value = out[0]
            elif attr.kind == "float":
                out = ffi.new("float*")
                api.check(lib.ort_KernelInfoGetAttribute_float(info, name, out))
                value = out[0]
            elif attr.kind == "tensor":
                value = _tensor_attribute(info, name)
            elif attr.kind == "string":
                size = ffi.new("size_t*", 0)
                api.check(lib.ort_KernelInfoGetAttribute_string(info, name, ffi.NULL, size))
                buf = ffi.new("char[]", size[0])
                api.check(lib.ort_KernelInfoGetAttribute_string(info, name, buf, size))
                value = ffi.string(buf).decode()
            else:
                fn = (lib.ort_KernelInfoGetAttributeArray_int64 if attr.kind == "ints"
                      else lib.ort_KernelInfoGetAttributeArray_float)
                ctype = "int64_t[]" if attr.kind == "ints" else "float[]"
                size = ffi.new("size_t*", 0)
                api.check(fn(info, name, ffi.NULL, size))
                buf = ffi.new(ctype, size[0])
                api.check(fn(info, name, buf, size))
                value = declared.c_list(buf, size[0], implementation(spec).array_attributes)
        except api.OrtError:
            if attr.default is None and not attr.optional:
                raise api.OrtError(f"{spec.op}: required attribute {attr.name!r} is missing",
                                   api.ORT_INVALID_ARGUMENT) from None
            value = attr.default
        attrs[attr.name] = value
    return attrs


def _tensor_attribute(info, name: bytes) -> np.ndarray:
    """A TENSOR attribute (e.g. ConstantOfShape's value) as a numpy array."""
    lib, ffi = api.lib, api.ffi
    value = ffi.new("OrtValue**")
    api.check(lib.ort_KernelInfoGetAttribute_tensor(info, name, lib.ort_default_allocator(), value))
    try:
        return declared.ortvalue_array(value[0])
    finally:
        lib.ort_ReleaseValue(value[0])


def _node_name(info) -> str:
    ffi = api.ffi
    size = ffi.new("size_t*", 0)
    api.check(api.lib.ort_KernelInfo_GetNodeName(info, ffi.NULL, size))
    buf = ffi.new("char[]", size[0])
    api.check(api.lib.ort_KernelInfo_GetNodeName(info, buf, size))
    return ffi.string(buf).decode()


@status_callback("py_kernel_create")
def _kernel_create(state, info, out):
    lib, ffi = api.lib, api.ffi
    device, spec, device_info = KERNEL_STATES[api.address(state)]
    since = ffi.new("int*")
    api.check(lib.ort_KernelInfo_GetOperatorSinceVersion(info, since))
    count = ffi.new("size_t*")
    api.check(lib.ort_KernelInfo_GetInputCount(info, count))
    input_types = [abi.ELEMENT_TYPES.get(lib.ort_KernelInfo_InputElementType(info, i), "") for i in range(count[0])]
    cls = implementation(spec)
    if issubclass(cls, ControlFlow):
        out[0] = control_flow_kernel(device, spec, info, device_info.features.get("hostMemoryImport", False))
        return
    outputs = ffi.new("size_t*")
    api.check(lib.ort_KernelInfo_GetOutputCount(info, outputs))
    output_names = _value_names(info, outputs[0])
    ep_ptr = ffi.new("const OrtEp**")
    api.check(lib.ep_KernelInfo_GetEp(info, ep_ptr))
    ep = EPS.get(api.address(ep_ptr[0]))
    strings = ep.node_strings.get(output_names) if ep is not None else None
    try:
        impl = cls(spec, _read_attributes(info, spec, strings), since[0], input_types)
    except UnsupportedError as exc:  # an invalid attribute: the session is not created, and says which node
        raise UnsupportedError(f"node {_node_name(info)!r}: {exc}") from exc
    impl.output_count = outputs[0]
    impl.device_info = device_info  # as the session sees it: its feature switches applied
    kernel = KernelInstance(device, spec, impl, _node_name(info))
    impl.declared_inputs = _declared_inputs(info, input_types)
    if ep is not None:
        # (a `cpu_outputs` output is host memory on every device: nothing to wait for or to count)
        ep.note_host_reads(kernel, output_names,
                           lambda: [_value_names(info, count[0], inputs=True)] * len(output_names))
        kernel.prepack_cache = ep.prepack_cache
        kernel.wait_limit = ep.wait_limit
        kernel.ep = ep
        ep.kernels.append(kernel)
    warmup.start_ahead(kernel)  # (where no weight is to be packed first: else after PrePackWeight)
    out[0] = ffi.cast("OrtKernelImpl*", kernel.struct)


def _declared_inputs(info, input_types: list[str]) -> list[tuple] | None:
    """Each input's (shape, element type) as the graph declares it ((None, "") for an absent optional one);
    None when any present input's shape is symbolic or undeclared."""
    dims = api.ffi.new("int64_t[]", RANK)
    out = []
    for i, dtype in enumerate(input_types):
        if not dtype:
            out.append((None, ""))
            continue
        rank = api.lib.ort_KernelInfo_InputShape(info, i, dims)
        shape = tuple(dims[0:rank]) if rank >= 0 else None
        if shape is None or any(d < 0 for d in shape):
            return None
        out.append((shape, dtype))
    return out


def _value_names(info, count: int, inputs: bool = False) -> tuple[str, ...]:
    """The names of the node's outputs (or inputs), as GetCapability saw them (declared.names)."""
    lib, ffi = api.lib, api.ffi
    get = lib.ort_KernelInfo_GetInputName if inputs else lib.ort_KernelInfo_GetOutputName
    size = ffi.new("size_t*")
    names = []
    for i in range(count):
        size[0] = 0
        api.check(get(info, i, ffi.NULL, size))
        buf = ffi.new("char[]", max(size[0], 1))
        api.check(get(info, i, buf, size))
        names.append(ffi.string(buf).decode())
    return tuple(names)


def _stream_for(kernel: KernelInstance, io_stream):
    """The stream a node records on: a graph being captured's, ORT's for the node, or the device's default one
    (which the C replay then uses too)."""
    if kernel.capture is not None:
        return kernel.capture.stream
    return (stream_of(io_stream) if io_stream != api.ffi.NULL else None) or kernel.gpu.default_stream()


@status_callback("py_kernel_finish")
def _kernel_finish(kernel_id, io_stream):
    """The native replay of a node whose output the host reads did not see its work complete within one slice
    (or a shader reported an error, or it could not submit): wait as the Python path does, in slices."""
    kernel = KERNELS[kernel_id]
    PYTHON_FINISHES[0] += 1
    stream = _stream_for(kernel, io_stream)
    waiting.limit, waiting.label = kernel.wait_limit, kernel.label
    try:
        stream.finish()
    finally:
        waiting.limit = waiting.label = None


@status_callback("py_kernel_compute")
def _kernel_compute(kernel_id, ctx, io):
    kernel = KERNELS[kernel_id]
    PYTHON_COMPUTES[0] += 1
    ffi = api.ffi
    memory = kernel.gpu.memory
    inputs = []
    foreign = []
    types, ranks, ptrs, dims = io.types, io.ranks, io.ptrs, io.dims
    element_types = abi.ELEMENT_TYPES
    for i in range(io.n_inputs):
        code = types[i]
        if code == 0:
            inputs.append(None)
            continue
        ptr = ptrs[i]
        shape = tuple(ffi.unpack(dims + i * RANK, ranks[i]))
        dtype = element_types.get(code, "?")
        if ptr and i not in kernel.cpu_inputs:
            found = memory.spans.find(ptr)
            ptr = found[0].device_address + found[1] if found else 0
            if not found:  # a host tensor ORT handed over without a copy: stage it for this call
                foreign.append((i, io.ptrs[i], shape, dtype))
        inputs.append(Tensor(ptr, shape, dtype, i))
    for index, (_, tensor) in kernel.packed.items():
        inputs[index] = tensor
    stream = _stream_for(kernel, io.stream)
    # replay needs no tensor written on the host, and takes the values of CPU inputs as part of its key
    # (save_plan); a call that comes here with a plan (new shapes, values, or an allocator the plan did not
    # know) replaces it, so the latest signature replays; debug mode
    # keeps every command on this path, where gpu.hazards sees it
    # while ORT profiles the session, every execution comes here, where its GPU time is measured (profiler.py)
    profiler = kernel.ep.profilers[0] if kernel.ep is not None and kernel.ep.profilers else None
    # an output the host reads: the replay waits natively for a slice, then Python waits (with no wait limit set)
    replayable = (not kernel.cpu_outputs and not foreign and not hazards.ENABLED and profiler is None
                  and not (kernel.host_read_outputs and kernel.wait_limit is not None))
    if stream.pending_log is not None:
        stream.pending_log.label = kernel.label
    call = KernelCall(kernel, ctx, inputs, stream, replayable)
    for i, host, shape, dtype in foreign:  # host memory ORT handed over as it is: read in place, or staged
        inputs[i] = Tensor(call.in_place(host, tensor_bytes(math.prod(shape), dtype), stream), shape, dtype, None)
    if kernel.gpu.lost:
        raise RuntimeError(f"vkep: the Vulkan device was lost ({kernel.gpu.lost}); create a new session "
                           "(after the driver recovers) to run again")
    waiting.limit, waiting.label = kernel.wait_limit, kernel.label
    # in a graph being captured, the pair is the graph's own (capture_timing.py): every replay writes it again
    timer = profiler if kernel.capture is None else kernel.capture.timing
    ticket = timer.node_begin(stream) if timer is not None else None
    commands = stream.rec.total_commands
    try:
        try:
            try:
                kernel.impl.compute(call)
            finally:
                if ticket is not None:
                    timer.node_end(stream, ticket, stream.rec.total_commands != commands, kernel, inputs)
        finally:
            try:
                call.finish_host_work()
            finally:
                waiting.limit = waiting.label = None
        if call.replayable:
            call.save_plan(io)
        if kernel.subgraph_outputs is not None:
            kernel.subgraph_outputs.executed(kernel)
        # with no staged host input and no scratch memory (freed below), its dispatches can be recorded
        # again (vkep dev)
        kernel.last_ops = call.ops if not foreign and not call.took_scratch else []
    finally:
        call.free_scratch()


@callback("py_kernel_release")
def _kernel_release(this):
    release_kernel(this)


def release_kernel(this) -> None:
    """Free a kernel ORT lets go of (a node's, or a fused group's: vkep/ort/fusion.py)."""
    kernel = KERNELS.pop(api.ffi.cast("vkep_kernel*", this).id, None)
    if kernel is not None:
        for weight in [w for w, _ in kernel.packed.values()] + list(kernel.persistent.values()):
            kernel.gpu.weights.release(weight)
        for imported in kernel.held_imports:
            imported.release()
    api.free_struct(this)
