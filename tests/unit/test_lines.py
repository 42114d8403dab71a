"""The one line splitter: lines across chunks, the bound, the end of stream."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror_host.panes.lines import LineSplitter, LineTooLong


def test_lines_split_across_chunks_come_out_whole() -> None:
    splitter = LineSplitter(100)
    assert splitter.feed(b"one\ntw") == [b"one"]
    assert splitter.feed(b"o") == []
    assert splitter.feed(b"\n\nthree\n") == [b"two", b"", b"three"]
    assert splitter.finish() is None


def test_an_unterminated_last_line_is_returned_at_the_end() -> None:
    splitter = LineSplitter(100)
    assert splitter.feed(b"a\nrest") == [b"a"]
    assert splitter.pending == 4
    assert splitter.finish() == b"rest"
    assert splitter.finish() is None


def test_a_line_past_the_bound_is_refused() -> None:
    splitter = LineSplitter(8)
    assert splitter.feed(b"12345678") == []
    with pytest.raises(LineTooLong):
        splitter.feed(b"9")


def test_complete_lines_longer_than_the_bound_in_one_chunk_still_count_as_lines() -> None:
    # The bound is on what is held, not on what passes through in one chunk.
    splitter = LineSplitter(4)
    assert splitter.feed(b"abcdef\nxy") == [b"abcdef"]


@given(st.lists(st.binary(max_size=20), max_size=20), st.data())
def test_any_chunking_gives_the_same_lines(chunks: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(chunks)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    splitter = LineSplitter(1 << 20)
    lines: list[bytes] = []
    previous = 0
    for cut in [*cuts, len(stream)]:
        lines += splitter.feed(stream[previous:cut])
        previous = cut
    last = splitter.finish()
    expected = stream.split(b"\n")
    if expected[-1] == b"":
        expected.pop()
        assert last is None
    else:
        assert last == expected.pop()
    assert lines == expected
