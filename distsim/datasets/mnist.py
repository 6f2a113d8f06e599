"""Real MNIST, offline.

``mnist.npz``, installed with the package next to this module, holds the
canonical 60,000 training and 10,000 test images as uint8 arrays (see
``data/README.md`` for provenance and licence). :func:`load_mnist` reads it, or
the file ``$DISTSIM_MNIST`` names, or a path you pass, and verifies its SHA-256
before returning anything, so a missing, truncated or corrupted file is an
error, never silent garbage.

:func:`build_tfds_mnist` writes a TensorFlow Datasets copy of the same arrays so
that ``tfds.load("mnist", data_dir=tfds_data_dir())`` works without internet.
Only that function imports TensorFlow Datasets.

Where the files are:

* the npz: ``$DISTSIM_MNIST``, else the package's own copy;
* the TFDS copy: ``$DISTSIM_TFDS_DIR``, else ``data/tensorflow_datasets`` in a
  source checkout of the repository, else ``~/.cache/distsim/tensorflow_datasets``.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from distsim.validation import Boolean, InputError, Integer, MissingFileError, Optional, checked_path

#: SHA-256 of the committed ``distsim/datasets/mnist.npz`` (printed by ``data/make_mnist.py``).
MNIST_SHA256 = "06af5dfe73b70e3bc1c36439982b18a8d76803db9b544f6fdf838a37fbb01b64"

REGENERATE_HINT = ("regenerate it with 'python data/make_mnist.py' from the repository root, "
                   "or point $DISTSIM_MNIST at a good copy")

#: Environment variable that points at another copy of mnist.npz.
PATH_ENV = "DISTSIM_MNIST"
#: Environment variable that says where the TFDS copy goes.
TFDS_DIR_ENV = "DISTSIM_TFDS_DIR"


class DataFileError(InputError):
    """The MNIST file exists but is corrupt, truncated or of the wrong shape."""


@dataclass(frozen=True)
class Mnist:
    """MNIST images (N, 28, 28) and labels (N,): uint8 from :func:`load_mnist`,
    scaled floats and int64 labels from :func:`mnist_subset`."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    def __iter__(self):
        """Unpack like Keras' ``mnist.load_data()``: ``(x_train, y_train), (x_test, y_test)``."""
        yield (self.x_train, self.y_train)
        yield (self.x_test, self.y_test)


_EXPECTED_SHAPES = {
    "x_train": (60000, 28, 28),
    "y_train": (60000,),
    "x_test": (10000, 28, 28),
    "y_test": (10000,),
}


def default_mnist_path() -> Path:
    """``$DISTSIM_MNIST`` if set, else the copy installed with the package."""
    env = os.environ.get(PATH_ENV)
    return Path(env) if env else Path(__file__).resolve().with_name("mnist.npz")


def _source_checkout() -> Path | None:
    """The repository this package runs from, if it is not an installed copy."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "data").is_dir() else None


def tfds_data_dir() -> Path:
    """Where :func:`build_tfds_mnist` writes the offline TFDS copy (see the module docstring)."""
    env = os.environ.get(TFDS_DIR_ENV)
    if env:
        return Path(env)
    checkout = _source_checkout()
    return checkout / "data" / "tensorflow_datasets" if checkout else Path.home() / ".cache" / "distsim" / "tensorflow_datasets"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_mnist(path: str | Path | None = None, *, verify: bool = True) -> Mnist:
    """Load real MNIST from ``path`` (default :func:`default_mnist_path`).

    Args:
        path: an ``.npz`` with ``x_train``, ``y_train``, ``x_test``, ``y_test``.
        verify: check the file's SHA-256 against :data:`MNIST_SHA256`. Turn it
            off only for a file you made yourself (shapes are still checked).

    Raises:
        MissingFileError: no file (also a ``FileNotFoundError``); the message
            says how to regenerate it.
        DataFileError: wrong checksum, truncated/unreadable archive or
            unexpected arrays.
    """
    path = checked_path(path, "MNIST file") if path is not None else default_mnist_path()
    try:
        is_file = path.is_file()
    except OSError:  # a name too long for the file system
        is_file = False
    if not is_file:
        raise MissingFileError("MNIST file", str(path), REGENERATE_HINT, problem=f"no file at {path}")
    if verify:
        actual = file_sha256(path)
        if actual != MNIST_SHA256:
            raise DataFileError("MNIST file", str(path), f"the file with SHA-256 {MNIST_SHA256}; {REGENERATE_HINT}",
                                problem=f"{path} is corrupt or truncated (SHA-256 {actual[:16]}..., "
                                        f"{path.stat().st_size:,} bytes)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in _EXPECTED_SHAPES}
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, EOFError) as exc:
        raise DataFileError("MNIST file", str(path), f"an npz with arrays {sorted(_EXPECTED_SHAPES)}; {REGENERATE_HINT}",
                            problem=f"{path} cannot be read ({type(exc).__name__})") from None
    for name, shape in _EXPECTED_SHAPES.items():
        if arrays[name].shape != shape or arrays[name].dtype != np.uint8:
            raise DataFileError(f"MNIST file {path}: {name}", f"{arrays[name].dtype}{arrays[name].shape}",
                                f"uint8{shape}; {REGENERATE_HINT}")
    return Mnist(**arrays)


#: Float types an image may be scaled into (pixels / 255 need a fraction).
FLOAT_DTYPES: tuple[str, ...] = ("float16", "float32", "float64")


def _float_dtype(dtype) -> type:
    """``dtype`` (``np.float32``, ``"float64"``...) as its NumPy scalar type, if a float of :data:`FLOAT_DTYPES`."""
    try:
        name = np.dtype(dtype).name if not isinstance(dtype, bool) and dtype is not None else None
    except (TypeError, ValueError):
        name = None
    if name not in FLOAT_DTYPES:
        raise InputError("dtype", name or dtype, f"a NumPy float type, one of {FLOAT_DTYPES} (e.g. np.float32)")
    return np.dtype(name).type


def mnist_subset(
    n_train: int | None = None, n_test: int | None = None, *, dtype=np.float32, flatten: bool = False
) -> Mnist:
    """MNIST scaled to [0, 1] in ``dtype``, optionally cut to the first examples.

    Images keep shape (N, 28, 28) unless ``flatten`` gives (N, 784). Labels are
    int64. Handy for quick mode: ``mnist_subset(2048, 512)``.
    """
    n_train = Optional(Integer(1, 60000), "all 60,000")("n_train", n_train)
    n_test = Optional(Integer(1, 10000), "all 10,000")("n_test", n_test)
    dtype = _float_dtype(dtype)
    flatten = Boolean()("flatten", flatten)
    full = load_mnist()

    def prep(x: np.ndarray, n: int | None) -> np.ndarray:
        x = x[:n].astype(dtype) / dtype(255.0)
        return x.reshape(len(x), -1) if flatten else x

    return Mnist(
        x_train=prep(full.x_train, n_train),
        y_train=full.y_train[:n_train].astype(np.int64),
        x_test=prep(full.x_test, n_test),
        y_test=full.y_test[:n_test].astype(np.int64),
    )


def build_tfds_mnist(data_dir: str | Path | None = None) -> Path:
    """Write an offline TFDS copy of MNIST built from the verified npz.

    Afterwards ``tfds.load("mnist", data_dir=data_dir)`` works without internet:
    the copy uses TFDS's own ``mnist`` builder name, version, feature spec
    (``image`` 28x28x1 uint8, ``label`` ClassLabel(10)) and ``train``/``test``
    splits, so the official builder finds it already prepared. Safe to call
    again: an existing copy is left as it is.

    Returns:
        The ``data_dir`` that was written (default :func:`tfds_data_dir`).
    """
    import tensorflow_datasets as tfds
    from tensorflow_datasets.image_classification.mnist import MNIST

    mnist = load_mnist()

    class OfflineMnist(MNIST, skip_registration=True):
        """The official builder, fed from the verified ``mnist.npz`` instead of the web."""

        name = "mnist"

        def _split_generators(self, dl_manager):
            return {
                tfds.Split.TRAIN: self._generate_examples(mnist.x_train, mnist.y_train),
                tfds.Split.TEST: self._generate_examples(mnist.x_test, mnist.y_test),
            }

        def _generate_examples(self, images, labels):
            # Index keys, as the official builder uses.
            for index, (image, label) in enumerate(zip(images, labels)):
                yield index, {"image": image[..., None], "label": int(label)}

    data_dir = Path(data_dir) if data_dir is not None else tfds_data_dir()
    OfflineMnist(data_dir=str(data_dir)).download_and_prepare()
    return data_dir
