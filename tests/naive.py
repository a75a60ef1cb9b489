"""Plain-loop twins of every kernel: slow, obvious, and the reference the tests compare against.

The twins live beside their area's tests and are gathered here under one name:

| kernel module                      | twin                                                        |
| ---------------------------------- | ----------------------------------------------------------- |
| engine/kernels/wordsplit.py        | naive_split (re.findall), naive_word_counts                 |
| engine/kernels/bpe_train.py        | naive_train_bpe (recounts every pair every merge);          |
|                                    | naive_train (byte level); both tie rules                    |
| engine/kernels/bpe_merge.py        | merge_word (pure Python); naive_encode_merges,              |
|                                    | naive_encode_ranks (byte level); merge_long_pieces: the     |
|                                    | same twins on documents with long pieces                    |
| engine/kernels/bpe_encode.py       | naive_encode_bpe (memoised pure Python); naive_piece_key,   |
|                                    | naive_self_merging; naive_encode_ranks per piece            |
| engine/kernels/heap.py             | naive_heap_pops (smallest of a plain list)                  |
| engine/kernels/pretokenize.py      | naive_pretokenize (regex.findall)                           |
| engine/kernels/windows.py          | window_count(s), window_prefix_sums, enumerate_descriptors, |
|                                    | decode_position, gather                                     |
| engine/kernels/shuffle.py          | SplitMix64, fisher_yates                                    |
| engine/kernels/packing.py          | naive_pieces, naive_bfd, naive_next_fit, naive_pack         |
| engine/kernels/masks.py, cuda/     | naive_dense_mask, naive_additive_mask, naive_position_ids,  |
|                                    | naive_varlen, reference_attention                           |
| engine/kernels/json_numbers.py     | naive_number_array (bytes.split, a regex per element)       |
"""

from tests.naive_byte_bpe import naive_encode_merges, naive_encode_ranks, naive_pretokenize, naive_train  # noqa: F401
from tests.naive_json import naive_number_array  # noqa: F401
from tests.naive_packing import (  # noqa: F401
    allowed,
    naive_additive_mask,
    naive_bfd,
    naive_dense_mask,
    naive_next_fit,
    naive_pack,
    naive_pieces,
    naive_position_ids,
    naive_varlen,
    reference_attention,
)
from tests.naive_tokenizers import (  # noqa: F401
    merge_word,
    naive_bpe_vocab,
    naive_encode_bpe,
    naive_heap_pops,
    naive_split,
    naive_train_bpe,
    naive_word_counts,
)
from tests.naive_windows import (  # noqa: F401
    SplitMix64,
    decode_position,
    enumerate_descriptors,
    fisher_yates,
    gather,
    window_count,
    window_counts,
    window_prefix_sums,
)
