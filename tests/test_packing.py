"""Packing: exact rows for small inputs, invariants on random packs, kernels vs naive twins, CLI."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from engine.cli import main
from engine.corpus import Partition
from engine.errors import ConfigurationError, PackingError
from engine.masks import attention_mask
from engine.packing import pack_documents, plan_packing
from engine.store import EncodedDocument, TokenStore
from tests.fakes import ByteIdsTokenizer
from tests.naive_packing import naive_bfd, naive_pack, naive_pieces


def docs(*token_lists, partition=Partition.TRAIN):
    return [EncodedDocument(f"d{i}", partition, np.array(t, np.uint32)) for i, t in enumerate(token_lists)]


def test_abcab_inputs_and_targets():
    packed = pack_documents(docs([0, 1, 2, 0, 1]), 4)
    assert packed.inputs.tolist() == [[0, 1, 2, 0]]
    assert packed.targets.tolist() == [[1, 2, 0, 1]]
    assert packed.segment_ids.tolist() == [[0, 0, 0, 0]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 3]]
    assert packed.loss_weights.tolist() == [[1, 1, 1, 1]]
    assert packed.fill_efficiency == 1.0


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pack_rows_in_model_dtypes(dtype):
    packed = pack_documents(docs([0, 1, 2, 0, 1], [7, 8]), 4, strategy="sequential", dtype=dtype)
    assert packed.inputs.dtype == dtype and packed.targets.dtype == dtype
    assert packed.inputs.tolist() == [[0, 1, 2, 0], [7, 0, 0, 0]]
    assert packed.targets.tolist() == [[1, 2, 0, 1], [8, 0, 0, 0]]
    assert packed.segment_ids.dtype == np.int32 and packed.segment_ids.tolist() == [[0, 0, 0, 0], [0, -1, -1, -1]]


def test_pack_dtype_is_checked():
    with pytest.raises(ConfigurationError, match="uint32, int32 or int64"):
        pack_documents(docs([0, 1, 2]), 4, dtype=np.float64)
    with pytest.raises(ConfigurationError, match="does not fit int32"):
        pack_documents(docs([0, 2**31 + 5, 2]), 4, dtype=np.int32)


def test_bfd_exact_rows_padding_and_provenance():
    # transitions: 3, 1, 5, 2 -> pieces sorted 5 (d2), 3 (d0), 2 (d3), 1 (d1) into rows of 6.
    packed = pack_documents(docs([10, 11, 12, 13], [20, 21], [30, 31, 32, 33, 34, 35], [40, 41, 42]), 6)
    assert packed.inputs.tolist() == [[30, 31, 32, 33, 34, 20], [10, 11, 12, 40, 41, 0]]
    assert packed.targets.tolist() == [[31, 32, 33, 34, 35, 21], [11, 12, 13, 41, 42, 0]]
    assert packed.segment_ids.tolist() == [[0, 0, 0, 0, 0, 1], [0, 0, 0, 1, 1, -1]]
    assert packed.position_ids.tolist() == [[0, 1, 2, 3, 4, 0], [0, 1, 2, 0, 1, 0]]
    assert packed.loss_weights.tolist() == [[1] * 6, [1, 1, 1, 1, 1, 0]]
    assert packed.fill_efficiency == 11 / 12
    assert packed.segment(1) == {
        "row": 0, "segment_id": 1, "column": 5, "document_index": 1, "document_id": "d1", "source_start": 0, "length": 1,
    }
    assert packed.cu_seqlens.tolist() == [0, 5, 6, 9, 11, 12] and packed.max_seqlen == 5


def test_sequential_next_fit_keeps_order():
    packed = pack_documents(docs([10, 11, 12, 13], [20, 21], [30, 31, 32, 33, 34, 35], [40, 41, 42]), 6, "sequential")
    assert packed.segment_ids.tolist() == [[0, 0, 0, 1, -1, -1], [0, 0, 0, 0, 0, -1], [0, 0, -1, -1, -1, -1]]
    assert packed.segment_document.tolist() == [0, 1, 2, 3]


def test_long_document_pieces_overlap_by_one_source_token():
    tokens = list(range(100, 111))  # 11 tokens, 10 transitions
    packed = pack_documents(docs(tokens), 4, "sequential")
    assert packed.inputs.tolist() == [[100, 101, 102, 103], [104, 105, 106, 107], [108, 109, 0, 0]]
    assert packed.targets.tolist() == [[101, 102, 103, 104], [105, 106, 107, 108], [109, 110, 0, 0]]
    assert packed.segment_source_start.tolist() == [0, 4, 8]
    assert packed.segment_length.tolist() == [4, 4, 2]


def test_short_documents_are_skipped_and_counted():
    packed = pack_documents(docs([5], [], [1, 2]), 3)
    assert packed.skipped_documents.tolist() == [0, 1]
    assert packed.inputs.tolist() == [[1, 0, 0]]
    empty = pack_documents([], 3)
    assert empty.rows == 0 and empty.fill_efficiency == 0.0


def test_roles_are_shifted_with_targets():
    # prompt 7 8 | response 9 10: flags 0 0 1 1. Input 8 predicts 9 (scored), input 7 predicts 8 (not).
    packed = pack_documents(docs([7, 8, 9, 10]), 3, roles=[np.array([0, 0, 1, 1])])
    assert packed.inputs.tolist() == [[7, 8, 9]]
    assert packed.loss_weights.tolist() == [[0, 1, 1]]
    assert packed.scored_targets == 2


def test_input_errors_name_what_and_where():
    with pytest.raises(PackingError, match=r"'d0' at offset 2: got 2, expected 0 or 1"):
        pack_documents(docs([1, 2, 3]), 4, roles=[np.array([0, 1, 2])])
    with pytest.raises(PackingError, match="'d1'.*expected 2 flags"):
        pack_documents(docs([1, 2], [3, 4]), 4, roles=[np.array([0, 1]), np.array([1])])
    with pytest.raises(PackingError, match="partition"):
        pack_documents(docs([1, 2]) + docs([3, 4], partition=Partition.TEST)[:1], 4)
    with pytest.raises(PackingError, match="'a' appears more than once"):
        pack_documents((np.arange(4, dtype=np.uint32), np.array([0, 2, 4]), ["a", "a"]), 4)
    with pytest.raises(PackingError, match="offsets"):
        pack_documents((np.arange(4, dtype=np.uint32), np.array([0, 3, 2]), ["a", "b"]), 4)
    with pytest.raises(ConfigurationError, match="row_length"):
        pack_documents(docs([1, 2]), 0)
    with pytest.raises(ConfigurationError, match="strategy"):
        pack_documents(docs([1, 2]), 4, "first-fit")


documents_strategy = st.lists(st.lists(st.integers(0, 50), max_size=30), max_size=14)


@settings(max_examples=80, deadline=None)
@given(documents_strategy, st.integers(1, 16), st.sampled_from(["bfd", "sequential"]), st.integers(0, 2**32 - 1))
def test_random_packs_match_twin_and_keep_invariants(token_lists, row_length, strategy, seed):
    rng = np.random.default_rng(seed)
    roles = [rng.integers(0, 2, len(t)).astype(np.uint8) for t in token_lists]
    packed = pack_documents(docs(*token_lists), row_length, strategy, roles=roles)
    expected, pieces, _ = naive_pack(token_lists, row_length, strategy, roles)
    for name, rows in expected.items():
        np.testing.assert_array_equal(getattr(packed, name), np.array(rows, dtype=np.int64).reshape(-1, row_length))

    # Every in-document transition is scored exactly once (role-weighted), nothing else is.
    scored = {}
    seg, pos = packed.segment_ids, packed.position_ids
    for k in range(packed.segments):
        row, column, n = packed.segment_row[k], packed.segment_column[k], packed.segment_length[k]
        d, start = packed.segment_document[k], packed.segment_source_start[k]
        assert (seg[row, column : column + n] == packed.segment_id[k]).all()
        assert pos[row, column : column + n].tolist() == list(range(n))
        for t in range(n):
            key = (d, start + t)
            assert key not in scored
            scored[key] = packed.loss_weights[row, column + t]
            assert packed.targets[row, column + t] == token_lists[d][start + t + 1]
    all_transitions = {(d, i) for d, t in enumerate(token_lists) for i in range(len(t) - 1)}
    assert set(scored) == all_transitions
    assert sum(scored.values()) == sum(int(r[1:].sum()) for r in roles)
    assert not packed.loss_weights[seg < 0].any()
    # Segment ids unique inside each row and no attention edge across segments.
    for row in range(packed.rows):
        ids = [s for s in seg[row] if s >= 0]
        assert ids == sorted(ids) and len(set(ids)) == len({(s) for s in ids})
    if packed.rows:
        mask = attention_mask(seg, device="cpu")
        b, i, j = np.nonzero(mask)
        real = seg[b, i] >= 0
        assert (seg[b, i][real] == seg[b, j][real]).all() and (j[real] <= i[real]).all()
        assert (i[~real] == j[~real]).all()
    scored = sum(len(t) - 1 for t in token_lists if len(t) > 1)
    assert packed.fill_efficiency == pytest.approx(scored / max(1, packed.inputs.size))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 300), max_size=200), st.integers(1, 64))
def test_plan_matches_plain_python_bfd(lengths, row_length):
    plan = plan_packing(np.array(lengths, np.int64), row_length)
    pieces = naive_pieces(lengths, row_length)
    placed, rows = naive_bfd([p[2] for p in pieces], row_length)
    assert plan.rows == rows
    assert list(zip(plan.piece_row.tolist(), plan.piece_column.tolist(), plan.piece_segment.tolist())) == placed
    assert list(zip(plan.piece_document.tolist(), plan.piece_source_start.tolist(), plan.piece_length.tolist())) == pieces


def test_plan_on_a_larger_lognormal_sample():
    rng = np.random.default_rng(3)
    lengths = np.clip(np.round(rng.lognormal(np.log(500) - 0.5, 1.0, 3000)), 1, 8192).astype(np.int64)
    plan = plan_packing(lengths, 2048)
    pieces = naive_pieces(lengths.tolist(), 2048)
    placed, rows = naive_bfd([p[2] for p in pieces], 2048)
    assert plan.rows == rows
    assert list(zip(plan.piece_row.tolist(), plan.piece_column.tolist(), plan.piece_segment.tolist())) == placed
    assert plan.fill_efficiency > 0.99


def test_pack_command_writes_parquet_atomically(tmp_path):
    tok = ByteIdsTokenizer()
    texts = {"a": "hello world", "b": "hi", "c": "packing rows of eight tokens"}
    encoded = [EncodedDocument(i, Partition.TRAIN, tok.encode_document(t, i)) for i, t in texts.items()]
    store = TokenStore.write(tmp_path / "store", {Partition.TRAIN: encoded}, tok)
    expected = pack_documents(store, 8, split="train")
    out = tmp_path / "packed"
    result = CliRunner().invoke(main, ["pack", str(tmp_path / "store"), "--row-length", "8", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["rows"] == expected.rows and report["segments"] == expected.segments
    assert report["fill_efficiency"] == pytest.approx(expected.fill_efficiency)
    table = pq.read_table(out / "rows.parquet")
    assert table.column_names == ["inputs", "targets", "segment_ids", "position_ids", "loss_weights"]
    assert table.column("inputs").to_pylist() == expected.inputs.tolist()
    assert table.column("segment_ids").to_pylist() == expected.segment_ids.tolist()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    text = CliRunner().invoke(main, ["pack", str(tmp_path / "store"), "--row-length", "8"])
    assert "fill efficiency" in text.output
    bad = CliRunner().invoke(main, ["pack", str(tmp_path / "store"), "--row-length", "0"])
    assert bad.exit_code == 2 and bad.output == "error: --row-length 0: expected an integer >= 1\n"
    assert "Example:" in CliRunner().invoke(main, ["pack", "--help"]).output


def test_write_packed_from_the_library(tmp_path):
    from engine.packing import PACKED_FILES, write_packed

    tok = ByteIdsTokenizer()
    encoded = [EncodedDocument(i, Partition.TRAIN, tok.encode_document(t, i)) for i, t in {"a": "hello", "b": "hi"}.items()]
    packed = pack_documents(encoded, 4)
    write_packed(packed, tmp_path / "out")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(PACKED_FILES)
    assert pq.read_table(tmp_path / "out" / "rows.parquet").column("targets").to_pylist() == packed.targets.tolist()
    segments = pq.read_table(tmp_path / "out" / "segments.parquet")
    assert segments.column("document_id").to_pylist() == [packed.document_ids[d] for d in packed.segment_document.tolist()]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("x")
    with pytest.raises(ConfigurationError, match="holds keep.txt, not only rows.parquet and segments.parquet"):
        write_packed(packed, tmp_path / "other")
    assert (tmp_path / "other" / "keep.txt").read_text() == "x"


# -- packing and masks --------------------------------------------------------------------------------


PV = np.array([0, 5, 6, 1, 0, 7, 1], np.uint32)


PO = np.array([0, 4, 7], np.int64)


@pytest.mark.parametrize(
    "row_length, error, fragment",
    [
        (0, ConfigurationError, "row_length=0: expected an integer >= 1"),
        (4.0, ConfigurationError, "row_length=4.0: expected an integer >= 1"),
        (True, ConfigurationError, "row_length=True: expected an integer >= 1"),
        (2**63, ConfigurationError, f"row_length={2**63}: expected at most 2147483647 (position and segment ids are int32)"),
        (2**31, ConfigurationError, "expected at most 2147483647"),
    ],
)
def test_row_length_range(row_length, error, fragment):
    from engine.packing import pack_documents, plan_packing

    with pytest.raises(error, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        pack_documents((PV, PO, ["a", "b"]), row_length)
    with pytest.raises(error):
        plan_packing([4, 3], row_length)


def test_packing_inputs_are_checked_before_the_kernels():
    from engine.packing import pack_documents, plan_packing

    with pytest.raises(PackingError, match=r"values: expected 1-D uint32 token ids, got int64 \(7,\)"):
        pack_documents((PV.astype(np.int64), PO, ["a", "b"]), 4)
    with pytest.raises(PackingError, match="offsets: expected to start at 0, never decrease and end at len"):
        pack_documents((PV, np.array([0, 9, 7], np.int64), ["a", "b"]), 4)
    with pytest.raises(PackingError, match="document_lengths: the lengths sum to more than 2\\*\\*63 - 1 tokens"):
        plan_packing([2**62, 2**62], 4)
    with pytest.raises(PackingError, match=f"a length of {2**63 + 1} is too large; expected at most 2\\*\\*63 - 1 - row_length"):
        plan_packing(np.array([2**63 + 1], np.uint64), 4)
    with pytest.raises(PackingError, match="documents\\[1\\] is int; expected an EncodedDocument"):
        pack_documents([EncodedDocument("a", "train", PV[:4]), 3], 4)
    with pytest.raises(PackingError, match="documents is NoneType; expected a list of EncodedDocument"):
        pack_documents(None, 4)
    with pytest.raises(PackingError, match="roles for document 'b' at offset 2: got 2, expected 0 or 1"):
        pack_documents((PV, PO, ["a", "b"]), 4, roles=np.array([1, 1, 1, 1, 0, 0, 2]))


def test_packing_refuses_plans_larger_than_memory(monkeypatch):
    import engine.packing as packing

    monkeypatch.setattr(packing, "_memory_limit", lambda: 10_000)
    with pytest.raises(PackingError, match="the plan needs 12,048 bytes, more than this machine's memory"):
        packing.plan_packing([5], 1000)
    with pytest.raises(PackingError, match="1 rows of 1000 positions need 17,000 bytes"):
        packing.pack_documents((PV, PO, ["a", "b"]), 1000, "sequential")


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
@pytest.mark.parametrize("threads", ["1", "3", "7"])
def test_threaded_fill_matches_naive(monkeypatch, threads):
    # Large batches fill rows on threads over disjoint piece ranges; force it on a small one.
    monkeypatch.setenv("ENGINE_THREADS", threads)
    rng = np.random.default_rng(5)
    token_lists = [rng.integers(0, 1000, int(n)).tolist() for n in rng.integers(0, 30, 40)]
    roles = [rng.integers(0, 2, len(t)).astype(np.uint8) for t in token_lists]
    for strategy in ("bfd", "sequential"):
        packed = pack_documents(docs(*token_lists), 8, strategy=strategy, roles=roles, fill_positions_per_thread=1)
        expected, _, _ = naive_pack(token_lists, 8, strategy, roles=[r.tolist() for r in roles])
        for name, rows in expected.items():
            assert getattr(packed, name).tolist() == rows, name


def test_a_packed_batch_repr_is_a_summary_not_its_arrays():
    values = np.arange(30, dtype=np.uint32)
    batch = pack_documents((values, np.array([0, 10, 30], dtype=np.int64), ["a", "b"]), 16)
    assert repr(batch) == ("PackedBatch(rows=2, L=16, strategy='bfd', segments=3, fill=87.50%, scored_targets=28, "
                           "dtype=uint32)")
