// What runs cost, as History and the compare view show it: the same wording as `weft show`.

import type { Cost } from './bindings';

/** Dollars with enough digits to tell small calls apart: `$1.23`, `$0.0123`, `$0.000123`. */
export function usdText(usd: number): string {
  if (usd === 0) return '$0';
  if (usd >= 1) return `$${usd.toFixed(2)}`;
  if (usd >= 0.01) return `$${usd.toFixed(4)}`;
  return `$${usd.toFixed(6)}`;
}

/**
 * `$0.0123`, `$0.0123 + unpriced` (some calls' models have no price), `no price`, or `—` (no
 * LLM calls): a model with no price never gets a guessed figure.
 */
export function costText(cost: Cost | undefined | null): string {
  if (!cost || cost.calls === 0) return '—';
  const usd = cost.usd ?? 0;
  if (cost.unpricedModels.length === 0) return usdText(usd);
  return usd > 0 ? `${usdText(usd)} + unpriced` : 'no price';
}

/** `12/4` input/output tokens, or `—` with no LLM calls. */
export function tokensText(cost: Cost | undefined | null): string {
  if (!cost || cost.calls === 0) return '—';
  return `${cost.inputTokens}/${cost.outputTokens}`;
}
