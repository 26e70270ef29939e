import { describe, expect, it } from 'vitest';
import { defaultData, fieldsOf, kindOf, kindRuns, summaryOf, templateNamesFor } from './catalog';
import type { NodeData } from './flowMapping';
import { catalog, offlineFlow } from './test/fixtures';

describe('catalog', () => {
  it('lets a kind field replace the common field of the same name', () => {
    const names = fieldsOf(catalog, kindOf(catalog, 'agent')).map((field) => field.name);
    expect(names.filter((name) => name === 'description')).toHaveLength(1);
    expect(names[0]).toBe('label');
    expect(names).toContain('retry.maxAttempts');
    const description = fieldsOf(catalog, kindOf(catalog, 'agent')).find((field) => field.name === 'description');
    expect(description?.help).toBe('Told to a parent agent.');
  });

  it("gives a new node its kind's non-null defaults, nested by dotted name, and the kind title as label", () => {
    const data = defaultData(kindOf(catalog, 'agent')!);
    expect(data).toEqual({
      label: 'Agent',
      userPrompt: '',
      model: '',
      tools: { web_search: false, subagents: false },
    });
    // Common fields (retry, description) are left to the engine's defaults.
    expect(data).not.toHaveProperty('retry');
    expect(data).not.toHaveProperty('description');
  });

  it('offers the scope names, the other nodes and the flow variables to templates', () => {
    const flow = { ...offlineFlow(), settings: { vars: { tone: 'dry' } } };
    const names = templateNamesFor(catalog, flow, 'review');
    expect(names).toContain('PREVIOUS_OUTPUT');
    expect(names).toContain('nodes.summary');
    expect(names).not.toContain('nodes.review');
    expect(names).toContain('vars.tone');
  });

  it('summarises a node by its first filled-in field', () => {
    expect(summaryOf(kindOf(catalog, 'if'), { conditions: [{}, {}] } as unknown as NodeData)).toBe('2 conditions');
    expect(summaryOf(kindOf(catalog, 'agent'), { userPrompt: 'Ticket:\n {{PREVIOUS_OUTPUT}}' })).toBe('Ticket: {{PREVIOUS_OUTPUT}}');
    expect(summaryOf(kindOf(catalog, 'start'), { initialInput: { amount: 1 } } as unknown as NodeData)).toBe('{"amount":1}');
  });

  it('knows notes never run', () => {
    expect(kindRuns(kindOf(catalog, 'note'))).toBe(false);
    expect(kindRuns(kindOf(catalog, 'start'))).toBe(true);
  });
});
