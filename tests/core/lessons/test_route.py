"""The route (playground.core.lessons.route): every lesson is taught by exactly one chapter, in
the story's order, and every id a chapter names is a lesson's."""

from playground.core.lessons import LESSONS, DynamicsLesson
from playground.core.lessons.route import CHAPTERS, ROUTE, taught
from playground.sections.route.view import PICTURES


def test_every_lesson_is_taught_once():
    every = [name for chapter in ROUTE for name in taught(chapter)]
    assert sorted(every) == sorted(LESSONS) and len(every) == len(set(every))
    assert len(CHAPTERS) == len(ROUTE)  # chapter ids are unique


def test_each_chapter_names_lessons_of_the_right_kind_and_a_chart_for_its_run():
    for chapter in ROUTE:
        lesson = LESSONS[chapter.lesson]
        assert chapter.chart in PICTURES, chapter.id
        assert chapter.question.endswith(("?", ".")), chapter.id
        if chapter.payoff:
            assert isinstance(LESSONS[chapter.payoff], DynamicsLesson)
        if chapter.contrast:  # the same kind of run as the chapter's lesson
            assert isinstance(LESSONS[chapter.contrast], type(lesson)), chapter.id
        if chapter.payoff_contrast:
            assert isinstance(LESSONS[chapter.payoff_contrast], DynamicsLesson)


def test_the_route_tells_the_story_in_order():
    # The loss-scaling story first (as the issue orders it), precision per operation last.
    order = [chapter.lesson for chapter in ROUTE]
    story = [
        "bfloat16-agrees",
        "float16-flush",
        "float16-scaled",
        "float16-overflow",
        "train-float16-dynamic",
        "train-bfloat16-unscaled",
        "train-pure-nearest",
    ]
    assert order[: len(story)] == story
    assert order.index("train-float8-delayed") < order.index("block-outlier")
    assert order[-7:-4] == ["layernorm-overflow", "classification-rounds", "bfloat16-loss-steps"]
    # The transformer block next: float16 attention, then bfloat16, then the SwiGLU.
    assert order[-4:-1] == ["attention-overflow", "bfloat16-attention", "swiglu-outlier"]
    # The ending sums the route up, NVFP4 in it.
    assert order[-1] == "every-format" and ROUTE[-1].sums_up
    assert [chapter.id for chapter in ROUTE if chapter.sums_up] == ["every-format"]
    assert all(
        CHAPTERS[c].title.startswith("The transformer block")
        for c in ("attention-float16", "attention-bfloat16", "swiglu-outlier")
    )
    # A step lesson whose loss barely moves leads to the training run it changes.
    assert CHAPTERS["float16-loss-scale"].payoff == "train-float16-scaled"
    assert CHAPTERS["float16-loss-scale"].payoff_contrast == "train-float16-unscaled"
    assert CHAPTERS["float16-no-scale"].payoff == "train-float16-unscaled"
