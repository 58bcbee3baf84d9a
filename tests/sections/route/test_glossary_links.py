"""The route's terms link to the glossary where they first appear, torch's names beside ours."""

from __future__ import annotations

import re

from playground.sections.route.glossary import ANCHOR, TERMS, linked

LINK = re.compile(r"\[([^\]]+)\]\(#" + ANCHOR + r' "([^"]*)"\)')


def test_a_term_links_once_with_its_definition_and_torchs_name():
    text = "The kernel's gradient at loss scale S = 2^15; the kernel again, under autocast."
    shown = linked(text)
    links = LINK.findall(shown)
    assert [words for words, _ in links] == ["kernel's", "loss scale S", "autocast"]
    assert links[0][1] == TERMS["kernel"].replace("`", "")
    assert "(torch: weight)" in shown and "(torch: GradScaler's scale)" in shown
    assert "(torch: torch.autocast)" in shown
    # the second "kernel" is left as written
    assert shown.count("kernel") == 2 + TERMS["kernel"].count("kernel")


def test_terms_link_once_across_a_view_and_never_inside_code_or_a_link():
    seen: set[str] = set()
    first = linked("Without a loss scale the gradients flush to zero.", seen)
    second = linked("A loss scale brings them back; `flushed` in code; [amax](#x).", seen)
    assert len(LINK.findall(first)) == 2 and LINK.findall(second) == []
    assert "`flushed`" in second and "[amax](#x)" in second
    # torch's qualified name already in the text is not repeated beside ours
    assert "(torch: torch.autocast)" not in linked("autocast, as torch.autocast does")
    # a dotted name is not a mention
    assert linked("torch.autocast keeps it") == "torch.autocast keeps it"
