import { describe, expect, it } from 'vitest';
import { tidyLayout, type Point, type TidyDirection, type TidyEdge, type TidyNode } from './tidy';

const SIZE = { width: 184, height: 90 };

function nodesOf(...ids: string[]): TidyNode[] {
  return ids.map((id, i) => ({ id, position: { x: (i * 137) % 500, y: (i * 71) % 300 }, ...SIZE }));
}

function chain(...ids: string[]): TidyEdge[] {
  return ids.slice(1).map((id, i) => ({ source: ids[i], target: id }));
}

function boxes(nodes: TidyNode[], at: Map<string, Point>) {
  return nodes.map((node) => ({ id: node.id, ...at.get(node.id)!, width: node.width ?? 200, height: node.height ?? 100 }));
}

function overlapping(nodes: TidyNode[], at: Map<string, Point>): string[] {
  const placed = boxes(nodes, at);
  const found: string[] = [];
  for (let i = 0; i < placed.length; i++) {
    for (let j = i + 1; j < placed.length; j++) {
      const a = placed[i];
      const b = placed[j];
      if (a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height) found.push(`${a.id}/${b.id}`);
    }
  }
  return found;
}

/** Whether `target` starts after `source` ends, in `direction`. */
function after(nodes: TidyNode[], at: Map<string, Point>, source: string, target: string, direction: TidyDirection) {
  const size = (id: string) => nodes.find((node) => node.id === id)!;
  const from = at.get(source)!;
  const to = at.get(target)!;
  return direction === 'right' ? to.x >= from.x + (size(source).width ?? 0) : to.y >= from.y + (size(source).height ?? 0);
}

// flows/triage.json's shape: an if with two ways, an approval with two.
const triageNodes = [
  ...nodesOf('start', 'classify', 'route', 'draft', 'review', 'send', 'hold', 'forward'),
  { id: 'note', position: { x: 0, y: 320 }, width: 240, height: 60 },
];
const triageEdges: TidyEdge[] = [
  { source: 'start', target: 'classify' },
  { source: 'classify', target: 'route' },
  { source: 'route', target: 'draft', port: 0 },
  { source: 'route', target: 'forward', port: 1 },
  { source: 'draft', target: 'review' },
  { source: 'review', target: 'send', port: 0 },
  { source: 'review', target: 'hold', port: 1 },
];

describe('tidyLayout', () => {
  for (const direction of ['right', 'down'] as const) {
    it(`puts each node after the ones it follows, without overlaps (${direction})`, () => {
      const at = tidyLayout(triageNodes, triageEdges, { direction });
      expect(at.size).toBe(triageNodes.length);
      expect(overlapping(triageNodes, at)).toEqual([]);
      for (const edge of triageEdges) expect(after(triageNodes, at, edge.source, edge.target, direction), `${edge.source}→${edge.target}`).toBe(true);
    });
  }

  it('lays a chain out in one straight line, layer by layer', () => {
    const nodes = nodesOf('start', 'a', 'b', 'c');
    const at = tidyLayout(nodes, chain('start', 'a', 'b', 'c'), { direction: 'right', layerGap: 50 });
    const ys = new Set(nodes.map((node) => at.get(node.id)!.y));
    expect(ys.size).toBe(1);
    expect(nodes.map((node) => at.get(node.id)!.x - at.get('start')!.x)).toEqual([0, 234, 468, 702]);
  });

  it('wraps layers that would reach past `wrap` into a band under the first, as lines of text', () => {
    const at = tidyLayout(triageNodes, triageEdges, { direction: 'right', wrap: 700 });
    expect(overlapping(triageNodes, at)).toEqual([]);
    const right = Math.max(...triageNodes.map((node) => at.get(node.id)!.x + node.width!));
    const left = Math.min(...triageNodes.map((node) => at.get(node.id)!.x));
    expect(right - left).toBeLessThanOrEqual(700);
    // Three layers a band: the approval's band starts under the first, at its left.
    expect(at.get('draft')!.x).toBe(at.get('start')!.x);
    expect(at.get('draft')!.y).toBeGreaterThanOrEqual(Math.max(...['start', 'classify', 'route'].map((id) => at.get(id)!.y + SIZE.height)));
    for (const edge of triageEdges.filter((edge) => edge.source !== 'route')) {
      expect(after(triageNodes, at, edge.source, edge.target, 'right'), `${edge.source}→${edge.target}`).toBe(true);
    }
    const down = tidyLayout(triageNodes, triageEdges, { direction: 'down', wrap: 500 });
    expect(overlapping(triageNodes, down)).toEqual([]);
    expect(down.get('draft')!.x).toBeGreaterThan(down.get('route')!.x);
  });

  it('puts a layer in the longest path’s place: a join after its slowest branch', () => {
    const nodes = nodesOf('start', 'a', 'b', 'c', 'join');
    const edges = [...chain('start', 'a', 'b', 'join'), ...chain('start', 'c', 'join')];
    const at = tidyLayout(nodes, edges, { direction: 'right' });
    expect(at.get('join')!.x).toBeGreaterThan(at.get('b')!.x);
    expect(at.get('c')!.x).toBe(at.get('a')!.x);
    expect(overlapping(nodes, at)).toEqual([]);
  });

  it('keeps the targets of an if in the order of its handles', () => {
    const nodes = nodesOf('start', 'if', 'no', 'yes');
    const edges: TidyEdge[] = [...chain('start', 'if'), { source: 'if', target: 'no', port: 1 }, { source: 'if', target: 'yes', port: 0 }];
    const right = tidyLayout(nodes, edges, { direction: 'right' });
    expect(right.get('yes')!.y).toBeLessThan(right.get('no')!.y);
    const down = tidyLayout(nodes, edges, { direction: 'down' });
    expect(down.get('yes')!.x).toBeLessThan(down.get('no')!.x);
  });

  it('ends on loops, and lays out what only a loop leads back to', () => {
    // A review loop (gate → revise → gate), a counter looping on itself through an if, and
    // a circle no start reaches.
    const nodes = nodesOf('start', 'draft', 'gate', 'revise', 'publish', 'x', 'y', 'z');
    const edges: TidyEdge[] = [
      ...chain('start', 'draft', 'gate', 'publish'),
      { source: 'gate', target: 'revise', port: 1 },
      { source: 'revise', target: 'gate' },
      { source: 'gate', target: 'gate' },
      ...chain('x', 'y', 'z', 'x'),
    ];
    const at = tidyLayout(nodes, edges, { direction: 'right' });
    expect(at.size).toBe(nodes.length);
    expect(overlapping(nodes, at)).toEqual([]);
    expect(after(nodes, at, 'draft', 'gate', 'right')).toBe(true);
    expect(after(nodes, at, 'gate', 'revise', 'right')).toBe(true);
    expect(after(nodes, at, 'x', 'y', 'right') && after(nodes, at, 'y', 'z', 'right')).toBe(true);
  });

  it('lays out a large flow full of loops quickly', () => {
    const ids = Array.from({ length: 1000 }, (_, i) => `n${i}`);
    const nodes = nodesOf(...ids);
    const edges: TidyEdge[] = [...chain(...ids)];
    for (let i = 10; i < 1000; i += 7) edges.push({ source: ids[i], target: ids[i - 9] });
    for (let i = 0; i < 990; i += 13) edges.push({ source: ids[i], target: ids[i + 5] });
    const started = performance.now();
    const at = tidyLayout(nodes, edges, { direction: 'down' });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(at.size).toBe(1000);
    for (let i = 1; i < 1000; i++) expect(at.get(ids[i])!.y).toBeGreaterThan(at.get(ids[i - 1])!.y);
  });

  it('places nodes nothing is wired to after the flow, not on it', () => {
    const nodes = [...nodesOf('start', 'a', 'b'), ...nodesOf('note1', 'note2')];
    const at = tidyLayout(nodes, chain('start', 'a', 'b'), { direction: 'right' });
    expect(overlapping(nodes, at)).toEqual([]);
    const bottom = Math.max(...['start', 'a', 'b'].map((id) => at.get(id)!.y + SIZE.height));
    expect(at.get('note1')!.y).toBeGreaterThanOrEqual(bottom);
    expect(at.get('note2')!.y).toBe(at.get('note1')!.y);
    const down = tidyLayout(nodes, chain('start', 'a', 'b'), { direction: 'down' });
    const right = Math.max(...['start', 'a', 'b'].map((id) => down.get(id)!.x + SIZE.width));
    expect(down.get('note1')!.x).toBeGreaterThanOrEqual(right);
  });

  it('lays out a flow of nodes with no edges at all', () => {
    const nodes = nodesOf('a', 'b', 'c', 'd', 'e');
    const at = tidyLayout(nodes, [], { direction: 'right' });
    expect(at.size).toBe(5);
    expect(overlapping(nodes, at)).toEqual([]);
  });

  it('puts subagents by the agent that calls them, out of the layers', () => {
    const nodes = nodesOf('start', 'lead', 'researcher', 'writer', 'result');
    const edges: TidyEdge[] = [
      ...chain('start', 'lead', 'result'),
      { source: 'lead', target: 'researcher', subagent: true },
      { source: 'lead', target: 'writer', subagent: true },
      // Two agents that would call each other: neither hangs the layout.
      { source: 'researcher', target: 'lead', subagent: true },
    ];
    for (const direction of ['right', 'down'] as const) {
      const at = tidyLayout(nodes, edges, { direction });
      expect(overlapping(nodes, at)).toEqual([]);
      const lead = at.get('lead')!;
      for (const child of ['researcher', 'writer']) {
        const place = at.get(child)!;
        // Under the agent (its subagent handle is on its bottom edge), close by.
        expect(place.y).toBeGreaterThanOrEqual(lead.y + SIZE.height);
        expect(place.y - lead.y).toBeLessThan(3 * (SIZE.height + 40));
        expect(Math.abs(place.x - lead.x)).toBeLessThan(2 * SIZE.width);
      }
      expect(after(nodes, at, 'start', 'lead', direction) && after(nodes, at, 'lead', 'result', direction)).toBe(true);
    }
  });

  it('uses the sizes it is given, else a default', () => {
    const nodes: TidyNode[] = [{ id: 'a', width: 400, height: 300 }, { id: 'b' }, { id: 'c', width: 10, height: 10 }];
    const at = tidyLayout(nodes, [...chain('a', 'b'), { source: 'a', target: 'c' }], { direction: 'right', layerGap: 20, nodeGap: 10 });
    expect(at.get('b')!.x - at.get('a')!.x).toBe(420);
    expect(overlapping(nodes, at)).toEqual([]);
  });

  it('is deterministic, and keeps the flow’s top left corner where it was', () => {
    const first = tidyLayout(triageNodes, triageEdges, { direction: 'right' });
    const second = tidyLayout(triageNodes, triageEdges, { direction: 'right' });
    expect([...second]).toEqual([...first]);
    expect(Math.min(...[...first.values()].map((point) => point.x))).toBe(0);
    expect(Math.min(...[...first.values()].map((point) => point.y))).toBe(0);
    const moved = tidyLayout(
      triageNodes.map((node) => ({ ...node, position: { x: node.position!.x + 500, y: node.position!.y - 40 } })),
      triageEdges,
      { direction: 'right' },
    );
    expect(moved.get('start')).toEqual({ x: first.get('start')!.x + 500, y: first.get('start')!.y - 40 });
  });

  it('orders a layer so that edges do not cross when they need not', () => {
    // a feeds d, b feeds c: with c above d, a layer sorted by the walk would cross them.
    const nodes = nodesOf('start', 'a', 'b', 'c', 'd');
    const edges: TidyEdge[] = [...chain('start', 'a', 'd'), ...chain('start', 'b', 'c'), { source: 'start', target: 'c' }];
    const at = tidyLayout(nodes, edges, { direction: 'right' });
    expect(at.get('a')!.y < at.get('b')!.y).toBe(at.get('d')!.y < at.get('c')!.y);
  });
});
