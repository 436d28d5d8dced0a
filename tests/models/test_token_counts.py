"""TokenCounts: the backends' token-count memo (models/_token_counts.py)."""

from __future__ import annotations

import itertools
import string
import sys
import threading

from ragsense.models import load_model
from ragsense.models._token_counts import ENTRY_OVERHEAD, MAX_BYTES, MAX_ENTRIES, TokenCounts


def test_the_memo_is_bounded_by_bytes_and_drops_the_least_recent() -> None:
    calls: list[str] = []
    entry = sys.getsizeof("aaaa") + ENTRY_OVERHEAD
    counts = TokenCounts(lambda s: calls.append(s) or len(s), max_bytes=2 * entry + 10)
    assert [counts("aaaa"), counts("bbbb"), counts("aaaa")] == [4, 4, 4]  # "aaaa" is now the most recent
    assert counts("cccc") == 4  # a third entry is over the bytes: "bbbb", the least recent, goes
    assert len(counts) == 2
    counts("aaaa")
    counts("bbbb")
    assert calls == ["aaaa", "bbbb", "cccc", "bbbb"]


def test_threads_sharing_the_memo_get_the_counts_of_their_own_texts() -> None:
    counts = TokenCounts(lambda s: len(s.split()), max_bytes=8_000)
    texts = [" ".join(["w"] * n) for n in range(1, 40)]
    wrong: list[str] = []

    def work() -> None:
        for _ in range(20):
            for n, text in enumerate(texts, start=1):
                if counts(text) != n:
                    wrong.append(text)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


def test_many_short_texts_stay_within_the_documented_memory() -> None:
    # Issue 38, as seen: the memo was bounded by characters only, so two million four-character texts
    # took 274 MB against the documented ~10 MB. 150,000 of them here (about 26 MB unbounded), the
    # memo's memory measured as it fills and once it evicts: its tables, texts and counts.
    counts = TokenCounts(lambda s: 300 + ord(s[0]))  # counts above 256: int objects of their own
    texts = ("".join(t) for t in itertools.product(string.ascii_letters, repeat=4))
    largest = 0
    for i, text in enumerate(itertools.islice(texts, 150_000), start=1):
        counts(text)
        if i % 10_000 == 0:
            table = counts._table
            held = sys.getsizeof(table) + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in table.items())
            assert held <= counts.bytes, f"the memo takes {held:,} bytes but counts {counts.bytes:,}"
            largest = max(largest, held)
    assert len(counts) <= MAX_ENTRIES and counts.bytes <= MAX_BYTES
    assert MAX_BYTES / 2 < largest <= MAX_BYTES  # the memo fills, and stays within its bound


def test_the_bundled_model_counts_as_its_tokenizer_does_warm_or_cold() -> None:
    model = load_model("smollm2-135m", device="cpu")
    tokenizer = model.tokenizer  # type: ignore[attr-defined]
    texts = ["Paris is the capital of France.", " Paris is the capital of France.", "", "\n\n", "naïve café"]
    expected = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert [model.count_tokens(t) for t in texts] == expected  # cold
    assert [model.count_tokens(t) for t in texts] == expected  # from the memo
