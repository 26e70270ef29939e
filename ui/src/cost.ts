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

/** A flow's `settings.budget`, as far as the canvas shows it. */
export interface BudgetLimits {
  maxCostUsd?: number;
  maxTokens?: number;
}

/** The budget `settings` give, if any. */
export function budgetOf(settings: Record<string, unknown> | undefined): BudgetLimits | null {
  const budget = settings?.budget;
  if (typeof budget !== 'object' || budget === null || Array.isArray(budget)) return null;
  const { maxCostUsd, maxTokens } = budget as Record<string, unknown>;
  const limits: BudgetLimits = {};
  if (typeof maxCostUsd === 'number') limits.maxCostUsd = maxCostUsd;
  if (typeof maxTokens === 'number') limits.maxTokens = maxTokens;
  return limits.maxCostUsd === undefined && limits.maxTokens === undefined ? null : limits;
}

/** What a run spent of its budget: `$0.60 of $0.50 · 1,200 of 5,000 tokens`. */
export function spentText(cost: Cost | undefined | null, budget: BudgetLimits): string {
  const parts: string[] = [];
  if (budget.maxCostUsd !== undefined) {
    // A limit is shown as it was written: $0.50, not $0.5000.
    const cents = budget.maxCostUsd * 100;
    const limit = Math.abs(cents - Math.round(cents)) < 1e-9 ? `$${budget.maxCostUsd.toFixed(2)}` : usdText(budget.maxCostUsd);
    parts.push(`${usdText(cost?.usd ?? 0)} of ${limit}`);
  }
  if (budget.maxTokens !== undefined) {
    const tokens = (cost?.inputTokens ?? 0) + (cost?.outputTokens ?? 0);
    parts.push(`${tokens.toLocaleString('en')} of ${budget.maxTokens.toLocaleString('en')} tokens`);
  }
  return parts.join(' · ');
}
