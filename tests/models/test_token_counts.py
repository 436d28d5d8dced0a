"""TokenCounts: the backends' token-count memo (models/_token_counts.py)."""

from __future__ import annotations

import threading

from ragsense.models import load_model
from ragsense.models._token_counts import TokenCounts


def test_the_memo_is_bounded_by_characters_and_drops_the_least_recent() -> None:
    calls: list[str] = []
    counts = TokenCounts(lambda s: calls.append(s) or len(s), max_chars=10)
    assert [counts("aaaa"), counts("bbbb"), counts("aaaa")] == [4, 4, 4]  # "aaaa" is now the most recent
    assert counts("cccc") == 4  # 12 characters: "bbbb", the least recent, goes
    assert len(counts) == 2
    counts("aaaa")
    counts("bbbb")
    assert calls == ["aaaa", "bbbb", "cccc", "bbbb"]


def test_threads_sharing_the_memo_get_the_counts_of_their_own_texts() -> None:
    counts = TokenCounts(lambda s: len(s.split()), max_chars=200)
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


def test_the_bundled_model_counts_as_its_tokenizer_does_warm_or_cold() -> None:
    model = load_model("smollm2-135m", device="cpu")
    tokenizer = model.tokenizer  # type: ignore[attr-defined]
    texts = ["Paris is the capital of France.", " Paris is the capital of France.", "", "\n\n", "naïve café"]
    expected = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert [model.count_tokens(t) for t in texts] == expected  # cold
    assert [model.count_tokens(t) for t in texts] == expected  # from the memo
