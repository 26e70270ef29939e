import { describe, expect, it } from 'vitest';
import type { Cost } from './bindings';
import { budgetOf, costText, spentText, tokensText, usdText } from './cost';

const cost = (usd: number, unpricedModels: string[] = [], calls = 1): Cost => ({
  calls,
  inputTokens: 12,
  outputTokens: 4,
  usd,
  unpricedModels,
});

describe('cost text', () => {
  it('reads at every size', () => {
    expect(usdText(0)).toBe('$0');
    expect(usdText(12.345)).toBe('$12.35');
    expect(usdText(0.0123)).toBe('$0.0123');
    expect(usdText(0.000045)).toBe('$0.000045');
  });

  it('never guesses for an unpriced model', () => {
    expect(costText(cost(0.0123))).toBe('$0.0123');
    expect(costText(cost(0, ['ollama/llama3']))).toBe('no price');
    expect(costText(cost(0.5, ['ollama/llama3']))).toBe('$0.5000 + unpriced');
    expect(costText(cost(0, [], 0))).toBe('—');
    expect(costText(undefined)).toBe('—');
    expect(tokensText(cost(0.1))).toBe('12/4');
  });
});

describe('budget', () => {
  it('is read from the flow’s settings, and what was spent said against it', () => {
    expect(budgetOf(undefined)).toBeNull();
    expect(budgetOf({ budget: 'lots' })).toBeNull();
    expect(budgetOf({ budget: { onExceed: 'approve' } })).toBeNull();
    const budget = budgetOf({ budget: { maxCostUsd: 0.5, maxTokens: 200000, onExceed: 'approve' } });
    expect(budget).toEqual({ maxCostUsd: 0.5, maxTokens: 200000 });
    expect(spentText(cost(0.61), budget!)).toBe('$0.6100 of $0.50 · 16 of 200,000 tokens');
    expect(spentText(null, { maxTokens: 10 })).toBe('0 of 10 tokens');
  });
});
