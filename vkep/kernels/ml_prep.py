"""ai.onnx.ml preprocessing as ORT's CPU EP computes it: Scaler, Normalizer, Binarizer, Imputer and FeatureVectorizer
(shaders/ml_prep.comp), ArrayFeatureExtractor (gather.comp without negative indices). docs/design.md, "ai.onnx.ml
preprocessing".

Each node's attribute tables (Scaler's offsets and scales, Imputer's values) are packed once, at session creation,
into one persistent buffer. A float64 input is read by ml_prep.comp's FLOAT64 variant (in double where ORT computes
in double: Scaler); every other value is computed in ORT's type and order, so the outputs are the CPU EP's bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

from vkep.kernels.base import FLOAT64_SUFFIX, LOOP_BUDGET, Kernel, UnsupportedError, grid_1d, has_float64

SHADER = "ml_prep.comp"
WG = 64  # ml_prep.comp's workgroup
SCALER, BINARIZER, IMPUTER, NORMALIZER, VECTORIZER = 0, 1, 2, 3, 4  # ml_prep.comp's MODEs
LABELS, ONE_HOT, NORMALIZED = 5, 6, 7
NORM_RUN = 50000  # columns of a row one Normalizer norm pass adds (lavapipe's loop budget: LOOP_BUDGET)
NORMS = {"MAX": 0, "L1": 1, "L2": 2}
NAN_MATCHES = 1  # ml_prep.comp's LabelEncoder flag
# ml_prep.comp's push members a mode leaves at these values
UNUSED = {"table": None, "err": None, "replaced_int": 0, "stride": 1, "per_feature": 0, "scales": 0, "rows": 0,
          "width": 0, "total": 0, "offset": 0, "keys": 0, "values_at": 0, "flags": 0, "value": 0.0}


def reading(x_dtype: str, y_dtype: str = "float32") -> str | tuple[str, str]:
    """ml_prep.comp's variant reading `x_dtype` and writing `y_dtype` (float64: the FLOAT64 variant, float32 out)."""
    if x_dtype == "float64":
        return "float32" + FLOAT64_SUFFIX
    return x_dtype if x_dtype == y_dtype else (x_dtype, y_dtype)


def _stride(shape: tuple[int, ...], op: str) -> int:
    """ORT's feature count of Scaler and Imputer: dims[0] of a 1-D input, else dims[1] (element i is feature i %
    stride)."""
    if not shape:
        raise UnsupportedError(f"{op}: input has empty dimensions")
    return shape[0] if len(shape) == 1 else shape[1]


class _Prep(Kernel):
    """A kernel of ml_prep.comp, which reads float64 in its FLOAT64 variant (shaderFloat64)."""

    @classmethod
    def declines_on(cls, info, attrs: dict, input_types) -> str | None:
        if "float64" in (input_types or []) and not has_float64(info):
            return "a float64 input on a device without shaderFloat64"
        return None

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if input_ranks and input_ranks[0] == 0:
            return f"{spec.op} of a scalar (ORT: empty dimensions)"
        return None


class Scaler(_Prep):
    """Scaler: y = float((x - offset) * scale), per feature (one value each) or one value for all; in float, or in
    double for a float64 input (ORT's ScalerOp<T>: integers are converted to float first)."""

    def invalid_attribute(self) -> str | None:
        scale, offset = self.attrs.get("scale") or [], self.attrs.get("offset") or []
        if not scale:
            return "scale: empty"
        if len(scale) != len(offset):
            return f"scale and offset of {len(scale)} and {len(offset)} values"
        return None

    def __init__(self, spec, attrs, since_version, input_types):
        super().__init__(spec, attrs, since_version, input_types)
        self.count = len(attrs["scale"])
        self.table = np.array(list(attrs["offset"]) + list(attrs["scale"]), np.float32).tobytes()

    def compute(self, call) -> None:
        x = call.inputs[0]
        stride = _stride(x.shape, "Scaler")
        if self.count != stride and self.count != 1:
            raise UnsupportedError(f"Scaler: either both scale and offset can be of feature size ({stride}) or 1")
        y = call.output(0, x.shape, "float32")
        if y.size:
            push = {**UNUSED, "x": x, "y": y, "table": call.persistent(self.table), "n": y.size, "stride": stride,
                    "per_feature": int(self.count == stride), "scales": self.count}
            call.dispatch(SHADER, reading(x.dtype), {"mode": SCALER}, push, grid_1d(y.size, WG), [x], [y])


class Normalizer(_Prep):
    """Normalizer: each row (a 1-D input: one row) divided by its MAX, L1 or L2 norm as ORT sums it (float, in
    order): one invocation a row adds a run of NORM_RUN columns to its partial norm (a pass per run), then one
    invocation an element divides; a row whose norm is 0 is copied."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if input_ranks and (input_ranks[0] or 0) > 2:
            return f"Normalizer of rank {input_ranks[0]} (ORT: rank at most 2)"
        if attrs.get("norm", "MAX") not in NORMS:
            return f"Normalizer: norm {attrs.get('norm')!r}"
        return super().declines(spec, attrs, since_version, input_ranks, input_types)

    def compute(self, call) -> None:
        x = call.inputs[0]
        if not 1 <= len(x.shape) <= 2:
            raise UnsupportedError(f"Rank of input to Normalizer must be less than 2. Got {len(x.shape)}")
        rows, stride = (1, x.shape[0]) if len(x.shape) == 1 else x.shape
        y = call.output(0, x.shape, "float32")
        if not y.size:
            return
        norms = call.scratch((rows,), "float32")
        constants = {"mode": NORMALIZER, "norm": NORMS[self.attrs["norm"]]}
        for begin in range(0, stride, NORM_RUN):
            push = {**UNUSED, "x": x, "y": y, "table": norms, "n": rows, "stride": stride, "offset": begin,
                    "width": min(NORM_RUN, stride - begin), "flags": int(begin == 0)}
            call.dispatch(SHADER, reading(x.dtype), constants, push, grid_1d(rows, WG), [x, norms], [norms])
        push = {**UNUSED, "x": x, "y": y, "table": norms, "n": y.size, "stride": stride}
        call.dispatch(SHADER, reading(x.dtype), {**constants, "mode": NORMALIZED}, push, grid_1d(y.size, WG),
                      [x, norms], [y])


class Binarizer(_Prep):
    """Binarizer (float32, as ORT registers it): x > threshold; a NaN fails the run (the device's error word), as
    ORT's "Input data with index i is NaN"."""

    def compute(self, call) -> None:
        x = call.inputs[0]
        y = call.output(0, x.shape, x.dtype)
        if y.size:
            push = {**UNUSED, "x": x, "y": y, "err": call.error_word(), "n": y.size,
                    "value": float(self.attrs["threshold"])}
            call.dispatch(SHADER, reading(x.dtype, x.dtype), {"mode": BINARIZER}, push, grid_1d(y.size, WG), [x],
                          [y])


class Imputer(_Prep):
    """Imputer (float32 or int64, as ORT registers it): the replaced value (for floats NaN matches any NaN) becomes
    the imputed value of its feature where there is one a feature, else the first."""

    def invalid_attribute(self) -> str | None:
        floats, ints = self.attrs.get("imputed_value_floats"), self.attrs.get("imputed_value_int64s")
        if floats and self.attrs.get("replaced_value_float") is None:
            return "replaced_value_float: absent while imputed_value_floats is given"
        if ints and self.attrs.get("replaced_value_int64") is None:
            return "replaced_value_int64: absent while imputed_value_int64s is given"
        if bool(floats) == bool(ints):
            return "imputed_value_floats / imputed_value_int64s: one of them, not both"
        return None

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        x_dtype = (input_types or [None])[0]
        values = attrs.get("imputed_value_int64s" if x_dtype == "int64" else "imputed_value_floats")
        if x_dtype is not None and not values:  # (ORT fails the run: "Empty value of imputed values")
            return f"Imputer of {x_dtype} without imputed values of that type"
        return super().declines(spec, attrs, since_version, input_ranks, input_types)

    def __init__(self, spec, attrs, since_version, input_types):
        super().__init__(spec, attrs, since_version, input_types)
        ints = (input_types or [None])[0] == "int64"
        values = attrs.get("imputed_value_int64s" if ints else "imputed_value_floats") or []
        self.count = len(values)
        self.table = np.array(values, np.int64 if ints else np.float32).tobytes()
        self.replaced_float = float(attrs.get("replaced_value_float") or 0.0)
        self.replaced_int = int(attrs.get("replaced_value_int64") or 0)

    def compute(self, call) -> None:
        x = call.inputs[0]
        stride = _stride(x.shape, "Imputer")
        if not self.count:
            raise UnsupportedError("Imputer: Empty value of imputed values.")
        y = call.output(0, x.shape, x.dtype)
        if y.size:
            push = {**UNUSED, "x": x, "y": y, "table": call.persistent(self.table), "replaced_int": self.replaced_int,
                    "n": y.size, "stride": stride, "per_feature": int(self.count == stride),
                    "value": self.replaced_float}
            call.dispatch(SHADER, reading(x.dtype, x.dtype), {"mode": IMPUTER}, push, grid_1d(y.size, WG), [x], [y])


class FeatureVectorizer(_Prep):
    """FeatureVectorizer: the inputs' rows side by side, inputdimensions[k] columns each, as float; ORT's
    VectorizeTensor: an input's first min(its row size, inputdimensions[k]) values, zeros past them. Every input has
    input 0's batch (a 1-D input: one row), else the run fails as ORT 1.32's. (A batch of 0 rows gives an empty
    output where ORT 1.32's CPU EP aborts the process.)"""

    variadic = True

    def invalid_attribute(self) -> str | None:
        dims = self.attrs.get("inputdimensions") or []
        if any(d < 0 for d in dims):
            return f"inputdimensions={dims}: negative"
        return None

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        dims = attrs.get("inputdimensions") or []
        if len(dims) != len(input_ranks or []):
            return f"FeatureVectorizer of {len(input_ranks or [])} inputs with {len(dims)} inputdimensions"
        if any(r == 0 for r in input_ranks):
            return "FeatureVectorizer of a scalar"
        return None

    def compute(self, call) -> None:
        dims = list(self.attrs["inputdimensions"])
        xs = call.inputs
        if len(xs) != len(dims) or any(x is None or not x.shape for x in xs):
            raise UnsupportedError(f"FeatureVectorizer: {len(xs)} inputs, {len(dims)} inputdimensions")
        batch = 1 if len(xs[0].shape) == 1 else xs[0].shape[0]
        total = sum(dims)
        y = call.output(0, (batch, total), "float32")
        if not y.size:
            return
        offset = 0
        for x, width in zip(xs, dims, strict=True):
            rows = 1 if len(x.shape) == 1 else x.shape[0]
            if rows != batch:  # (ORT 1.32 fails the run so)
                raise UnsupportedError(f"All inputs to FeatureVectorizer must have the same batch size. Input 0 batch "
                                       f"size: {batch}, input {xs.index(x)} batch size: {rows}.")
            n = batch * width
            if not x.size:  # (nothing read: a valid address, in case a compiler loads ahead of the test)
                x, rows = y, 0
            if n:
                push = {**UNUSED, "x": x, "y": y, "n": n,
                        "stride": math.prod(x.shape[1:]) if len(x.shape) > 1 else x.shape[0], "rows": rows,
                        "width": width, "total": total, "offset": offset}
                call.dispatch(SHADER, reading(x.dtype), {"mode": VECTORIZER}, push, grid_1d(n, WG), [x], [y])
            offset += width


class ArrayFeatureExtractor(Kernel):
    """ArrayFeatureExtractor: the last axis gathered at int64 indices (gather.comp MODE 0 without wrapping: an index
    out of [0, last dimension) fails the run as ORT's "index is out of range"; ORT reads before the row for a negative
    one, vkep fails the run). float64 elements move as int64 bits. A 1-D input gives [1, indices]."""

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if input_ranks and input_ranks[0] == 0:
            return "ArrayFeatureExtractor of a scalar (ORT: empty dimensions)"
        return None

    def compute(self, call) -> None:
        x, idx = call.inputs[:2]
        if not x.shape:
            raise UnsupportedError("ArrayFeatureExtractor: X input has empty dimensions")
        count = idx.size
        if not count:
            raise UnsupportedError("ArrayFeatureExtractor: Invalid Y argument: num_indices = 0")
        out = (1, count) if len(x.shape) == 1 else x.shape[:-1] + (count,)
        y = call.output(0, out, x.dtype)
        if y.size:
            members = {"n": y.size, "p0": 1, "p1": count, "p2": x.shape[-1], "p3": 0, "rank": 0, "dims": [],
                       "strides": []}
            dtype = "int64" if x.dtype == "float64" else x.dtype
            call.dispatch("gather.comp", dtype, {"mode": 0, "idx64": 1, "wrap": 0},
                          {**members, "x": x, "idx": idx, "y": y, "err": call.error_word()}, grid_1d(y.size, WG),
                          [x, idx], [y])


class OneHotEncoder(_Prep):
    """OneHotEncoder of numbers (int64, float32, float64 as ORT registers them; strings stay on the CPU EP): each
    value truncated to int64 (NaN and values out of range: the int64 minimum, as x86-64's conversion) one-hot over
    cats_int64s (a repeated category: its last index); no category: zeros, or with zeros=0 the run fails."""

    def invalid_attribute(self) -> str | None:
        if self.attrs.get("cats_strings") and self.attrs.get("cats_int64s"):
            return "cats_int64s and cats_strings: both given"
        if not (self.attrs.get("cats_strings") or self.attrs.get("cats_int64s")):
            return "cats_int64s: no categories"
        return None

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        cats = attrs.get("cats_int64s") or []
        if not cats:
            return "OneHotEncoder without cats_int64s (string categories stay on the CPU EP)"
        if 2 * len(cats) > LOOP_BUDGET:
            return f"OneHotEncoder of {len(cats)} categories (past the loop budget)"
        if input_ranks and (input_ranks[0] or 0) > 2:
            return f"OneHotEncoder of rank {input_ranks[0]} (ORT: rank at most 2)"
        return None

    def __init__(self, spec, attrs, since_version, input_types):
        super().__init__(spec, attrs, since_version, input_types)
        self.cats = list(attrs.get("cats_int64s") or [])
        self.table = np.array(self.cats, np.int64).tobytes()

    def compute(self, call) -> None:
        x = call.inputs[0]
        if len(x.shape) > 2 or not self.cats:
            raise UnsupportedError(f"OneHotEncoder of rank {len(x.shape)}")
        y = call.output(0, x.shape + (len(self.cats),), "float32")
        if y.size:
            push = {**UNUSED, "x": x, "y": y, "table": call.persistent(self.table), "err": call.error_word(),
                    "n": x.size, "keys": len(self.cats), "flags": int(self.attrs.get("zeros", 1) != 0)}
            call.dispatch(SHADER, reading(x.dtype), {"mode": ONE_HOT}, push, grid_1d(x.size, WG), [x], [y])


class LabelEncoder(_Prep):
    """LabelEncoder (ai.onnx.ml 2 and 4) of numbers: int64 or float32 keys to int64 or float32 values (strings and
    doubles stay on the CPU EP). Each value becomes the value of the first equal key (ORT's map keeps a repeated
    key's first value; +0 and -0 are one key; a NaN matches a NaN key in version 4 only), else the default
    (default_tensor, else default_float or default_int64, whose schema defaults are -0.0 and -1)."""

    @classmethod
    def table_of(cls, attrs: dict, since_version: int, x_dtype: str):
        """(keys, values, default) as numpy arrays and a number, or UnsupportedError."""
        key_kind = {"float32": "floats", "int64": "int64s"}.get(x_dtype)
        if key_kind is None:
            raise UnsupportedError(f"LabelEncoder of {x_dtype} keys")
        dtype = {"floats": np.float32, "int64s": np.int64}

        def listed(prefix: str, kind: str):
            value = attrs.get(f"{prefix}_{kind}")
            if value is not None:
                return np.array(value, dtype[kind])
            tensor = attrs.get(f"{prefix}_tensor") if since_version >= 4 else None
            if tensor is not None and np.asarray(tensor).dtype == dtype[kind]:
                return np.asarray(tensor).reshape(-1)
            return None

        keys = listed("keys", key_kind)
        found = [(k, v) for k in ("floats", "int64s") if (v := listed("values", k)) is not None]
        if keys is None or len(found) != 1:
            raise UnsupportedError("LabelEncoder without numeric keys of the input's type and one numeric value list")
        value_kind, values = found[0]
        if len(keys) != len(values):
            raise UnsupportedError(f"LabelEncoder of {len(keys)} keys and {len(values)} values")
        if len(keys) > LOOP_BUDGET - 10:
            raise UnsupportedError(f"LabelEncoder of {len(keys)} keys (past the loop budget)")
        default_attr = "default_float" if value_kind == "floats" else "default_int64"
        # (ORT fills in the schema's defaults, -0.0 and -1, where the node has none: the kernels' own fallbacks,
        # 0.0 for version 4's int64 -> float, are never reached)
        backup = -0.0 if value_kind == "floats" else -1
        default = attrs.get(default_attr)
        tensor = attrs.get("default_tensor") if since_version >= 4 else None
        if tensor is not None:
            tensor = np.asarray(tensor)
            if tensor.dtype != dtype[value_kind] or tensor.size != 1:
                raise UnsupportedError(f"LabelEncoder: default_tensor of {tensor.dtype} {tensor.shape}")
            default = tensor.reshape(-1)[0].item()
        return keys, values, backup if default is None else default

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        x_dtype = (input_types or [None])[0]
        if x_dtype is None:
            return None
        try:
            cls.table_of(attrs, since_version, x_dtype)
        except UnsupportedError as exc:
            return str(exc)
        return super().declines(spec, attrs, since_version, input_ranks, input_types)

    def __init__(self, spec, attrs, since_version, input_types):
        super().__init__(spec, attrs, since_version, input_types)
        x_dtype = input_types[0] if input_types and input_types[0] else "int64"
        keys, values, default = self.table_of(attrs, since_version, x_dtype)
        self.y_dtype = "float32" if values.dtype == np.float32 else "int64"
        blob = keys.tobytes() + bytes(-len(keys.tobytes()) % 8)
        self.values_at = len(blob)
        self.table = blob + values.tobytes() or bytes(8)
        self.count = len(keys)
        self.default_float = float(default) if self.y_dtype == "float32" else 0.0
        self.default_int = int(default) if self.y_dtype == "int64" else 0
        self.flags = NAN_MATCHES if since_version >= 4 else 0

    def compute(self, call) -> None:
        x = call.inputs[0]
        y = call.output(0, x.shape, self.y_dtype)
        if y.size:
            push = {**UNUSED, "x": x, "y": y, "table": call.persistent(self.table), "n": y.size, "keys": self.count,
                    "values_at": self.values_at, "flags": self.flags, "value": self.default_float,
                    "replaced_int": self.default_int}
            call.dispatch(SHADER, reading(x.dtype, self.y_dtype), {"mode": LABELS}, push, grid_1d(y.size, WG), [x],
                          [y])
