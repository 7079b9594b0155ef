"""A handler may pass over the stages that directly follow its own (``ctx.skip_following``): the
job moves past them in one transition, never past the last stage (publishing stays there)."""

from __future__ import annotations

from jobs.pipelines import Pipeline, Stage


def _noop(ctx: object) -> None:
    return None


PIPELINE = Pipeline(kind="toy.skip", stages=tuple(Stage(name, _noop, weight=1) for name in "abcd"))


def names(result: tuple[Stage | None, list[str]]) -> tuple[str | None, list[str]]:
    stage, passed = result
    return (stage.name if stage else None, passed)


def test_nothing_to_skip_is_the_next_stage():
    assert names(PIPELINE.stages_to_pass("a", ())) == ("b", [])


def test_directly_following_named_stages_are_passed_over():
    assert names(PIPELINE.stages_to_pass("a", {"b", "c"})) == ("d", ["b", "c"])


def test_a_named_stage_that_does_not_directly_follow_is_not_passed_over():
    assert names(PIPELINE.stages_to_pass("a", {"c"})) == ("b", [])


def test_the_last_stage_is_never_passed_over():
    assert names(PIPELINE.stages_to_pass("b", {"c", "d"})) == ("d", ["c"])
    assert names(PIPELINE.stages_to_pass("d", {"a"})) == (None, [])
