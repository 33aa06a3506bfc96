"""Einsum, the common forms, as products of the MatMul kernel (matmul.product: its modes and tiles) over strided
reads.

Two operands: every index is a batch index (both operands and the output), a contracted one (both
operands, not the output), a row index (first operand and output) or a column index (second operand and
output) — e.g. "bhqd,bhkd->bhqk", "ij,jk->ik", "i,j->ij", "i,i->". Rows, columns and contractions may
each span several indices when they are adjacent in memory; the output must list batch, row and column
indices in that order (or batch, column, row: the operands then swap); other orders, and batch indices that do
not fold into two, gather the operands into that layout first and the product into the output's order after.
One operand: any form — a permutation
("ij->ji"), a diagonal ("ii->i"), sums ("bij->bj", "ij->"): one strided gather (movement.dispatch_gather) that
reads the diagonals and lays the summed indices last, then a ReduceSum over them. Anything else (diagonals or sums
over an index of one operand among two) raises UnsupportedError.
"""

from __future__ import annotations

import math

from vkep.kernels.base import Kernel, UnsupportedError
from vkep.kernels.elementwise import collapse
from vkep.kernels.matmul import product, product_members
from vkep.kernels.movement import MAX_RANK, contiguous_strides, dispatch_gather
from vkep.kernels.reduce import dispatch_reduce


def parse(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Operand index strings and the output's, with '...' spelled out as fresh upper-case letters."""
    eq = equation.replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise UnsupportedError(f"Einsum '{equation}' has {len(terms)} operands, the node {len(ranks)}")
    ell = max((r - len(t.replace("...", "")) for t, r in zip(terms, ranks, strict=True) if "..." in t), default=0)
    fresh = "ABCDEFGHIJKLMNOP"[:ell]
    out = []
    for t, r in zip(terms, ranks, strict=True):
        n = r - len(t.replace("...", ""))
        out.append(t.replace("...", fresh[ell - n:]) if "..." in t else t)
    if "->" not in eq:  # implicit output: the indices that appear once, in alphabetical order
        letters = "".join(out)
        rhs = fresh + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in fresh))
    rhs = rhs.replace("...", fresh)
    for t, r in zip(out, ranks, strict=True):
        if len(t) != r or (len(set(t)) != len(t) and len(ranks) > 1):
            raise UnsupportedError(f"Einsum '{equation}': operand '{t}' (repeated or mismatched indices)")
    return out, rhs


def _group(term: str, shape, letters: str) -> tuple[int, int]:
    """(size, element stride) of `letters` read as one index of `term`; they must be adjacent and
    contiguous with each other in memory."""
    if not letters:
        return 1, 0
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    pos = [term.index(c) for c in letters]
    if pos != list(range(pos[0], pos[0] + len(pos))):
        raise UnsupportedError(f"Einsum: indices {letters} are not adjacent in '{term}'")
    return math.prod(shape[p] for p in pos), strides[pos[-1]]


class Einsum(Kernel):
    variadic = True
    computes_float64 = True  # (float64 products and sums in double; its gathers move float64 as int64)

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        """The forms _plan cannot lay out, found from the equation alone (ellipses read as one index)."""
        eq = (attrs.get("equation") or "").replace(" ", "").replace("...", "@")
        lhs, arrow, out = eq.partition("->")
        terms = lhs.split(",")
        if len(terms) == 1 and len(input_ranks) == 1 and input_ranks[0] is not None and input_ranks[0] >= 0:
            try:
                cls(spec, attrs, since_version, list(input_types))._plan_one((2,) * input_ranks[0])
            except UnsupportedError as exc:
                return str(exc)
            return None
        if len(terms) != 2:
            return f"Einsum '{attrs.get('equation')}': only one- and two-operand forms are supported"
        if any(len(set(t)) != len(t) for t in terms):
            return f"Einsum '{attrs.get('equation')}': repeated index (a diagonal)"
        if arrow:
            a, b = terms
            if any(c not in out and not (c in a and c in b) for c in a + b):
                return f"Einsum '{attrs.get('equation')}': sums over an index of one operand"
        if len(input_ranks) != 2 or any(r is None or r < 0 for r in input_ranks):
            return f"Einsum '{attrs.get('equation')}': operand ranks unknown"
        try:  # the layout depends on the equation and the ranks only: plan it now with sizes of 2
            cls(spec, attrs, since_version, list(input_types))._plan(tuple((2,) * r for r in input_ranks))
        except UnsupportedError as exc:
            return str(exc)
        return None

    def _plan_one(self, shape: tuple) -> tuple:
        """One operand: (output shape, the gather's shape and element strides: the output's indices, then the
        summed ones; how many are summed)."""
        (term,), out = parse(self.attrs["equation"], [len(shape)])
        strides = contiguous_strides(shape)
        dims: dict[str, int] = {}
        steps: dict[str, int] = {}  # a repeated index steps along each of its axes at once: the diagonal
        for c, size, stride in zip(term, shape, strides, strict=True):
            if dims.setdefault(c, size) != size:
                raise UnsupportedError(f"Einsum '{self.attrs['equation']}': index {c} of sizes {dims[c]} and {size}")
            steps[c] = steps.get(c, 0) + stride
        if any(c not in dims for c in out) or len(set(out)) != len(out):
            raise UnsupportedError(f"Einsum '{self.attrs['equation']}': output '{out}'")
        summed = [c for c in dims if c not in out]
        order = list(out) + summed
        if len(order) > MAX_RANK:
            raise UnsupportedError(f"Einsum '{self.attrs['equation']}': {len(order)} indices (at most {MAX_RANK})")
        return tuple(dims[c] for c in out), [dims[c] for c in order], [steps[c] for c in order], len(summed)

    def _plan(self, shapes: tuple) -> tuple:
        """("direct", ...): the product read through the operands' own strides; ("general", ...): where their
        layout does not allow that (an output order other than batch, rows, columns; batch indices that do not
        fold into two; indices not adjacent in memory)."""
        try:
            return ("direct", *self._plan_direct(shapes))
        except UnsupportedError:
            return ("general", *self._plan_general(shapes))

    def _plan_general(self, shapes: tuple) -> tuple:
        """Each operand gathered into [batch, rows, contraction] and [batch, contraction, columns] (scratch), one
        batched product, its [batch, rows, columns] gathered into the output's order (HF Mamba2's
        'bclhn,bcshn->bclsh'). Sums over an index of one operand stay unsupported."""
        (ta, tb), out = parse(self.attrs["equation"], [len(s) for s in shapes])
        sa, sb = shapes
        dims = {c: d for t, sh in ((ta, sa), (tb, sb)) for c, d in zip(t, sh, strict=True)}
        if any(dims[c] != d for t, sh in ((ta, sa), (tb, sb)) for c, d in zip(t, sh, strict=True)):
            raise UnsupportedError(f"Einsum '{self.attrs['equation']}': an index of two sizes in {shapes}")
        batch = [c for c in out if c in ta and c in tb]
        rows = [c for c in out if c in ta and c not in tb]
        cols = [c for c in out if c in tb and c not in ta]
        contract = [c for c in ta if c in tb and c not in out]
        if any(c not in out and c not in contract for c in ta + tb) or any(c not in ta + tb for c in out):
            raise UnsupportedError(f"Einsum '{self.attrs['equation']}': sums over an index of one operand")

        def reading(term: str, shape, order: list[str]) -> tuple[list[int], list[int]]:
            strides = contiguous_strides(shape)
            return [dims[c] for c in order], [strides[term.index(c)] for c in order]

        canon = batch + rows + cols
        laid = contiguous_strides([dims[c] for c in canon])
        nb, m, n, k = (math.prod(dims[c] for c in g) for g in (batch, rows, cols, contract))
        members = product_members(m, n, k, batch_inner=nb, a=(0, m * k, k, 1), b=(0, k * n, n, 1))
        return (tuple(dims[c] for c in out), reading(ta, sa, batch + rows + contract),
                reading(tb, sb, batch + contract + cols), ([dims[c] for c in out], [laid[canon.index(c)] for c in out]),
                (nb, m, n, k), members)

    def _plan_direct(self, shapes: tuple) -> tuple:
        terms, out = parse(self.attrs["equation"], [len(s) for s in shapes])
        if len(terms) != 2:
            raise UnsupportedError("Einsum with more than two operands is not supported")
        (ta, tb), (sa, sb) = terms, shapes
        dims = {c: s for t, sh in zip(terms, shapes, strict=True) for c, s in zip(t, sh, strict=True)}
        batch = [c for c in out if c in ta and c in tb]
        rows = "".join(c for c in out if c in ta and c not in tb)
        cols = "".join(c for c in out if c in tb and c not in ta)
        contract = "".join(c for c in ta if c in tb and c not in out)
        if any(c not in out and c not in contract for c in ta + tb) or any(c not in ta + tb for c in out):
            raise UnsupportedError(f"Einsum '{self.attrs['equation']}': sums over an index of one operand")
        swap = out != "".join(batch) + rows + cols
        if swap:  # y = (B^T A^T) laid out as batch, cols, rows
            if out != "".join(batch) + cols + rows:
                raise UnsupportedError(f"Einsum '{self.attrs['equation']}': output order not supported")
            ta, tb, sa, sb, rows, cols = tb, ta, sb, sa, cols, rows
        m, a_m = _group(ta, sa, rows)
        n, b_n = _group(tb, sb, cols)
        k, a_k = _group(ta, sa, contract)
        _, b_k = _group(tb, sb, contract)
        shape_b = [dims[c] for c in batch]
        st_a = [_group(ta, sa, c)[1] for c in batch]
        st_b = [_group(tb, sb, c)[1] for c in batch]
        bdims, (st_a, st_b) = collapse(tuple(shape_b), st_a, st_b) if batch else ([1], ([0], [0]))
        if len(bdims) > 2:
            raise UnsupportedError(f"Einsum '{self.attrs['equation']}': batch indices do not fold into two")
        bdims, st_a, st_b = [1] * (2 - len(bdims)) + bdims, [0] * (2 - len(st_a)) + st_a, [0] * (2 - len(st_b)) + st_b
        members = product_members(m, n, k, batch_inner=bdims[1], a=(st_a[0], st_a[1], a_m, a_k if contract else 0),
                                  b=(st_b[0], st_b[1], b_k if contract else 0, b_n))
        return tuple(dims[c] for c in out), members, math.prod(bdims), swap

    def compute(self, call) -> None:
        key = tuple(t.shape for t in call.inputs)
        if len(key) == 1:
            return self._compute_one(call, *self.planned(key, lambda: self._plan_one(key[0])))
        kind, *plan = self.planned(key, lambda: self._plan(key))
        if kind == "general":
            return self._compute_general(call, *plan)
        out, members, batches, swap = plan
        a, b = call.inputs if not swap else call.inputs[::-1]
        y = call.output(0, out)
        if y.size:  # (through the MatMul kernel: its modes and tiles for the product's layout)
            product(self, call, a, b, y, members, batches)

    def _compute_general(self, call, out: tuple, read_a, read_b, read_y, sizes, members: dict) -> None:
        (a, b), y = call.inputs, call.output(0, out)
        if y.size == 0:
            return
        nb, m, n, k = sizes
        operands = []
        for x, (shape, strides), laid in ((a, read_a, (nb, m, k)), (b, read_b, (nb, k, n))):
            t = call.scratch(laid, x.dtype)
            if t.size:
                dispatch_gather(call, x, t.view(0, tuple(shape)), shape, strides)
            operands.append(t)
        product_y = call.scratch((nb, m, n), y.dtype)
        product(self, call, *operands, product_y, members, nb)
        dispatch_gather(call, product_y, y, *read_y)

    def _compute_one(self, call, out: tuple, shape: list[int], strides: list[int], summed: int) -> None:
        x, y = call.inputs[0], call.output(0, out)
        if y.size == 0:
            return
        if not summed:
            return dispatch_gather(call, x, y, shape, strides)
        laid = call.scratch(tuple(shape), x.dtype)
        if laid.size:
            dispatch_gather(call, x, laid, shape, strides)
        dispatch_reduce(call, "ReduceSum", laid, y.view(0, tuple(shape[:len(out)]) + (1,) * summed),
                        set(range(len(out), len(shape))))
