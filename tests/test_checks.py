"""engine.checks: one check per kind of argument, the same message and error class at every site."""

from __future__ import annotations

import numpy as np
import pytest

from engine.batches import MiniBatchConfig
from engine.checks import (
    as_int, check_batch_size, check_count, check_fraction, check_partition, check_rank, check_seed, positive_int,
)
from engine.errors import BatchError, ConfigurationError, TokenizerError


def test_as_int():
    assert as_int(np.uint64(7), "n") == 7 and type(as_int(np.uint64(7), "n")) is int
    with pytest.raises(ConfigurationError, match="^n must be an integer, got the boolean True$"):
        as_int(True, "n")
    with pytest.raises(ConfigurationError, match="^n must be an integer, got float 1.5$"):
        as_int(1.5, "n")


@pytest.mark.parametrize("value", [-1, 1.0, "3", True, None, np.float64(2.0)])
def test_check_count_refuses(value):
    with pytest.raises(ConfigurationError) as caught:
        check_count(value, "epoch")
    assert str(caught.value) == f"epoch={value!r}: expected an integer >= 0"


def test_check_count_range_and_error_class():
    assert check_count(np.int32(3), "row_length", low=1) == 3
    assert check_count(0, "epoch") == 0
    with pytest.raises(TokenizerError, match=r"^merges=0: expected an integer >= 1$"):
        check_count(0, "merges", low=1, error=TokenizerError)


def test_positive_int_and_seed():
    assert positive_int(5, "stride S") == 5
    with pytest.raises(ConfigurationError, match=r"^stride S must be positive \(>= 1\), got 0$"):
        positive_int(0, "stride S")
    with pytest.raises(ConfigurationError, match="^n is 11, larger than the largest allowed value 10$"):
        positive_int(11, "n", limit=10)
    assert check_seed(2**64 - 1) == 2**64 - 1
    with pytest.raises(ConfigurationError, match=r"^seed must be an integer in 0..2\^64-1, got -1$"):
        check_seed(-1)


@pytest.mark.parametrize("size", [0, -3, True, 2.5, "4"])
def test_batch_size_is_one_error_everywhere(size):
    with pytest.raises(BatchError) as direct:
        check_batch_size(size)
    with pytest.raises(BatchError) as config:
        MiniBatchConfig(size)
    assert str(direct.value) == str(config.value) == f"batch size must be a positive integer, got {size!r}"


def test_check_rank():
    assert check_rank(np.int64(1), 2) == (1, 2)
    with pytest.raises(ConfigurationError, match="^rank must be an integer, got 1.0$"):
        check_rank(1.0, 2)
    with pytest.raises(ConfigurationError, match="^world_size must be an integer, got True$"):
        check_rank(0, True)
    with pytest.raises(ConfigurationError, match="^need world_size >= 1 and 0 <= rank < world_size, got rank=2, "
                                                 "world_size=2$"):
        check_rank(2, 2)


def test_check_partition_names_the_value_with_the_callers_error_class():
    from engine.corpus import Partition

    assert check_partition("validation") is Partition.VALIDATION
    assert check_partition(Partition.TEST) is Partition.TEST
    for error in (ConfigurationError, TokenizerError, BatchError):
        with pytest.raises(error, match=r"^unknown partition 'dev' \(expected train, validation or test\)$"):
            check_partition("dev", error)


@pytest.mark.parametrize("value", [0, 1.5, -0.1, True, "0.5", float("nan")])
def test_check_fraction_refuses(value):
    with pytest.raises(ConfigurationError) as caught:
        check_fraction(value, "train_fraction")
    assert str(caught.value) == f"train_fraction is {value!r}, expected a number with 0 < train_fraction <= 1"


def test_check_fraction_accepts():
    assert check_fraction(1, "f") == 1.0 and check_fraction(0.25, "f") == 0.25


def test_read_json_says_missing_unreadable_and_invalid(tmp_path):
    from engine.checks import read_json
    from engine.errors import StoreError

    good = tmp_path / "good.json"
    good.write_text('{"a": [1, 2]}', encoding="utf-8")
    assert read_json(good, StoreError, missing="absent") == {"a": [1, 2]}
    with pytest.raises(StoreError, match=r"^.*nope\.json: absent, run X$"):
        read_json(tmp_path / "nope.json", StoreError, missing="absent, run X")
    with pytest.raises(StoreError, match=r"^.*: cannot read manifest: Is a directory$"):
        read_json(tmp_path, StoreError, missing="absent", what="manifest")
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": ', encoding="utf-8")
    with pytest.raises(BatchError, match=r"bad\.json: manifest is not valid JSON \(Expecting value"):
        read_json(bad, BatchError, missing="absent", what="manifest")
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(StoreError, match=r"bad\.json: not valid JSON \('utf-8' codec"):
        read_json(bad, StoreError, missing="absent")
