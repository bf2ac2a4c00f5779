"""gradgate.model.lines: the lines where words occur."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from gradgate.model.lines import LineIndex, split_lines


def _holding(text: str, words: set[str]) -> list[int]:
    """The definition: the lines, numbered as split_lines splits them, that hold a word."""
    return [n for n, line in enumerate(split_lines(text), 1) if any(w in line for w in words)]


def test_the_lines_that_hold_one_of_the_words():
    text = "import torch\nx = torch.is_grad_enabled()  # is_grad_enabled\r\n\ny = 'grad_enabled'\rz = 1"
    index = LineIndex(text)
    assert index.lines_with({"is_grad_enabled", "grad_enabled"}) == [2, 4]
    assert index.lines_with({"torch"}) == [1, 2]
    assert index.lines_with({"absent"}) == []
    assert index.lines_with(set()) == []


def test_overlapping_words_and_words_repeated_on_a_line_count_the_line_once():
    index = LineIndex("is_grad_enabled grad_enabled is_grad_enabled\nenabled\n")
    assert index.lines_with({"grad_enabled", "is_grad_enabled", "enabled"}) == [1, 2]


_PIECES = st.sampled_from(["a", "b", "ab", "def ", "def\f", "x\\", " ", "\n", "\r", "\r\n", "\f", "é"])


@given(
    st.lists(_PIECES, max_size=40).map("".join), st.sets(st.sampled_from(["a", "ab", "ba", "def ", "x\\", "\f", "b b"]))
)
def test_the_lines_found_are_the_lines_that_hold_a_word(text, words):
    assert LineIndex(text).lines_with(words) == _holding(text, words)


_LINE_DEFINITION = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@given(
    st.lists(st.sampled_from(["a", " ", "\n", "\r", "\r\n", "\f", "\x0b", "\x1c", "\u2028", "é"]), max_size=30).map(
        "".join
    )
)
def test_lines_split_where_the_tokenizer_splits_them(text):
    assert split_lines(text) == _LINE_DEFINITION.findall(text)
    assert "".join(split_lines(text)) == text


def test_a_line_that_is_not_ascii_is_searched_in_the_form_python_reads_its_names_in():
    index = LineIndex("x = 1  # é\nself.\ufb01eld = 2\nt.\uff52egister_hook(f)\n")
    assert index.lines_with({"field"}) == [2]
    assert index.lines_with({"register_hook"}) == [3]
    assert index.lines_with({"x = 1"}) == [1]
