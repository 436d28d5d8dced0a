"""A random forest as plain arrays: exported from scikit-learn, predicted with numpy, stored as ``.npz``.

Why not pickle or joblib: loading a pickle runs whatever code the file names, so a shared estimator
file would be a way to run code on the reader's machine. An ``.npz`` read with ``allow_pickle=False``
holds only numbers and strings. The arrays are each tree's nodes (children, split feature and
threshold, leaf value); prediction walks them exactly as scikit-learn does (features cast to float32,
``x <= threshold`` goes left, tree outputs summed in order and divided by the number of trees), so the
loaded forest predicts what the fitted one did, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ForestArrays:
    """All trees' nodes concatenated; tree ``t`` holds nodes ``offsets[t] .. offsets[t+1]-1``, with
    children indices local to their tree and ``-1`` marking a leaf."""

    children_left: npt.NDArray[np.int32]
    children_right: npt.NDArray[np.int32]
    feature: npt.NDArray[np.int32]
    threshold: FloatArray
    value: FloatArray
    offsets: npt.NDArray[np.int64]

    @property
    def n_trees(self) -> int:
        return len(self.offsets) - 1

    @classmethod
    def from_sklearn(cls, forest: Any) -> ForestArrays:
        trees = [est.tree_ for est in forest.estimators_]
        if any(t.value.shape[1:] != (1, 1) for t in trees):
            raise ValueError("only single-output regression forests can be exported")
        sizes = [t.node_count for t in trees]
        return cls(
            children_left=np.concatenate([t.children_left for t in trees]).astype(np.int32),
            children_right=np.concatenate([t.children_right for t in trees]).astype(np.int32),
            feature=np.concatenate([t.feature for t in trees]).astype(np.int32),
            threshold=np.concatenate([t.threshold for t in trees]).astype(np.float64),
            value=np.concatenate([t.value[:, 0, 0] for t in trees]).astype(np.float64),
            offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        )

    def predict(self, features: npt.ArrayLike) -> FloatArray:
        """Mean of the trees' leaf values for each row of ``features``."""
        x = np.asarray(features, dtype=np.float32)
        if x.ndim != 2:
            raise ValueError(f"features must be a 2-D array, got shape {x.shape}")
        rows = np.arange(x.shape[0])
        total = np.zeros(x.shape[0], dtype=np.float64)
        for t in range(self.n_trees):
            base = int(self.offsets[t])
            node = np.zeros(x.shape[0], dtype=np.int64)
            while True:
                left = self.children_left[base + node]
                inner = left != -1
                if not inner.any():
                    break
                feat = np.where(inner, self.feature[base + node], 0)
                go_left = x[rows, feat] <= self.threshold[base + node]
                right = self.children_right[base + node]
                node = np.where(inner, np.where(go_left, left, right), node)
            total += self.value[base + node]
        return total / self.n_trees

    def to_arrays(self) -> dict[str, npt.NDArray[Any]]:
        return {
            "children_left": self.children_left,
            "children_right": self.children_right,
            "feature": self.feature,
            "threshold": self.threshold,
            "value": self.value,
            "offsets": self.offsets,
        }

    @classmethod
    def from_arrays(cls, arrays: Any) -> ForestArrays:
        forest = cls(
            children_left=np.asarray(arrays["children_left"], dtype=np.int32),
            children_right=np.asarray(arrays["children_right"], dtype=np.int32),
            feature=np.asarray(arrays["feature"], dtype=np.int32),
            threshold=np.asarray(arrays["threshold"], dtype=np.float64),
            value=np.asarray(arrays["value"], dtype=np.float64),
            offsets=np.asarray(arrays["offsets"], dtype=np.int64),
        )
        forest._check()
        return forest

    def _check(self) -> None:
        n = len(self.value)
        sizes = {len(a) for a in (self.children_left, self.children_right, self.feature, self.threshold)}
        if sizes != {n} or self.offsets[0] != 0 or self.offsets[-1] != n or np.any(np.diff(self.offsets) < 1):
            raise ValueError("corrupt forest arrays: node arrays and tree offsets do not agree")
        for t in range(self.n_trees):
            lo, hi = int(self.offsets[t]), int(self.offsets[t + 1])
            index = np.arange(hi - lo)
            for child in (self.children_left[lo:hi], self.children_right[lo:hi]):
                # Children come after their parent (as scikit-learn builds trees): no walk can loop.
                if np.any((child != -1) & ((child <= index) | (child >= hi - lo))):
                    raise ValueError(f"corrupt forest arrays: tree {t} points outside itself")
