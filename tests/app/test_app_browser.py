"""The app in a real browser: Debian's chromium driven by Playwright, on tiny pairs.

Skipped where Playwright or chromium is missing (`.ci/run` installs both). Screenshots go
to `screenshots/` (git-ignored).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

sync_api = pytest.importorskip("playwright.sync_api")

import app  # noqa: E402
from assisted.core.settings import EXAMPLES_DIR  # noqa: E402
from assisted.models import pairs  # noqa: E402
from assisted.models.registry import PAIRS  # noqa: E402
from tests.serve import launch  # noqa: E402

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "screenshots"
TIMEOUT_MS = 120_000  # for runs; finding an element takes seconds


@pytest.fixture(scope="module")
def registry(tiny_dirs):
    target = str(tiny_dirs["target"])
    return {
        "tiny": pairs.custom_pair(target, target),
        "tiny-other": pairs.custom_pair(target, str(tiny_dirs["other"])),
    }


@pytest.fixture(scope="module")
def url(registry):
    config = app.AppConfig(registry=registry, default_pair="tiny", dtype="float32")
    demo, url = launch(config)
    yield url
    demo.close()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no chromium at {CHROMIUM}")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, url):
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.set_default_timeout(20_000)
    page.goto(url)
    sync_api.expect(page.locator("#pair-status")).to_contain_text("Ready", timeout=TIMEOUT_MS)
    yield page
    page.close()


def set_max_new_tokens(page, value: int) -> None:
    page.locator("#settings").get_by_text("Settings", exact=True).click()
    number = page.locator("#max-new-tokens input[type=number]")
    # The slider may still be settling just after the accordion opens: type until it holds.
    for _ in range(10):
        number.fill(str(value))
        number.press("Tab")
        page.wait_for_timeout(200)
        if number.input_value() == str(value):
            break
    sync_api.expect(page.locator("#max-new-tokens input[type=range]")).to_have_value(str(value))


def test_compare_in_the_browser_fills_both_columns_and_stat_cards(page):
    set_max_new_tokens(page, 24)
    page.locator("#prompt textarea").fill("def add(a, b):")
    page.locator("#compare").click()
    expect = sync_api.expect
    expect(page.locator("#status")).to_contain_text("Done", timeout=TIMEOUT_MS)
    expect(page.locator("#plain-text .run-text")).not_to_be_empty()
    expect(page.locator("#assisted-text .step")).not_to_have_count(0)
    plain_card, assisted_card = page.locator("#plain-card"), page.locator("#assisted-card")
    for label in ("time to first token", "tokens/s", "total time", "target steps"):
        expect(plain_card).to_contain_text(label)
        expect(assisted_card).to_contain_text(label)
    for label in ("drafted", "accepted", "acceptance rate", "tokens per step"):
        expect(assisted_card).to_contain_text(label)
    expect(assisted_card).to_contain_text("100%")  # the assistant is the target itself
    expect(page.locator("#summary")).to_contain_text("Identical")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "browser-tiny.png"), full_page=True)

    page.locator("#replay").click()
    expect(page.locator("#status")).to_contain_text("Race replayed", timeout=TIMEOUT_MS)
    expect(page.locator("#assisted-text .step")).not_to_have_count(0)


def test_a_divergence_is_explained_in_the_summary_and_marked_in_both_columns(page, registry):
    pair = pairs.loaded(registry["tiny"], "auto", "float32")
    other = pair.tokenizer.convert_tokens_to_ids("Z")

    def wrong_verification(module, args, output):
        # A test double of a bug: every verification (the only passes that keep several
        # rows of logits) makes "Z" win its first row, whatever the target scored.
        if output.logits.shape[1] > 1:
            output.logits[:, 0, other] += 50.0

    handle = pair.target.register_forward_hook(wrong_verification)
    try:
        set_max_new_tokens(page, 24)
        page.locator("#prompt textarea").fill("def add(a, b):")
        page.locator("#compare").click()
        expect = sync_api.expect
        expect(page.locator("#status")).to_contain_text("Done", timeout=TIMEOUT_MS)
    finally:
        handle.remove()
    summary = page.locator("#summary")
    expect(summary).to_contain_text(re.compile(r"Diverged at token \d+"))
    expect(summary).to_contain_text("'Z'")
    expect(summary).to_contain_text("This looks like a bug")
    expect(page.locator("#plain-text mark.diverged")).to_have_count(1)
    expect(page.locator("#assisted-text mark.diverged")).to_have_count(1)
    expect(page.locator("#assisted-text mark.diverged")).to_have_text("Z")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "browser-divergence.png"), full_page=True)


def test_an_auto_run_charts_its_draft_lengths_and_prices_its_drafts(page):
    set_max_new_tokens(page, 24)
    page.locator("#schedule").get_by_label("auto").check()
    page.locator("#prompt textarea").fill("def add(a, b):")
    page.locator("#compare").click()
    expect = sync_api.expect
    expect(page.locator("#status")).to_contain_text("Done", timeout=TIMEOUT_MS)
    expect(page.locator("#summary")).to_contain_text("Cost model: verifying")
    # The oracle: in words in the summary, and its schedule in the chart's legend.
    expect(page.locator("#summary")).to_contain_text(
        re.compile(r"Oracle: In hindsight the best schedule would take \d+ steps?")
    )
    chart = page.locator("#draft-length-chart")
    expect(chart).to_contain_text("Draft length per step")
    expect(chart.locator("canvas, svg").first).to_be_visible()
    # Its points (the legend names the series from the start, the points come at the end).
    overlay = chart.locator('[aria-label*="source: oracle, in hindsight"]')
    expect(overlay.first).to_be_attached()
    assert overlay.count() >= 1
    step = page.locator("#assisted-text .step").first
    step.hover()
    expect(step.locator(".tip")).to_contain_text(re.compile(r"auto chose γ = \d"))
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "browser-auto.png"), full_page=True)
    # The Benchmark tab's estimate now runs at the pace this comparison measured.
    page.locator("#tab-benchmark-button, button[role=tab]:has-text('Benchmark')").first.click()
    expect(page.locator("#bench-plan")).to_contain_text("measured in the latest plain run on")


def test_a_sampled_run_shows_each_drafts_p_and_q_and_marks_corrected_and_bonus_tokens(page):
    set_max_new_tokens(page, 48)
    page.locator("#settings").get_by_label("sampling").check()
    page.locator("#prompt textarea").fill("def add(a, b):")
    page.locator("#compare").click()
    expect = sync_api.expect
    expect(page.locator("#status")).to_contain_text("Done", timeout=TIMEOUT_MS)
    summary = page.locator("#summary")
    expect(summary).to_contain_text("Two draws")
    expect(summary).to_contain_text(
        "not checked in this run: run python -m assisted.bench.sampling_check"
    )
    expect(summary).to_contain_text(re.compile(r"Acceptance: observed [\d.]+%, expected [\d.]+%"))
    expect(summary).not_to_contain_text("Identical")
    expect(summary).not_to_contain_text("Diverged")
    expect(page.locator("#assisted-card")).to_contain_text("expected acceptance")
    # The assistant is the target itself, but it samples warped twice (Transformers 5.2x):
    # some drafts are refused (a corrected token follows), others accepted whole (a bonus).
    text = page.locator("#assisted-text")
    expect(text.locator("mark.diverged")).to_have_count(0)
    expect(text.locator(".own.corrected")).not_to_have_count(0)
    expect(text.locator(".own.bonus")).not_to_have_count(0)
    step = text.locator(".step").filter(has=page.locator(".own.corrected")).first
    step.hover()
    details = step.locator(".tip")
    figures = r"p [\d.e-]+ · q [\d.e-]+ · min\(1, p/q\) [\d.e-]+"
    expect(details).to_contain_text(re.compile(figures + " · rejected"))
    expect(details).to_contain_text("corrected: after the rejection, drawn from max(0, p − q)")
    legend = page.locator(".legend").filter(has=page.locator(".own.corrected"))
    expect(legend.locator(".own.bonus")).to_have_text("bonus")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "browser-sampled.png"), full_page=True)


def test_stop_in_the_browser_keeps_the_text_and_marks_it_stopped(page, slow_steps):
    set_max_new_tokens(page, 220)
    page.locator("#prompt textarea").fill("def add(a, b):")
    page.locator("#compare").click()
    expect = sync_api.expect
    expect(page.locator("#status")).to_contain_text("Running plain", timeout=TIMEOUT_MS)
    running = page.locator("#plain-text .run-text.running")
    expect(running).to_be_visible()  # the open text renders, its cursor after it
    cursor = running.evaluate("node => getComputedStyle(node, '::after').content")
    assert cursor == '"▍"'
    page.locator("#stop").click()
    expect(page.locator("#status")).to_contain_text("Stopped", timeout=TIMEOUT_MS)
    expect(page.locator("#plain-text")).to_contain_text("stopped")
    expect(page.locator("#plain-card")).to_contain_text("stopped")
    expect(page.locator("#assisted-text")).to_contain_text("Not run")


def test_an_empty_prompt_in_the_browser_shows_a_warning(page):
    page.locator("#compare").click()
    sync_api.expect(page.get_by_text("Type a prompt first").first).to_be_visible()
    sync_api.expect(page.locator("#status")).to_contain_text("prompt is empty")
    # A warning, not an error (over the API, the same request is an error: test_app).
    sync_api.expect(page.get_by_text("Error", exact=True)).to_have_count(0)


def choose_pair(page, label: str) -> None:
    page.locator("#pair input").click()
    page.get_by_role("option", name=label).click()


def test_pairs_load_on_demand_and_a_bad_custom_pair_keeps_the_loaded_one(page):
    status = page.locator("#pair-status")
    choose_pair(page, "tiny-other")
    sync_api.expect(status).to_contain_text("other", timeout=TIMEOUT_MS)
    choose_pair(page, "custom: enter target / assistant ids")
    sync_api.expect(status).to_contain_text("Load pair")
    page.get_by_label("Target model id").fill("no such/model!")
    page.get_by_role("button", name="Load pair").click()
    sync_api.expect(page.get_by_text("not a model id").first).to_be_visible()
    # The pairs loaded before are still in memory and usable.
    choose_pair(page, "tiny-other")
    sync_api.expect(status).to_contain_text("Ready", timeout=TIMEOUT_MS)
    sync_api.expect(status).to_contain_text("other")
    # What the pairs in memory hold, in the status line.
    sync_api.expect(status).to_contain_text(re.compile(r"In memory: .+, \d+\.\d GB \(at most"))


def compare_on_the_other_pair(page, max_new_tokens: int = 24) -> None:
    """A finished comparison on `tiny-other`: two random models, so most drafts are rejected."""
    choose_pair(page, "tiny-other")
    sync_api.expect(page.locator("#pair-status")).to_contain_text("other", timeout=TIMEOUT_MS)
    set_max_new_tokens(page, max_new_tokens)
    page.locator("#prompt textarea").fill("def add(a, b):")
    page.locator("#compare").click()
    sync_api.expect(page.locator("#status")).to_contain_text("Done", timeout=TIMEOUT_MS)


def test_rejected_drafts_are_struck_through_and_a_steps_details_show_on_hover(page):
    compare_on_the_other_pair(page)
    expect = sync_api.expect
    rejected = page.locator("#assisted-text .rej")
    expect(rejected.first).to_be_visible()
    step = page.locator("#assisted-text .step").filter(has=page.locator(".rej")).first
    details = step.locator(".tip")
    expect(details).to_be_hidden()
    step.hover()
    expect(details).to_be_visible()
    expect(details).to_contain_text(re.compile(r"step \d+ · drafted \d+ · accepted \d+ · \d+ ms"))
    expect(details).to_contain_text("rejected")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "browser-rejected-drafts.png"), full_page=True)
    page.mouse.move(0, 0)
    expect(details).to_be_hidden()
    step.focus()  # a step reached from the keyboard shows its details too
    expect(details).to_be_visible()


def test_the_assisted_text_is_one_tab_stop_and_the_arrow_keys_move_between_its_steps(page):
    compare_on_the_other_pair(page)
    expect = sync_api.expect
    steps = page.locator("#assisted-text .step")
    expect(steps.nth(2)).to_be_attached()  # three steps at least
    page.locator("#show-rejected").focus()  # the control just before the text
    page.keyboard.press("Tab")
    expect(steps.first).to_be_focused()
    page.keyboard.press("ArrowRight")
    expect(steps.nth(1)).to_be_focused()
    expect(steps.nth(1).locator(".tip")).to_be_visible()  # its details, as on hover
    expect(steps.first.locator(".tip")).to_be_hidden()
    page.keyboard.press("End")
    expect(steps.last).to_be_focused()
    page.keyboard.press("Home")
    expect(steps.first).to_be_focused()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Tab")  # past the text, not to its next step
    assert page.evaluate("!document.activeElement.closest('#assisted-text')")
    page.keyboard.press("Shift+Tab")  # back to the step last visited
    expect(steps.nth(1)).to_be_focused()


def test_the_toggle_hides_rejected_drafts_without_a_rerun_and_through_the_replay(page):
    compare_on_the_other_pair(page)
    expect = sync_api.expect
    rejected = page.locator("#assisted-text .rej")
    toggle = page.locator("#show-rejected")
    expect(toggle).to_be_checked()
    expect(rejected.first).to_be_visible()
    toggle.uncheck()
    expect(rejected.first).to_be_hidden()
    expect(page.locator("#status")).to_contain_text("Done")  # nothing ran again
    page.locator("#replay").click()
    expect(page.locator("#status")).to_contain_text("Race replayed", timeout=TIMEOUT_MS)
    expect(rejected).not_to_have_count(0)
    expect(rejected.first).to_be_hidden()
    toggle.check()
    expect(rejected.first).to_be_visible()


def test_on_a_phone_the_columns_stack_and_the_text_wraps(browser, url):
    page = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True)
    page.set_default_timeout(20_000)
    try:
        page.goto(url)
        sync_api.expect(page.locator("#pair-status")).to_contain_text("Ready", timeout=TIMEOUT_MS)
        compare_on_the_other_pair(page)
        plain_card = page.locator("#plain-card").bounding_box()
        assisted = page.locator("#assisted-text").bounding_box()
        assert assisted["y"] > plain_card["y"] + plain_card["height"]  # one column under the other
        assert page.evaluate("document.documentElement.scrollWidth") <= 390  # nothing runs off
        SCREENSHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "browser-phone.png"), full_page=True)
    finally:
        page.close()


@pytest.fixture(scope="module")
def url_without_custom_pairs(tiny_dirs):
    target = str(tiny_dirs["target"])
    registry = {"tiny": pairs.custom_pair(target, target)}
    config = app.AppConfig(
        registry=registry, default_pair="tiny", dtype="float32", allow_custom=False
    )
    demo, url = launch(config)
    yield url
    demo.close()


def test_without_custom_pairs_the_inputs_are_hidden(browser, url_without_custom_pairs):
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.set_default_timeout(20_000)
    try:
        page.goto(url_without_custom_pairs)
        expect = sync_api.expect
        expect(page.locator("#pair-status")).to_contain_text("Ready", timeout=TIMEOUT_MS)
        page.locator("#pair input").click()
        expect(page.get_by_role("option")).to_have_count(1)  # no "custom" choice
        expect(page.get_by_role("option", name="tiny")).to_be_visible()
        expect(page.get_by_label("Target model id")).to_be_hidden()
        expect(page.get_by_role("button", name="Load pair")).to_be_hidden()
    finally:
        page.close()


@pytest.fixture(scope="module")
def url_of_the_embedded_pair():
    demo, url = launch(app.AppConfig(registry={"embedded": PAIRS["embedded"]}))
    yield url
    demo.close()


@pytest.mark.integration
def test_no_rejected_draft_of_a_summary_copies_the_chat_template(browser, url_of_the_embedded_pair):
    """Transformers' lookup proposed the template's system prompt ("You are Qwen, created by
    Alibaba") at the first step of this summary and three times after; the default pair's
    drafts come from the user's text, the output and the assistant only."""
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.set_default_timeout(20_000)
    try:
        page.goto(url_of_the_embedded_pair)
        expect = sync_api.expect
        expect(page.locator("#pair-status")).to_contain_text("Ready", timeout=4 * TIMEOUT_MS)
        set_max_new_tokens(page, 40)
        prompt = (EXAMPLES_DIR / "summarise" / "meeting-notes.txt").read_text()
        page.locator("#prompt textarea").fill(prompt)
        page.locator("#compare").click()
        expect(page.locator("#status")).to_contain_text("Done", timeout=4 * TIMEOUT_MS)
        expect(page.locator("#assisted-text .step")).not_to_have_count(0)
        rejected = page.locator("#assisted-text .rej").all_inner_texts()
        template = ("You are", "Qwen", "Alibaba", "helpful assistant", "im_start", "im_end")
        assert not [text for text in rejected if any(part in text for part in template)]
        SCREENSHOTS.mkdir(exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "browser-embedded-summary.png"), full_page=True)
    finally:
        page.close()


def set_number(page, elem_id: str, value: int) -> None:
    """A slider's number box set to `value`, as a visitor types it."""
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def run_shootout(page, rounds: int = 1) -> None:
    """A finished shoot-out of 8 tokens a lane on the Shoot-out tab: its ranking says how
    many plain runs it made, which tells it from the one before on the page."""
    page.get_by_role("tab", name="Shoot-out").click()
    page.locator("#shootout-prompt textarea").fill("def add(a, b):")
    set_number(page, "shootout-max-new-tokens", 8)
    set_number(page, "shootout-repeats", rounds)
    sync_api.expect(page.locator("#shootout-repeats input[type=range]")).to_have_value(str(rounds))
    page.locator("#shootout-run").click()
    plain_runs = re.compile(rf"One plain baseline: {rounds} runs? at")
    sync_api.expect(page.locator("#shootout-why")).to_contain_text(plain_runs, timeout=TIMEOUT_MS)
    sync_api.expect(page.locator("#shootout-status")).to_contain_text("Done")


def test_the_shootout_tab_streams_the_lanes_and_ranks_them(page):
    expect = sync_api.expect
    run_shootout(page)
    expect(page.locator("#shootout-lanes")).to_contain_text("tok/s")
    expect(page.locator("#shootout-why")).to_contain_text(re.compile("won at|No lane beat"))
    ranking = page.locator("#shootout-ranking")
    for lane in ("auto", "Transformers' defaults", "heuristic", "auto (int4-wo)", "prompt lookup"):
        expect(ranking).to_contain_text(lane)
    expect(ranking).to_contain_text("identical")
    SCREENSHOTS.mkdir(exist_ok=True)
    page.locator("#tab-shootout").screenshot(path=SCREENSHOTS / "shootout.png")


# Every Vega chart inside an element as the browser drew it (Gradio draws its charts as
# SVG): its title, its axes' and legends' descriptions, the legend's entries that show
# (inside the chart's block, which cuts off what overflows it), and each of its marks (a
# line, a bar, a point) with its description, which names the values it stands for, and
# its size.
VEGA_CHARTS_JS = """
root => Array.from(root.querySelectorAll("svg.marks")).map(svg => {
    const block = svg.closest(".block").getBoundingClientRect();
    const inside = node => {
        const box = node.getBoundingClientRect();
        return box.left >= block.left && box.right <= block.right
            && box.top >= block.top && box.bottom <= block.bottom;
    };
    const label = node => node.getAttribute("aria-label") || "";
    const described = kind =>
        Array.from(svg.querySelectorAll(`[aria-roledescription="${kind}"]`)).map(label);
    const furniture = ["axis", "legend", "title"];
    const marks = Array.from(svg.querySelectorAll('[role="graphics-symbol"]')).filter(
        node => !furniture.includes(node.getAttribute("aria-roledescription")));
    return {
        title: described("title").join(" "),
        axes: described("axis"),
        legends: described("legend"),
        legend_shown: Array.from(svg.querySelectorAll(".role-legend-label text"))
            .filter(inside).map(node => node.textContent),
        marks: marks.map(node => {
            const box = node.getBBox();
            return {kind: node.getAttribute("aria-roledescription"), label: label(node),
                    size: box.width + box.height};
        }),
    };
})
"""


def drawn_marks(chart: dict, kind: str) -> list[dict]:
    """The chart's marks of `kind` that the browser drew: a shape with a size, standing for
    values that all exist (a value missing from the chart's axes reads "undefined")."""
    return [
        mark
        for mark in chart["marks"]
        if mark["kind"] == kind
        and mark["size"] > 0
        and "undefined" not in mark["label"]
        and "NaN" not in mark["label"]
    ]


def drawn_charts(page, scope: str, kinds: dict[str, str]) -> dict[str, dict]:
    """The charts inside `scope` by title, once each one titled in `kinds` (a part of its
    title: the kind of mark it draws) has drawn a mark of its kind (Vega draws a new value
    a moment after it arrives), or after 10 s without."""
    for _ in range(50):
        charts = page.locator(scope).evaluate(VEGA_CHARTS_JS)
        found = {
            part: next((chart for chart in charts if part in chart["title"]), None)
            for part in kinds
        }
        if all(chart and drawn_marks(chart, kinds[part]) for part, chart in found.items()):
            break
        page.wait_for_timeout(200)
    missing = [part for part, chart in found.items() if chart is None]
    assert not missing, f"no chart titled {missing} in {scope}"
    return found


def assert_lines_per_lane(chart: dict, lanes: int) -> None:
    """A line drawn per lane on two continuous axes, and a legend that shows each lane."""
    assert all("linear scale" in axis for axis in chart["axes"]), chart["axes"]
    assert len(drawn_marks(chart, "line mark")) == lanes, chart["marks"]
    assert [f"with {lanes} values" in legend for legend in chart["legends"]] == [True]
    assert len(chart["legend_shown"]) == lanes, chart["legend_shown"]


SHOOTOUT_CHARTS = {"The race": "line mark", "Speedup at a constant γ": "line mark"}


def assert_shootout_charts_drawn(page) -> None:
    """The race draws a line for plain and one per ranked lane; the sweep one for each of
    the two best lanes (on the tiny pair drafting for itself, every lane's run replays)."""
    status = page.locator("#shootout-status").inner_text()
    ranked = int(re.search(r"(\d+) lanes ranked", status).group(1))
    charts = drawn_charts(page, "#tab-shootout", SHOOTOUT_CHARTS)
    assert_lines_per_lane(charts["The race"], ranked + 1)
    assert_lines_per_lane(charts["Speedup at a constant γ"], 2)


@pytest.mark.parametrize("rounds", [1, 3])
def test_the_shootout_charts_draw_a_line_per_lane_from_a_fresh_page(page, rounds):
    run_shootout(page, rounds)
    assert_shootout_charts_drawn(page)
    SCREENSHOTS.mkdir(exist_ok=True)
    page.locator("#tab-shootout").screenshot(path=SCREENSHOTS / f"shootout-{rounds}-rounds.png")


def test_a_second_shootout_on_the_same_page_draws_its_own_lines(page):
    run_shootout(page, 1)
    run_shootout(page, 2)
    assert_shootout_charts_drawn(page)


COMPARE_CHARTS = {
    "New tokens over time": "line mark",
    "Accepted candidates per step": "bar",
    "Acceptance by draft position": "bar",
    "Time per step": "bar",
    "Draft length per step": "point",
}


def test_the_compare_charts_draw_their_marks(page):
    set_max_new_tokens(page, 24)
    # A constant γ: every step drafts (`auto` may draft nothing on the tiny pair), so every
    # chart has something to draw.
    page.locator("#schedule").get_by_label("constant").check()
    page.locator("#prompt textarea").fill("def add(a, b):")
    page.locator("#compare").click()
    sync_api.expect(page.locator("#status")).to_contain_text("Done", timeout=TIMEOUT_MS)
    charts = drawn_charts(page, "#tab-compare", COMPARE_CHARTS)
    for part, kind in COMPARE_CHARTS.items():
        assert drawn_marks(charts[part], kind), (part, charts[part]["marks"])
    assert_lines_per_lane(charts["New tokens over time"], 2)  # plain and assisted


# The share of an image's pixels in the benchmark chart's first drafter's colour (#1f77b4,
# `assisted.bench.reporting`), its measured bars.
FIRST_DRAFTER_PIXELS_JS = """
img => {
    const canvas = document.createElement("canvas");
    [canvas.width, canvas.height] = [img.naturalWidth, img.naturalHeight];
    const context = canvas.getContext("2d");
    context.drawImage(img, 0, 0);
    const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
    let found = 0;
    for (let i = 0; i < pixels.length; i += 4) {
        const [r, g, b] = [pixels[i], pixels[i + 1], pixels[i + 2]];
        if (Math.abs(r - 31) < 8 && Math.abs(g - 119) < 8 && Math.abs(b - 180) < 8) found++;
    }
    return found / (pixels.length / 4);
}
"""


def test_the_benchmark_chart_draws_its_bars(page):
    page.get_by_role("tab", name="Benchmark").click()
    for choice in page.locator("#bench-categories label").all():
        choice.locator("input").set_checked(choice.inner_text().strip() == "chat")
    set_number(page, "bench-max-new-tokens", 8)
    page.locator("#bench-run").click()
    sync_api.expect(page.locator("#bench-status")).to_contain_text("Done", timeout=TIMEOUT_MS)
    image = page.locator("#bench-chart img")
    sync_api.expect(image).to_be_visible()
    assert image.evaluate("img => img.complete && img.naturalWidth") > 0
    assert image.evaluate(FIRST_DRAFTER_PIXELS_JS) > 0.001
    SCREENSHOTS.mkdir(exist_ok=True)
    page.locator("#bench-chart").screenshot(path=SCREENSHOTS / "benchmark-chart.png")
