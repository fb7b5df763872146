"""Checks of a new enrollment against an index's layout, shared by the local and the remote CLI.

The payload width and the threshold rule are fixed when an index is
created: an enrollment may not change them, and its records must carry
payloads exactly when the index stores them.
"""

from __future__ import annotations

import argparse

import numpy as np

from ..manifest import Manifest
from ..errors import InvalidArgument


def check_same_layout(manifest: dict, args: argparse.Namespace, where: str) -> None:
    """Refuse ``--payload-width`` or ``--rule`` other than an existing index's: both are fixed at creation."""
    width, rule = Manifest.of(manifest).payload_width, Manifest.of(manifest).rule
    if args.payload_width is not None and args.payload_width != width:
        raise InvalidArgument(f"index {where} was created with payload width {width}: --payload-width "
                              f"{args.payload_width} cannot change it")
    if args.rule is not None and args.rule != rule:
        raise InvalidArgument(f"index {where} was created with the rule score {rule} delta: --rule {args.rule} "
                              "cannot change it")


def check_payload_input(manifest: dict, payloads: np.ndarray | None, where: str) -> None:
    """Refuse records without payloads for an index that stores them, and payloads for one that does not."""
    width = Manifest.of(manifest).payload_width
    if width and payloads is None:
        raise InvalidArgument(f"index {where} stores {width} int16 payload value(s) per record: enroll records "
                              "(a .npz with 'vectors' and 'payloads' arrays, or VECTORS.npy --payloads FILE.npy)")
    if not width and payloads is not None:
        raise InvalidArgument(f"index {where} holds no payloads (created with payload width 0): these records' "
                              "payloads have nowhere to go (create a new index with --payload-width)")
