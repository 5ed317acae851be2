"""The shipped prompt sets: broad enough that tuning on them cannot fit a handful of prompts
(issue #8), and well formed."""

from collections import Counter

from assisted.core.settings import EXAMPLES_DIR, load_examples_folder, load_examples_jsonl

JSONL = EXAMPLES_DIR / "prompts-24.jsonl"


def test_the_folder_has_at_least_seven_kinds_of_at_least_three_prompts():
    examples = load_examples_folder()
    per_kind = Counter(example.category for example in examples)
    assert len(per_kind) >= 7, per_kind
    assert min(per_kind.values()) >= 3, per_kind
    assert all(example.prompt.strip() for example in examples)
    assert len({example.label for example in examples}) == len(examples)


def test_the_jsonl_set_loads_24_prompts_in_8_categories_with_unique_ids():
    examples = load_examples_jsonl(JSONL)
    assert len(examples) >= 24
    assert len({example.category for example in examples}) >= 8
    assert all(example.prompt.strip() for example in examples)
    ids = [example.question_id for example in examples]
    assert len(set(ids)) == len(ids)


def test_the_sets_share_no_prompt():
    folder = {example.prompt for example in load_examples_folder()}
    assert not folder & {example.prompt for example in load_examples_jsonl(JSONL)}


def test_the_benchmark_tab_offers_every_prompt_of_the_largest_kind():
    from assisted.ui.benchmark.tab import BENCH_MAX_PROMPTS

    per_kind = Counter(example.category for example in load_examples_folder())
    assert max(per_kind.values()) == BENCH_MAX_PROMPTS


def test_the_long_passages_set_holds_long_prompts_in_one_category():
    examples = load_examples_jsonl(EXAMPLES_DIR / "long-passages.jsonl")
    assert len(examples) >= 4
    assert {example.category for example in examples} == {"long-short"}
    assert all(len(example.prompt) > 2000 for example in examples)
    assert not {e.prompt for e in examples} & {
        e.prompt for e in load_examples_folder() + load_examples_jsonl(JSONL)
    }
