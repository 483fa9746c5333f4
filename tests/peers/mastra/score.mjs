// @mastra/evals 1.10.2 peer script: createToolCallAccuracyScorerCode on every case.
//
// Run by tests/peers/test_differential.py and bench/scorers.py as `node tests/peers/mastra/score.mjs IN.json`
// (protocol: tests/peers/_protocol.py). Each case carries its own scorer options in `case.mastra`
// ({expectedTool, strictMode, expectedToolOrder}), because Mastra's expectations are scorer options.
// Scorers and run inputs are built before the timed loop; the loop awaits `scorer.run(...)` per case
// (with `repeat` > 1 it runs that many times and the fastest pass is reported).
//
// The run input is one user message (none when the turn has no user text); the run output holds one
// assistant message per LLM step with its tool invocations (state "result"), then the final assistant
// text message when there is one.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createToolCallAccuracyScorerCode } from "@mastra/evals/scorers/prebuilt";

const require = createRequire(import.meta.url);

function message(role, parts, id) {
  return { id, role, createdAt: new Date(0), content: { format: 2, parts } };
}

function runOf(turn) {
  const inputMessages = turn.user == null ? [] : [message("user", [{ type: "text", text: turn.user }], "u0")];
  const output = [];
  let n = 0;
  turn.steps.forEach((group, s) => {
    const parts = group.map((c) => {
      const id = `call_${n++}`;
      return {
        type: "tool-invocation",
        toolInvocation: { state: "result", toolCallId: id, toolName: c.name, args: c.args ?? {}, result: c.result ?? null },
      };
    });
    if (parts.length === 0) parts.push({ type: "text", text: "thinking" });
    output.push(message("assistant", parts, `s${s}`));
  });
  if (turn.final != null) output.push(message("assistant", [{ type: "text", text: turn.final }], "final"));
  return { input: { inputMessages, rememberedMessages: [], systemMessages: [], taggedSystemMessages: {} }, output };
}

function errorOf(e) {
  return { error: `${e?.name ?? "Error"}: ${String(e?.message ?? e).slice(0, 300)}` };
}

const doc = JSON.parse(readFileSync(process.argv[2], "utf8"));
const results = [];
for (const config of doc.configs) {
  const prepared = config.cases.map((c) => {
    try {
      const [turn] = c.turns;
      return { scorer: createToolCallAccuracyScorerCode(c.mastra), run: runOf(turn) };
    } catch (e) {
      return errorOf(e);
    }
  });
  const scores = new Array(prepared.length).fill(null);
  let elapsed = Infinity;
  for (let r = 0; r < Math.max(1, doc.repeat ?? 1); r++) {
    const start = performance.now();
    for (let i = 0; i < prepared.length; i++) {
      const p = prepared[i];
      if (p.error) continue;
      try {
        scores[i] = (await p.scorer.run(p.run)).score;
      } catch (e) {
        scores[i] = errorOf(e);
      }
    }
    elapsed = Math.min(elapsed, (performance.now() - start) / 1000);
  }
  results.push({
    id: config.id,
    scores: prepared.map((p, i) => (p.error ? p : scores[i])),
    elapsed_s: elapsed,
  });
}
const versions = {
  "@mastra/evals": require("@mastra/evals/package.json").version,
  "@mastra/core": require("@mastra/core/package.json").version,
  node: process.versions.node,
};
process.stdout.write(JSON.stringify({ peer: "mastra", versions, results }) + "\n");
