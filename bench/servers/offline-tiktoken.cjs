// Preloaded into Flowise (node --require): LangChain downloads its tokenizer tables from
// tiktoken.pages.dev the first time it counts tokens, and retries for minutes when that host
// cannot be reached, as on a machine that reaches only package registries. A deployment with
// internet access downloads each table once; this answers those requests at once from the copy
// the js-tiktoken package installed, so Flowise is measured as such a deployment, not waiting.

const path = require("node:path");

const root = process.env.WEFT_BENCH_FLOWISE_ROOT;
const realFetch = globalThis.fetch;

globalThis.fetch = async (input, init) => {
  const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
  const table = /^https:\/\/tiktoken\.pages\.dev\/js\/(\w+)\.json$/.exec(url);
  if (table) {
    const ranks = require(path.join(root, "node_modules", "js-tiktoken", "dist", "ranks", `${table[1]}.cjs`));
    return new Response(JSON.stringify(ranks.default ?? ranks), {
      status: 200,
      headers: { "content-type": "application/json" },
    });
  }
  return realFetch(input, init);
};
