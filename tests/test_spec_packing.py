"""Review checks of packing and masks against SPEC §8, written from the SPEC text."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from engine import masks
from engine.packing import pack_documents


def test_cut_document_scores_every_transition_once_with_shifted_roles():
    z = np.arange(10, 20, dtype=np.uint32)  # 10 tokens, 9 transitions
    roles = np.array([0, 0, 1, 1, 0, 1, 1, 1, 0, 1], np.uint8)
    packed = pack_documents((z, np.array([0, 10], np.int64), ["d"]), 4, "sequential", roles=[roles])
    assert packed.inputs.tolist() == [[10, 11, 12, 13], [14, 15, 16, 17], [18, 0, 0, 0]]
    assert packed.targets.tolist() == [[11, 12, 13, 14], [15, 16, 17, 18], [19, 0, 0, 0]]
    assert packed.segment_ids.tolist() == [[0, 0, 0, 0], [0, 0, 0, 0], [0, -1, -1, -1]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 3], [0, 1, 2, 3], [0, 0, 0, 0]]
    assert packed.loss_weights.tolist() == [[0, 1, 1, 0], [1, 1, 1, 0], [1, 0, 0, 0]]
    assert packed.fill_efficiency == 9 / 12


@pytest.mark.parametrize("kind", ["dense", "additive"])
@pytest.mark.parametrize("length", [1, 8, 31, 32, 33, 64])
def test_mask_matches_the_rule_on_odd_shapes(kind, length):
    rng = np.random.default_rng(length)
    seg = rng.integers(-1, 3, size=(3, length)).astype(np.int32)
    runs = np.ones(seg.shape, bool)
    runs[:, 1:] = seg[:, 1:] != seg[:, :-1]
    seg = np.where(seg >= 0, np.cumsum(runs, axis=1), -1).astype(np.int32)  # one id per run: unique per row
    seg[0] = -1  # a row of all padding
    i, j = np.arange(length)[:, None], np.arange(length)[None, :]
    own, key = seg[:, :, None], seg[:, None, :]
    expected = ((j <= i) & (own == key) & (own >= 0)) | ((own < 0) & (i == j))
    got = masks.attention_mask(seg, kind, device="cpu")
    if kind == "dense":
        assert np.array_equal(got, expected)
    else:
        assert np.array_equal(got == 0, expected) and np.isneginf(got[~expected]).all()


CUDA_SIM_CODE = """
import numpy as np
from engine import masks
for shape in [(2, 0), (0, 3), (0, 0)]:
    seg = np.zeros(shape, np.int32)
    cpu = masks.varlen_boundaries(seg, device="cpu")
    gpu = masks.varlen_boundaries(seg, device="cuda", to_host=True)
    print(shape, cpu[0].tolist(), cpu[1], gpu[0].tolist(), gpu[1])
"""


@pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None, reason="numba-cuda is not installed (pip install -e '.[cuda]')")
def test_cuda_varlen_boundaries_match_cpu_on_empty_shapes():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    result = subprocess.run([sys.executable, "-c", CUDA_SIM_CODE], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "(2, 0) [0] 0 [0] 0",
        "(0, 3) [0] 0 [0] 0",
        "(0, 0) [0] 0 [0] 0",
    ]


def test_pack_command_refuses_to_replace_a_directory_it_did_not_write(tmp_path):
    from click.testing import CliRunner

    from engine.cli import main
    from engine.corpus import Partition
    from engine.store import EncodedDocument, TokenStore
    from tests.fakes import ByteIdsTokenizer

    tok = ByteIdsTokenizer()
    documents = [EncodedDocument("a", Partition.TRAIN, tok.encode_document("hello world", "a"))]
    store = tmp_path / "store"
    TokenStore.write(store, {Partition.TRAIN: documents}, tok)
    before = sorted(p.name for p in store.iterdir())
    result = CliRunner().invoke(main, ["pack", str(store), "--row-length", "8", "--out", str(store)])
    assert result.exit_code == 2 and "--out" in result.output
    assert sorted(p.name for p in store.iterdir()) == before
    packed = tmp_path / "packed"
    for _ in range(2):  # an earlier pack output is replaced
        again = CliRunner().invoke(main, ["pack", str(store), "--row-length", "8", "--out", str(packed)])
        assert again.exit_code == 0, again.output
    assert sorted(p.name for p in packed.iterdir()) == ["rows.parquet", "segments.parquet"]
