"""TokenBuffers: made from a store or from documents alike, every rule checked once, one conversion."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from engine import TokenBuffers
from engine.buffers import EncodedDocument, as_token_buffers
from engine.corpus import Partition
from engine.errors import BatchError, ConfigurationError, PackingError, StoreError
from engine.store import TokenStore
from tests.fakes import ByteIdsTokenizer

TRAIN, VALIDATION = Partition.TRAIN, Partition.VALIDATION
TOK = ByteIdsTokenizer()


def doc(doc_id, tokens, partition=TRAIN):
    return EncodedDocument(doc_id, partition, np.array(tokens, dtype=np.uint32))


# [BOS, "ab", EOS], [BOS, EOS], [BOS, "c", EOS] with BOS 0, EOS 1 and id = byte + 2.
DOCS = [doc("a", [0, 99, 100, 1]), doc("empty", [0, 1]), doc("c", [0, 101, 1])]
VALUES = [0, 99, 100, 1, 0, 1, 0, 101, 1]
OFFSETS = [0, 4, 6, 9]
IDS = ("a", "empty", "c")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("buffers") / "store"
    return TokenStore.write(path, {TRAIN: DOCS, VALIDATION: [doc("v", [0, 9, 1], VALIDATION)]}, TOK,
                            row_group_size=2, max_rows_per_file=2)


def exact(buffers: TokenBuffers, values=VALUES, offsets=OFFSETS, ids=IDS, partition=TRAIN) -> None:
    assert buffers.values.dtype == np.uint32 and buffers.values.tolist() == values
    assert buffers.offsets.dtype == np.int64 and buffers.offsets.tolist() == offsets
    assert buffers.ids == ids and buffers.partition is partition


def test_store_and_documents_give_identical_buffers(store):
    from_store = store.buffers("train")
    from_documents = TokenBuffers.from_documents(DOCS)
    from_store_documents = TokenBuffers.from_documents(list(store.documents(TRAIN)))
    for buffers in (from_store, from_documents, from_store_documents):
        exact(buffers)
    assert len(from_store) == 3 and from_store.lengths().tolist() == [4, 2, 3]
    assert from_store.tokens(2).tolist() == [0, 101, 1]
    assert repr(from_store) == "TokenBuffers(3 documents, 9 tokens, partition='train')"
    exact(store.buffers(VALIDATION), [0, 9, 1], [0, 3], ("v",), VALIDATION)


def test_store_buffers_are_the_stores_views_not_copies(store):
    values, offsets = store.arrays(TRAIN)
    buffers = store.buffers(TRAIN)
    assert buffers.values is values and buffers.offsets is offsets
    assert not buffers.values.flags.writeable


def test_every_accepted_form_converts_to_the_same_buffers(store):
    values, offsets = np.array(VALUES, np.uint32), np.array(OFFSETS, np.int64)
    exact(as_token_buffers(store, "train"))
    exact(as_token_buffers(DOCS))
    exact(as_token_buffers(iter(DOCS), TRAIN))
    exact(as_token_buffers(tuple(DOCS)))  # a tuple of three documents is documents, not a triple
    exact(as_token_buffers((values, offsets, list(IDS)), "train"))
    triple = as_token_buffers((values, offsets, IDS))
    assert triple.partition is None and triple.values is values  # checked, not copied
    buffers = TokenBuffers.from_documents(DOCS)
    assert as_token_buffers(buffers) is buffers and as_token_buffers(buffers, "train") is buffers
    exact(as_token_buffers(triple, TRAIN))  # unlabelled buffers take the partition asked for


def test_strided_triple_is_made_contiguous():
    values = np.array([0, 7, 5, 7, 1, 7], np.uint32)[::2]
    buffers = as_token_buffers((values, np.array([0, 3], np.int64), ["d"]))
    assert buffers.values.flags.c_contiguous and buffers.values.tolist() == [0, 5, 1]


def test_documents_tokens_are_converted_to_uint32_when_they_fit():
    buffers = TokenBuffers.from_documents([EncodedDocument("a", TRAIN, np.array([0, 7, 1], np.int64)),
                                           EncodedDocument("b", "train", [0, 2**32 - 1, 1]),
                                           EncodedDocument("c", TRAIN, np.array([], np.float64))])
    exact(buffers, [0, 7, 1, 0, 2**32 - 1, 1], [0, 3, 6, 6], ("a", "b", "c"))


def test_empty_documents_give_empty_buffers():
    buffers = TokenBuffers.from_documents([])
    exact(buffers, [], [0], (), None)
    exact(TokenBuffers.from_documents([], "validation"), [], [0], (), VALIDATION)


def test_buffers_are_frozen_and_pickle():
    buffers = TokenBuffers.from_documents(DOCS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        buffers.values = np.zeros(0, np.uint32)
    exact(pickle.loads(pickle.dumps(buffers)))


V, OFF = np.array(VALUES, np.uint32), np.array(OFFSETS, np.int64)


@pytest.mark.parametrize(
    "values, offsets, ids, partition, fragment",
    [
        (V.astype(np.int64), OFF, IDS, None, "values: expected 1-D uint32 token ids, got int64 (9,)"),
        (V.reshape(3, 3), OFF, IDS, None, "values: expected 1-D uint32 token ids, got uint32 (3, 3)"),
        (V, OFF.astype(np.int32), IDS, None, "offsets: expected 1-D int64 of length documents + 1 = 4 (one id per "
                                             "document), got int32 (4,)"),
        (V, OFF, IDS[:2], None, "offsets: expected 1-D int64 of length documents + 1 = 3 (one id per document), got int64 (4,)"),
        (V, np.array([1, 4, 6, 9]), IDS, None, "offsets: expected to start at 0, never decrease and end at "
                                               "len(values) = 9; got offsets[0] = 1"),
        (V, np.array([0, 4, 6, 8]), IDS, None, "end at len(values) = 9; got offsets[-1] = 8"),
        (V, np.array([0, 7, 6, 9]), IDS, None, "never decrease and end at len(values) = 9; got offsets[1] = 7 > offsets[2] = 6"),
        (V, OFF, ("a", "", "c"), None, "ids[1] is str ''; expected a non-empty string"),
        (V, OFF, ("a", 5, "c"), None, "ids[1] is int 5; expected a non-empty string"),
        (V, OFF, "abc", None, "ids: expected a sequence of document ids (str), got str"),
        (V, OFF, 3, None, "ids: expected a sequence of document ids (str), got int"),
        (V, OFF, ("a", "b", "a"), None, "document id 'a' is repeated (documents 0 and 2): 'a' appears more than once, "
                                        "but ids must be unique"),
        (V, OFF, IDS, "dev", "unknown partition 'dev' (expected train, validation or test)"),
    ],
)
def test_each_broken_rule_is_named_once_whatever_the_error_class(values, offsets, ids, partition, fragment):
    with pytest.raises(ConfigurationError) as raised:
        TokenBuffers(values, offsets, ids, partition)
    assert fragment in str(raised.value)
    for error in (BatchError, PackingError):
        with pytest.raises(error) as raised:
            as_token_buffers((values, offsets, ids), partition, error=error)
        assert type(raised.value) is error and fragment in str(raised.value)


def test_array_likes_are_arrays_only_at_the_edge():
    with pytest.raises(ConfigurationError, match=r"^values: expected 1-D uint32 token ids, got list$"):
        TokenBuffers(VALUES, OFF, IDS)
    with pytest.raises(PackingError, match=r"^values: expected 1-D uint32 token ids, got int64 \(9,\)$"):
        as_token_buffers((VALUES, OFFSETS, IDS), error=PackingError)
    exact(as_token_buffers((V, OFFSETS, IDS), TRAIN))  # a list of offsets becomes int64


@pytest.mark.parametrize(
    "documents, partition, fragment",
    [
        ([DOCS[0], ("b", [0, 1])], None, "documents[1] is tuple; expected an EncodedDocument"),
        ([DOCS[0], doc("v", [0, 1], VALIDATION)], None,
         "document 'v' (documents[1]) belongs to partition 'validation', but documents[0] 'a' belongs to 'train': "
         "token buffers hold one partition"),
        ([doc("v", [0, 1], VALIDATION)], "train",
         "document 'v' (documents[0]) belongs to partition 'validation', but the buffers are read for 'train' only"),
        ([DOCS[0], EncodedDocument("b", "dev", V)], None, "document 'b' (documents[1]) has unknown partition 'dev'"),
        ([DOCS[0], doc("", [0, 1])], None, "documents[1] has an empty id; every document needs a non-empty id"),
        ([EncodedDocument(7, TRAIN, V)], None, "documents[0] has id 7 (int); expected a non-empty string"),
        ([EncodedDocument("a", TRAIN, np.array([0, -1, 1]))], None,
         "document 'a' (documents[0]): tokens must be token ids in 0..2^32-1, got int64 values"),
        ([EncodedDocument("a", TRAIN, np.array([0.0, 1.0]))], None, "tokens must be token ids in 0..2^32-1, got float64"),
        ([EncodedDocument("a", TRAIN, np.zeros((1, 2), np.uint32))], None, "document 'a' (documents[0]): tokens must "
                                                                           "be 1-D, got shape (1, 2)"),
        ([DOCS[0], DOCS[1], DOCS[0]], None, "document id 'a' is repeated (documents 0 and 2)"),
    ],
)
def test_each_bad_document_is_named(documents, partition, fragment):
    with pytest.raises(ConfigurationError) as raised:
        TokenBuffers.from_documents(documents, partition)
    assert fragment in str(raised.value)
    with pytest.raises(PackingError) as raised:
        as_token_buffers(documents, partition, error=PackingError)
    assert fragment in str(raised.value)


@pytest.mark.parametrize("source", [None, 42, "abc", b"abc"])
def test_a_source_of_no_accepted_kind(source):
    fragment = (f"documents is {type(source).__name__}; expected a list of EncodedDocument: token buffers are read "
                "from TokenBuffers, a (values, offsets, ids) triple, a TokenStore or a list of EncodedDocument")
    with pytest.raises(ConfigurationError) as raised:
        as_token_buffers(source)
    assert str(raised.value) == fragment
    with pytest.raises(PackingError, match="documents is"):
        as_token_buffers(source, error=PackingError)
    with pytest.raises(ConfigurationError, match="TokenStore or a list"):  # the epoch's class for this mistake
        as_token_buffers(source, "train", error=BatchError, kind_error=ConfigurationError)


def test_store_needs_a_partition_and_a_known_one(store):
    for error in (ConfigurationError, PackingError):
        with pytest.raises(ConfigurationError) as raised:
            as_token_buffers(store, error=error)
        assert str(raised.value) == "a TokenStore holds three partitions; name the one to read (train, validation or test)"
    with pytest.raises(StoreError, match="unknown partition 'dev' \\(expected train, validation or test\\)"):
        store.buffers("dev")
    with pytest.raises(BatchError, match="unknown partition 'dev'"):
        as_token_buffers(store, "dev", error=BatchError)


def test_buffers_of_another_partition():
    buffers = TokenBuffers.from_documents(DOCS)
    with pytest.raises(BatchError) as raised:
        as_token_buffers(buffers, VALIDATION, error=BatchError)
    assert str(raised.value) == "token buffers of partition 'train' given where 'validation' is read"
    exact(as_token_buffers(buffers, VALIDATION, skip_other_partitions=True), [], [0], (), VALIDATION)


def test_skip_other_partitions_keeps_the_asked_partitions_documents(store):
    mixed = [DOCS[0], doc("v", [0, 9, 1], VALIDATION), DOCS[2]]
    exact(as_token_buffers(mixed, TRAIN, skip_other_partitions=True), [0, 99, 100, 1, 0, 101, 1], [0, 4, 7], ("a", "c"))
    exact(as_token_buffers(mixed, VALIDATION, skip_other_partitions=True), [0, 9, 1], [0, 3], ("v",), VALIDATION)
    assert as_token_buffers(store, VALIDATION, skip_other_partitions=True).ids == ("v",)


def test_every_consumer_takes_token_buffers(store):
    from engine.audit import audit_epoch
    from engine.batches import BatchOrder, MiniBatchConfig, MiniBatchEpoch
    from engine.packing import pack_documents
    from engine.windows import CausalWindowConfig

    options = dict(windows=CausalWindowConfig(2), batches=MiniBatchConfig(2, BatchOrder.shuffled(5)))
    buffers = TokenBuffers.from_documents(DOCS)
    from_buffers = MiniBatchEpoch.build(buffers, "train", **options)
    from_list = MiniBatchEpoch.build(DOCS, "train", **options)
    from_store = MiniBatchEpoch.build(store, "train", **options)
    assert from_buffers.positions.tolist() == from_list.positions.tolist() == from_store.positions.tolist() == [1, 0, 6]
    assert from_buffers.source is buffers and from_store.source is store  # a store is read again on rebuild
    assert isinstance(from_list.source, TokenBuffers) and from_list.document_ids == ["a", "empty", "c"]
    assert audit_epoch(from_buffers).ok and audit_epoch(from_store).ok
    packed = pack_documents(buffers, 4, "sequential")
    assert packed.inputs.tolist() == pack_documents(store, 4, "sequential", split="train").inputs.tolist()
    assert packed.inputs.tolist() == [[0, 99, 100, 0], [0, 101, 0, 0]]
