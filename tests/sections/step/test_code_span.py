"""The headline's file name is one code span whatever it holds, read back by a CommonMark
parser (markdown-it, as independent of the code under test as the page's renderer)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from helpers import examples
from playground.sections.step.tab import code_span


def _spans(markdown: str) -> list[str]:
    tokens = MarkdownIt("commonmark").parseInline(markdown)
    return [
        child.content for token in tokens for child in token.children if child.type == "code_inline"
    ]


@settings(max_examples=examples(60), deadline=None)
@given(st.text(alphabet="ab`. ", min_size=1, max_size=12).filter(lambda text: text.strip()))
def test_any_name_reads_back_as_one_code_span(name):
    assert _spans(f"your file {code_span(name)}, 3 rows") == [name]


def test_a_name_without_backticks_keeps_one_fence():
    assert code_span("mine.csv") == "`mine.csv`"
    assert code_span("a`b") == "``a`b``"
