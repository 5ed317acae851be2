"""The page around the tabs: its title, header, the explanation under the tabs, and the
style sheet and script (passed to `launch()`, as Gradio 6 takes them)."""

TITLE = "Assisted generation, side by side"
HEADER = (
    "# Assisted generation, side by side\n"
    "A small **assistant** model drafts tokens; the large **target** verifies them in "
    "one pass. Type a prompt and press **Compare**: plain decoding runs first, then "
    "assisted generation, and both stream here with their statistics. The "
    "**Benchmark** tab times the example prompts by category."
)
EXPLANATION = """
**Assisted generation** (speculative decoding) pairs the large *target* model with a small
*assistant*. Each step, the assistant drafts a few tokens (γ) one by one; the target then
checks all of them in **one** forward pass, keeps the longest prefix it agrees with
(*accepted*) and adds one token of its own. With greedy decoding the output is exactly the
target's own output; with sampling it follows the target's distribution.

**Why it helps.** Generating one token with a large model is limited by memory bandwidth:
every step streams all the weights through the processor to do little arithmetic. Checking
γ + 1 positions at once costs about the same as one step, so each accepted token is nearly
free, and the small assistant drafts cheaply.

**When it does not.** When the assistant guesses badly (low acceptance rate: open chat,
creative text), the drafting time is wasted. On CPUs, verification of several positions is
*not* free: compute, not bandwidth, dominates, so long drafts cost real time. Prompts whose
answers copy from the input (editing given code, summarising or answering from a passage)
accept the most. The stat cards and the speedup Leviathan et al.'s model fits to the run
(under the `auto` schedule, the speedup the policy predicted) show which case a run is in.

**Quantize the assistant, not the target.** The target checks every drafted token, so an
int8 assistant can only change how many drafts are accepted and how fast they come, never
the output: it stays the target's own. Quantizing the target would change the answer
itself, because its rounding decides which token wins; on a CPU an int8 or 4-bit assistant drafts
about twice as fast as a bf16 one, and the cost ratio c shows it.
"""
CSS = """
.run-text { white-space: pre-wrap; word-break: break-word; font-family: var(--font-mono);
  font-size: 0.9rem; line-height: 1.7; min-height: 12rem; max-height: 28rem; overflow-y: auto;
  padding: 0.6rem 0.8rem; border: 1px solid var(--border-color-primary);
  border-radius: var(--radius-md); background: var(--background-fill-secondary); }
.run-text.empty { color: var(--body-text-color-subdued); font-family: var(--font); }
.run-text .step { border-radius: 3px; box-shadow: inset 0 0 0 1px rgba(16, 122, 87, 0.35);
  margin-right: 1px; }
.run-text .step:hover, .run-text .step:focus { outline: 2px solid var(--color-accent);
  outline-offset: 1px; }
.run-text .acc, .legend .acc { background: rgba(16, 185, 129, 0.30); }
.run-text .own, .legend .own { background: rgba(99, 102, 241, 0.16); }
/* Under sampling, the target's token after a rejection (corrected) and after a fully
   accepted draft (bonus): two underlines, apart from the red of a greedy divergence. */
.run-text .own.corrected, .legend .own.corrected { text-decoration: underline wavy #d97706;
  text-decoration-thickness: 1.5px; text-underline-offset: 3px; }
.run-text .own.bonus, .legend .own.bonus { text-decoration: underline double #0284c7;
  text-underline-offset: 3px; }
.run-text .rej, .legend .rej { text-decoration: line-through;
  color: var(--body-text-color-subdued); }
.run-text .rej { opacity: 0.75; user-select: none; }
/* The token where the two runs first differ, in both columns. */
.run-text mark.diverged { background: rgba(220, 38, 38, 0.22); color: inherit;
  box-shadow: inset 0 -2px 0 #dc2626; border-radius: 2px; }
/* "show rejected drafts" unticked: the remainders go (a step's details still name them). */
body:has(#show-rejected:not(:checked)) #assisted-text .rej { display: none; }
/* A step's details, on hover and keyboard focus: just below the text box, positioned from
   .run-box so the text's scrolling does not clip them (compare.format.run_html). */
.run-box { position: relative; }
.run-text .tip { display: none; position: absolute; z-index: 30; left: 0; right: 0;
  top: calc(100% + 0.3rem); padding: 0.4rem 0.6rem; font-family: var(--font);
  font-size: 0.8rem; line-height: 1.5; color: var(--body-text-color);
  background: var(--background-fill-primary); border: 1px solid var(--border-color-primary);
  border-radius: var(--radius-md); box-shadow: var(--shadow-drop-lg); pointer-events: none; }
.run-text .step:hover .tip, .run-text .step:focus .tip { display: block; }
/* Both legends take the assisted one's five lines, so the two texts start level. */
.legend { font-size: 0.8rem; color: var(--body-text-color-subdued); margin: 0.2rem 0 0.4rem;
  line-height: 1.7; min-height: 8.5em; }
@media (max-width: 640px) { .legend { min-height: 0; } }  /* the columns stack */
.legend .toggle { color: var(--body-text-color); cursor: pointer; }
.legend .tok { padding: 0 0.3rem; border-radius: 3px; color: var(--body-text-color); }
/* A running text's cursor, after its last step (compare.format.run_html_of). */
.run-text.running::after { content: "▍"; animation: blink 1s steps(1) infinite;
  color: var(--color-accent); }
@keyframes blink { 50% { opacity: 0; } }
.badge { display: inline-block; font-size: 0.7rem; font-family: var(--font); font-weight: 600;
  padding: 0.05rem 0.45rem; border-radius: 999px; margin-left: 0.4rem;
  background: var(--neutral-200); color: var(--neutral-800); }
.badge.stopped { background: #fde68a; color: #78350f; }
.badge.running { background: #c7d2fe; color: #312e81; }
.badge.done { background: #bbf7d0; color: #14532d; }
.stat-card { position: relative; padding: 0.2rem 0; }
.stat-card .badge { position: absolute; right: 0; top: -1.6rem; }
.stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(7.5rem, 1fr));
  gap: 0.4rem; }
.stat { border: 1px solid var(--border-color-primary); border-radius: var(--radius-md);
  padding: 0.35rem 0.55rem; background: var(--background-fill-primary); }
.stat .value { font-size: 1.05rem; font-weight: 600; font-variant-numeric: tabular-nums; }
.stat .label { font-size: 0.72rem; color: var(--body-text-color-subdued); }
.chart-note, .chart-note p { font-size: 0.8rem; color: var(--body-text-color-subdued); }
.stat-empty { color: var(--body-text-color-subdued); font-size: 0.85rem; }
"""

# A roving tabindex over the steps of the assisted text (`compare.format._step_html`): the
# text is one Tab stop rather than hundreds, the arrow keys (and Home, End) move between its
# steps, and the focused step shows its details, as on hover. Only the current step has
# tabindex 0, so Tab leaves the text and Shift+Tab comes back to the step last visited. The
# listeners sit on the document, so they hold across every update of the text.
JS = """
() => {
  const stepOf = (node) => (node instanceof Element ? node.closest(".run-text .step") : null);
  const stepsBeside = (step) => [...step.parentElement.querySelectorAll(":scope > .step")];
  document.addEventListener("focusin", (event) => {
    const focused = stepOf(event.target);
    if (!focused) return;
    for (const step of stepsBeside(focused)) step.tabIndex = step === focused ? 0 : -1;
  });
  document.addEventListener("keydown", (event) => {
    const focused = stepOf(event.target);
    if (!focused || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    const steps = stepsBeside(focused);
    const here = steps.indexOf(focused);
    const moves = { ArrowLeft: here - 1, ArrowRight: here + 1, Home: 0, End: steps.length - 1 };
    if (!(event.key in moves)) return;
    event.preventDefault();
    steps[Math.min(Math.max(moves[event.key], 0), steps.length - 1)].focus();
  });
}
"""
