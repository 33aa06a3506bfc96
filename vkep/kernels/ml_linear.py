"""ai.onnx.ml linear and SVM models: LinearRegressor, LinearClassifier, SVMRegressor and SVMClassifier (1), as ORT
1.32's CPU EP computes them (docs/design.md, "ai.onnx.ml linear and SVM models").

Each node's attributes are packed once, at session creation, into one table (`Model.tables`: a header of byte
offsets, then the coefficients, intercepts, support vectors, rho, prob_a, prob_b, int64 labels and each class's first
support vector and count). shaders/ml_linear.comp computes in float as ORT (other input types converted to float):
MODE 0 one invocation per sample (a GEMV, the label, the post transform); MODE 1 the SVM kernel per (sample, support
vector); MODE 2 an SVMClassifier's one-vs-one votes, probabilities, label and post transform per sample.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vkep.kernels import host
from vkep.kernels.base import (
    FLOAT64_SUFFIX,
    LOOP_BUDGET,
    Kernel,
    UnsupportedError,
    grid_1d,
    has_float64,
    offset_tables,
    pack_once,
)
from vkep.kernels.mlas_gemm import M1_LOOPS

SHADER = "ml_linear.comp"
WG = 64  # ml_linear.comp's workgroup
# ORT's POST_EVAL_TRANSFORM and KERNEL, as MakeTransform and MakeKernel read the strings (any other: the last)
POSTS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")
NONE, PROBIT = 0, 4
LINEAR = 0
LINEAR_MODE, KERNEL_MODE, CLASSIFY_MODE, CONVERT_MODE = 0, 1, 2, 3  # ml_linear.comp's MODEs
# ml_linear.comp's flags
INTERCEPT, LABEL, SECOND_CLASS, ONE_CLASS, PROBABILITIES, ALL_POSITIVE, SVC, M1 = 1, 2, 4, 8, 16, 32, 64, 128
HEADER = ("coefs", "intercepts", "svs", "rho", "proba", "probb", "labels", "starts", "counts")
XT = {"float32": 0, "float64": 1, "int32": 2, "int64": 3}  # ml_linear.comp's XT
PROBABILITY_LOOPS = 100  # multiclass_probability's iterations at most


def gemm_loops(k: int) -> int:
    """The most loop steps of one gemm_element of K = k as lavapipe counts them (leaving passes too; measured): the M1
    kernel's eight lanes k + M1_LOOPS (mlas_sgemm.glsl's, as mlas_gemm.comp's), MlasSgemmKernelFma3 k + 2 a K block
    (of 128 or more) + up to 14 (the stride's halvings)."""
    return k + max(M1_LOOPS, 2 * -(-k // 128) + 14)


def column_threads(rows: int, cols: int, k: int) -> int:
    """The threads among which MLAS's MlasGemmBatch splits the output columns of ORT's Gemm (rows x cols, K = k) in
    a CPU EP session (host.sgemm_threads): 1 where it splits the rows or runs on one thread. Each thread's columns
    are their own SGEMM, whose K blocks (mlas_sgemm.glsl) follow their count."""
    return host.sgemm_threads(rows, cols, k)[1]


def _post(attrs: dict) -> int:
    name = attrs.get("post_transform") or "NONE"
    return POSTS.index(name) if name in POSTS else PROBIT


def _floats(attrs: dict, name: str) -> np.ndarray:
    return np.asarray(attrs.get(name) or [], np.float32)


@dataclass
class Model:
    """A node's attributes as ml_linear.comp reads them."""

    tables: bytes
    features: int  # features of a sample
    targets: int  # LinearRegressor's targets, a classifier's classes
    vectors: int = 0  # support vectors (0: none)
    post: int = NONE
    flags: int = 0
    kernel: int = LINEAR
    gamma: float = 0.0
    coef0: float = 0.0
    degree: float = 0.0
    c: float = 0.0  # MODE 1: added after the product (a linear SVMClassifier's rho[0]; POLY, SIGMOID: coef0)
    labels: int = 0  # the label output's classes (0: no label output)
    svm_classifier: bool = False  # MODE 1 (liblinear: to y), then MODE 2; else MODE 0 (after MODE 1 for an SVC)

    @property
    def width(self) -> int:
        """Score columns a sample."""
        if self.flags & SECOND_CLASS:
            return 2
        if self.flags & SVC and not self.flags & PROBABILITIES:
            return self.targets * (self.targets - 1) // 2 if self.targets > 2 else 2
        return self.targets

    def loop_iterations(self) -> int:
        """The most loop iterations of one invocation of any of its dispatches (lavapipe's budget: LOOP_BUDGET)."""
        C, V, F = self.targets, self.vectors, self.features
        kernels = gemm_loops(F)  # MODE 1 (RBF: F + 1)
        if self.svm_classifier:
            classify = (C - 1) * V + 3 * C * C + 3 * self.width
            if self.flags & PROBABILITIES:
                classify += PROBABILITY_LOOPS * (2 * C * C + 3 * C) + 2 * C * C
            return max(kernels, classify)
        # MODE 0: a gemm_element a target, then the post transform's three passes over the row
        return C * gemm_loops(F) + 3 * C + 4 if not self.vectors else max(kernels, gemm_loops(V) + 4)


def _kernel_params(attrs: dict, op: str) -> tuple[float, float, float]:
    params = attrs.get("kernel_params")
    if params is None:  # (the CPU EP fails the session)
        raise UnsupportedError(f"{op} without kernel_params")
    if len(params) < 3:  # (the CPU EP reads past them)
        raise UnsupportedError(f"{op}: {len(params)} kernel_params")
    return float(np.float32(params[0])), float(np.float32(params[1])), float(np.float32(params[2]))


def linear_classifier(attrs: dict) -> Model:
    """LinearClassifier: ORT's class count is the intercepts'; one class with two labels is its binary case (scores
    1 - s, s whatever the post transform but PROBIT, whose second score ORT leaves unwritten: declined)."""
    if attrs.get("classlabels_strings"):
        raise UnsupportedError("string class labels")
    coefs, intercepts = _floats(attrs, "coefficients"), _floats(attrs, "intercepts")
    labels = list(attrs.get("classlabels_ints") or [])
    C = len(intercepts)
    if C == 0 or len(coefs) == 0 or len(coefs) % C:
        raise UnsupportedError(f"{len(coefs)} coefficients for {C} classes (intercepts)")
    post, flags = _post(attrs), INTERCEPT | LABEL
    if C == 1:
        second = len(labels) == 2
        if second and post == PROBIT:
            raise UnsupportedError("one class, two labels and PROBIT (ORT leaves the second score unwritten)")
        flags |= SECOND_CLASS if second else 0
        labels = labels if second else [0, 1]
    elif len(labels) < C:  # (the CPU EP reads past the labels)
        raise UnsupportedError(f"{len(labels)} class labels for {C} classes")
    return Model(offset_tables(HEADER, coefs=coefs, intercepts=intercepts, labels=np.array(labels, np.int64)), len(coefs) // C, C,
                 post=post, flags=flags, labels=len(labels))


def linear_regressor(attrs: dict) -> Model:
    """LinearRegressor: intercepts only where there is one per target."""
    targets = attrs.get("targets")
    coefs, intercepts = _floats(attrs, "coefficients"), _floats(attrs, "intercepts")
    if targets is None or targets <= 0 or len(coefs) == 0 or len(coefs) % targets:
        raise UnsupportedError(f"{len(coefs)} coefficients for {targets} targets")
    flags = INTERCEPT if len(intercepts) == targets else 0
    return Model(offset_tables(HEADER, coefs=coefs, intercepts=intercepts), len(coefs) // targets, int(targets), post=_post(attrs),
                 flags=flags)


def svm_regressor(attrs: dict) -> Model:
    """SVMRegressor: with support vectors their kernels times the coefficients plus rho[0], else the coefficients'
    dot product plus rho[0]; one_class's sign; no post transform (ORT applies none)."""
    V = attrs.get("n_supports")
    coefs, rho, svs = _floats(attrs, "coefficients"), _floats(attrs, "rho"), _floats(attrs, "support_vectors")
    if V is None or V < 0 or len(coefs) == 0 or len(rho) == 0:
        raise UnsupportedError(f"n_supports {V}, {len(coefs)} coefficients, {len(rho)} rho")
    gamma, coef0, degree = _kernel_params(attrs, "SVMRegressor")
    flags = ONE_CLASS if attrs.get("one_class") else 0
    name = attrs.get("kernel_type") or "LINEAR"
    if V == 0:
        return Model(offset_tables(HEADER, coefs=coefs, intercepts=rho[:1]), len(coefs), 1,
                     flags=flags | (INTERCEPT if rho[0] != 0 else 0))
    if len(svs) == 0 or len(svs) % V or len(coefs) < V:
        raise UnsupportedError(f"{len(svs)} support vector values and {len(coefs)} coefficients for {V} vectors")
    return Model(offset_tables(HEADER, coefs=coefs, intercepts=rho[:1], svs=svs), len(svs) // V, 1, V, flags=flags | INTERCEPT,
                 kernel=KERNELS.index(name) if name in KERNELS else 3, gamma=gamma, coef0=coef0, degree=degree,
                 c=coef0 if name != "LINEAR" else 0.0)


def svm_classifier(attrs: dict) -> Model:
    """SVMClassifier: support vectors (one-vs-one sums in double, votes, first most votes; prob_a/prob_b: Platt
    scaling and multiclass_probability) or liblinear's mode (scores x . coefficients + rho[0], first largest)."""
    if attrs.get("classlabels_strings"):
        raise UnsupportedError("string class labels")
    labels = np.array(attrs.get("classlabels_ints") or [], np.int64)
    C = len(labels)
    coefs, rho, svs = _floats(attrs, "coefficients"), _floats(attrs, "rho"), _floats(attrs, "support_vectors")
    proba, probb = _floats(attrs, "prob_a"), _floats(attrs, "prob_b")
    per_class = [int(v) for v in attrs.get("vectors_per_class") or []]
    if C < 2 or len(coefs) == 0 or len(rho) == 0 or len(proba) != len(probb) or any(v < 0 for v in per_class):
        raise UnsupportedError(f"{C} classes, {len(coefs)} coefficients, {len(rho)} rho, {len(proba)} prob_a, "
                               f"{len(probb)} prob_b")
    gamma, coef0, degree = _kernel_params(attrs, "SVMClassifier")
    post, pairs, V = _post(attrs), C * (C - 1) // 2, sum(per_class)
    flags = (PROBABILITIES if len(proba) else 0) | (ALL_POSITIVE if np.all(coefs >= 0) else 0)
    if V == 0:  # liblinear: MODE 1 writes the scores to y
        if len(coefs) % C:
            raise UnsupportedError(f"{len(coefs)} coefficients for {C} classes")
        return Model(offset_tables(HEADER, svs=coefs, labels=labels), len(coefs) // C, C, 0, post, flags, LINEAR, c=float(rho[0]),
                     labels=C, svm_classifier=True)
    if (len(per_class) != C or len(svs) == 0 or len(svs) % V or len(coefs) < (C - 1) * V or len(rho) < pairs
            or (len(proba) and len(proba) < pairs)):
        raise UnsupportedError(f"{len(per_class)} vectors_per_class, {len(svs)} support vector values, "
                               f"{len(coefs)} coefficients, {len(rho)} rho for {C} classes")
    if C == 2 and not len(proba) and post == PROBIT:
        raise UnsupportedError("two classes, no probabilities and PROBIT (ORT leaves the second score unwritten)")
    name = attrs.get("kernel_type") or "LINEAR"
    kernel = KERNELS.index(name) if name in KERNELS else 3
    starts = np.cumsum([0] + per_class[:-1]).astype(np.uint32)
    return Model(offset_tables(HEADER, coefs=coefs, svs=svs, rho=rho, proba=proba, probb=probb, labels=labels, starts=starts,
                         counts=np.array(per_class, np.uint32)),
                 len(svs) // V, C, V, post, flags | SVC, kernel, gamma, coef0, degree,
                 c=coef0 if kernel != LINEAR else 0.0, labels=C, svm_classifier=True)


class MlLinearBase(Kernel):
    """One node of the four ops: `model` packs its attributes (UnsupportedError: declined at GetCapability)."""

    # the linear ops take the feature count from the input, as the CPU EP's GEMM does: fewer features than a row
    # of coefficients reads the coefficients as rows of that many (ORT's logreg_iris.onnx: 2 features, rows of 4)
    fewer_features = False

    @classmethod
    def model(cls, attrs: dict) -> Model:
        raise NotImplementedError

    @classmethod
    def model_once(cls, attrs: dict) -> Model:
        """cls.model(attrs), packed once for GetCapability's checks and the session's kernel (support vectors of
        large SVMs take a while to pack)."""
        return pack_once((cls,), attrs, lambda: cls.model(attrs))

    @classmethod
    def declines(cls, spec, attrs: dict, since_version: int, input_ranks, input_types) -> str | None:
        if input_ranks and input_ranks[0] not in (1, 2, -1):
            return f"{cls.__name__} of an input of rank {input_ranks[0]}"
        try:
            model = cls.model_once(attrs)
        except UnsupportedError as exc:
            return f"{cls.__name__}: {exc}"
        if model.loop_iterations() > LOOP_BUDGET:
            return f"{cls.__name__}: {model.loop_iterations()} loop iterations an invocation (loop budget)"
        return None

    @classmethod
    def declines_on(cls, info, attrs: dict, input_types) -> str | None:
        x_dtype = (input_types or [None])[0] or "float32"
        try:
            wide = x_dtype == "float64" or bool(cls.model_once(attrs).flags & SVC)
        except UnsupportedError as exc:
            return str(exc)
        if wide and not has_float64(info):
            return f"{cls.__name__} ({x_dtype} input or one-vs-one sums in double) on a device without shaderFloat64"
        return None

    @classmethod
    def declines_dims(cls, attrs: dict, input_dims) -> str | None:
        dims = input_dims[0] if input_dims else None
        if not dims or dims[-1] < 0:
            return None
        try:
            problem = cls.features_problem(cls.model_once(attrs), dims[-1])
        except UnsupportedError:
            return None  # (declines says why)
        return f"{cls.__name__}: {problem}" if problem else None

    @classmethod
    def features_problem(cls, m: Model, features: int) -> str | None:
        if features == m.features or (cls.fewer_features and 0 < features < m.features):
            return None
        return f"an input of {features} features for {m.features}"

    def __init__(self, spec, attrs, since_version, input_types):
        super().__init__(spec, attrs, since_version, input_types)
        self.m = self.model_once(attrs)

    def compute(self, call) -> None:
        x, m = call.inputs[0], self.m
        if len(x.shape) not in (1, 2) or x.dtype not in XT:
            raise UnsupportedError(f"{self.spec.op} of a {x.dtype} input of rank {len(x.shape)}")
        n, features = (1, x.shape[0]) if len(x.shape) == 1 else x.shape
        problem = self.features_problem(m, features)
        if problem:
            raise UnsupportedError(f"{self.spec.op}: {problem}")
        label = call.output(0, (n,), "int64") if m.labels else None
        y = call.output(1 if m.labels else 0, (n, m.width), "float32")
        if n == 0 or y.size == 0:
            return
        # the FLOAT64 variant where the device has it: float64 inputs and double one-vs-one sums
        wide = self.device_info is None or has_float64(self.device_info)
        if not wide and (x.dtype == "float64" or m.flags & SVC):
            raise UnsupportedError(f"{self.spec.op}: a device without shaderFloat64")
        dtype = "float32" + FLOAT64_SUFFIX if wide else "float32"
        one = M1 if n == 1 else 0  # (MODE 1: and alpha 1, the LINEAR kernel)
        push = {"x": x, "y": y, "label": label, "tables": call.persistent(m.tables), "work": None, "n": n,
                "features": features, "targets": m.targets, "vectors": m.vectors, "post": m.post,
                "flags": m.flags | one, "kernel": m.kernel, "gamma": m.gamma, "coef0": m.coef0, "degree": m.degree,
                "c": m.c, "threads_n": column_threads(n, m.targets, features)}
        kernels = {**push, "threads_n": column_threads(n, m.vectors or m.targets, features),
                   "flags": m.flags | (one if m.kernel == LINEAR or m.gamma == 1.0 else 0)}
        if x.dtype != "float32":  # converted to float once, as the CPU EP's cast buffer
            floats = call.scratch((n, features), "float32")
            call.dispatch(SHADER, dtype, {"mode": CONVERT_MODE, "xt": XT[x.dtype]}, {**push, "work": floats,
                          "n": n * features}, grid_1d(n * features, WG), [x], [floats])
            push["x"] = kernels["x"] = x = floats
        xt = XT["float32"]
        outs = [y] + ([label] if label is not None else [])
        if not m.svm_classifier:  # the linear ops, SVMRegressor
            if m.vectors:  # SVMRegressor's kernels, then their dot product with the coefficients
                work = call.scratch((n, m.vectors), "float32")
                call.dispatch(SHADER, dtype, {"mode": KERNEL_MODE, "xt": xt}, {**kernels, "work": work,
                              "n": n * m.vectors, "flags": kernels["flags"] | SVC}, grid_1d(n * m.vectors, WG), [x], [work])
                push = {**push, "x": work, "features": m.vectors, "threads_n": column_threads(n, 1, m.vectors)}
                x, xt = work, XT["float32"]
            call.dispatch(SHADER, dtype, {"mode": LINEAR_MODE, "xt": xt}, push, grid_1d(n, WG), [x], outs)
            return
        C = m.targets
        if m.vectors:
            work = call.scratch((n * (m.vectors + 2 * C + 2 * C * C),), "float32")
            push["work"] = work
            call.dispatch(SHADER, dtype, {"mode": KERNEL_MODE, "xt": xt}, {**kernels, "work": work, "n": n * m.vectors},
                          grid_1d(n * m.vectors, WG), [x], [work])
            call.dispatch(SHADER, dtype, {"mode": CLASSIFY_MODE, "xt": xt}, push, grid_1d(n, WG), [work],
                          [work] + outs)
        else:  # liblinear's scores to y, then the labels and post transform
            call.dispatch(SHADER, dtype, {"mode": KERNEL_MODE, "xt": xt}, {**kernels, "n": n * C, "vectors": C},
                          grid_1d(n * C, WG), [x], [y])
            call.dispatch(SHADER, dtype, {"mode": CLASSIFY_MODE, "xt": xt}, push, grid_1d(n, WG), [y], outs)


class LinearClassifier(MlLinearBase):
    """LinearClassifier (ai.onnx.ml 1): int64 labels (string labels stay on the CPU EP), float32 scores."""

    fewer_features = True

    @classmethod
    def model(cls, attrs: dict) -> Model:
        return linear_classifier(attrs)


class LinearRegressor(MlLinearBase):
    """LinearRegressor (ai.onnx.ml 1): float32 in and out."""

    fewer_features = True

    @classmethod
    def model(cls, attrs: dict) -> Model:
        return linear_regressor(attrs)


class SVMRegressor(MlLinearBase):
    """SVMRegressor (ai.onnx.ml 1): float32 in and out."""

    @classmethod
    def model(cls, attrs: dict) -> Model:
        return svm_regressor(attrs)


class SVMClassifier(MlLinearBase):
    """SVMClassifier (ai.onnx.ml 1): int64 labels (string labels stay on the CPU EP), float32 scores."""

    @classmethod
    def model(cls, attrs: dict) -> Model:
        return svm_classifier(attrs)
