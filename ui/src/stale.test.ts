import { describe, expect, it } from 'vitest';
import type { Value } from './bindings';
import type { CanvasFlow } from './flowMapping';
import { earliestStale, staleNodes } from './stale';
import { offlineFlow } from './test/fixtures';

function edited(flow: CanvasFlow, nodeId: string, data: Record<string, Value>): CanvasFlow {
  return {
    ...flow,
    nodes: flow.nodes.map((node) => (node.id === nodeId ? { ...node, data: { ...node.data, ...data } } : node)),
  };
}

describe('stale marks', () => {
  it('mark an edited node and everything after it, and nothing without a run', () => {
    const ran = offlineFlow();
    expect(staleNodes(null, ran).size).toBe(0);
    expect([...staleNodes(ran, ran)]).toEqual([]);
    const now = edited(ran, 'summary', { template: '{{ customer }}!' });
    const stale = staleNodes(ran, now);
    expect(stale.has('summary')).toBe(true);
    expect(stale.has('large')).toBe(true);
    expect(stale.has('review')).toBe(true);
    expect(stale.has('start')).toBe(false);
    expect(earliestStale(now, stale)).toBe('summary');
  });

  it('a moved node is not stale; a rewired one is', () => {
    const ran = offlineFlow();
    const moved = { ...ran, nodes: ran.nodes.map((node) => (node.id === 'auto' ? { ...node, position: { x: 5, y: 5 } } : node)) };
    expect(staleNodes(ran, moved).size).toBe(0);
    const rewired = { ...ran, edges: ran.edges.filter((edge) => edge.target !== 'auto') };
    expect(staleNodes(ran, rewired).has('auto')).toBe(true);
  });
});
